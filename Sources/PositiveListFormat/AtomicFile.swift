import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Durable whole-file replacement: write a temporary file beside the target, fsync it, rename
/// it over the target, fsync the directory. A reader (or a crash) sees the old file or the new
/// one, never a mix. Shared by the server (publishing) and the node (its list cache).
public enum AtomicFile {
    public static let temporaryPrefix = ".tmp-"

    /// A fresh temporary path beside `path`, for a caller that fills the file itself (a download)
    /// and then calls `install(_:at:)`.
    public static func temporaryPath(for path: String) -> String {
        let directory = (path as NSString).deletingLastPathComponent
        let name = (path as NSString).lastPathComponent
        return directory + "/" + temporaryPrefix + name + "-" + UUID().uuidString
    }

    /// Makes a complete temporary file durable and renames it over `path`.
    public static func install(_ temporary: String, at path: String) throws(FileWriteError) {
        try syncFile(temporary)
        guard rename(temporary, path) == 0 else { throw .cannotWrite(path: path, reason: lastError()) }
        try syncDirectory((path as NSString).deletingLastPathComponent)
    }

    /// `beforeRename` runs after the temporary file is written in full (and, when `durable`,
    /// synced) and before it replaces the target: the publisher's fault injection uses it to
    /// prove that a crash there is harmless.
    ///
    /// `durable: false` leaves out both fsyncs: a reader still sees the old file or the new one,
    /// never a part, but a crash of the machine may lose the newest version (or, on some file
    /// systems, leave the file empty). For a file rewritten often and soon again, where waiting
    /// for the disk at every write would wear flash storage for nothing (the node's metrics).
    public static func write(
        _ bytes: [UInt8], to path: String, mode: mode_t = 0o644, durable: Bool = true, beforeRename: () throws -> Void = {}
    ) throws(FileWriteError) {
        let temporary = try writeTemporary(bytes, for: path, mode: mode)
        do {
            if durable { try syncFile(temporary) }
        } catch {
            unlink(temporary)
            throw error
        }
        do {
            try beforeRename()
        } catch {
            // Left in place on purpose: a real crash would leave it too, and the writer's next
            // run removes stale temporary files.
            throw .interrupted(path: temporary)
        }
        guard rename(temporary, path) == 0 else {
            let reason = lastError()
            unlink(temporary)
            throw .cannotWrite(path: path, reason: reason)
        }
        if durable { try syncDirectory((path as NSString).deletingLastPathComponent) }
    }

    /// `write(_:to:)` for many files at once, for a writer that replaces hundreds together (a log
    /// append: about 786 tiles and entry bundles for 100,000 entries). One `write` each waits for
    /// the disk twice per file (the file's fsync, then its directory's) before writing the next:
    /// 1.3-3.2 s for such an append on a shared disk, over issue 39's 1 s (BENCHMARKS.md,
    /// "log-append"). Here every temporary file is written first, then each is fsynced (one wait
    /// per file instead of two, none between the writes), then all are renamed and each directory
    /// fsynced once: about half the time (BENCHMARKS.md, "made durable together").
    ///
    /// On return every file of `files` is durable under its final name, as after `write` for
    /// each; the directories above theirs are the caller's (a directory it created must be
    /// fsynced in its parent). A file already there with the same bytes is not rewritten, only
    /// fsynced: a rerun after a crash that renamed part of a batch replaces nothing a reader may
    /// hold open, and still knows it durable. A failure before the renames (a full disk: always
    /// `.diskFull`) removes every temporary file and leaves every final name as it was; a
    /// failure at a rename (rare: the directory cannot grow) leaves the files renamed before it,
    /// each whole and durable, and removes the other temporary files.
    ///
    /// Returns the directories holding `files`, each fsynced.
    @discardableResult
    public static func writeAll(_ files: [(bytes: [UInt8], path: String)], mode: mode_t = 0o644) throws(FileWriteError) -> Set<String> {
        var directories = Set<String>()
        var unchanged: [String] = []
        var temporaries: [(temporary: String, path: String)] = []
        do throws(FileWriteError) {
            for file in files {
                directories.insert((file.path as NSString).deletingLastPathComponent)
                if let existing = FileManager.default.contents(atPath: file.path), existing.count == file.bytes.count, [UInt8](existing) == file.bytes {
                    unchanged.append(file.path)
                    continue
                }
                temporaries.append((try writeTemporary(file.bytes, for: file.path, mode: mode), file.path))
            }
            for file in temporaries { try syncFile(file.temporary) }
            for path in unchanged { try syncFile(path) }
        } catch {
            for file in temporaries { unlink(file.temporary) }
            throw error
        }
        for (index, file) in temporaries.enumerated() {
            guard rename(file.temporary, file.path) == 0 else {
                let reason = lastError()
                for rest in temporaries[index...] { unlink(rest.temporary) }
                throw .cannotWrite(path: file.path, reason: reason)
            }
        }
        for directory in directories { try syncDirectory(directory) }
        return directories
    }

    /// A new temporary file beside `path` holding `bytes`, not yet durable; nothing is left
    /// when it throws.
    private static func writeTemporary(_ bytes: [UInt8], for path: String, mode: mode_t) throws(FileWriteError) -> String {
        let temporary = temporaryPath(for: path)
        let descriptor = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode)
        guard descriptor >= 0 else {
            throw errno == ENOSPC || errno == EDQUOT ? .diskFull(path: temporary) : .cannotCreate(path: temporary, reason: lastError())
        }
        defer { close(descriptor) }
        var written = 0
        while written < bytes.count {
            let result = bytes.withUnsafeBytes { buffer in
                Glibc.write(descriptor, buffer.baseAddress! + written, buffer.count - written)
            }
            if result < 0 && errno == EINTR { continue }
            guard result > 0 else {
                let failure = writeFailure(temporary)
                unlink(temporary)
                throw failure
            }
            written += result
        }
        // The mode passed to open() is narrowed by the umask; published files must be readable
        // by the web server's user whatever the umask of whoever ran `publish`.
        fchmod(descriptor, mode)
        return temporary
    }

    /// fsync of a whole file, reopened by its path: a batch may hold more files than a process
    /// may keep open.
    private static func syncFile(_ path: String) throws(FileWriteError) {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { throw .cannotWrite(path: path, reason: lastError()) }
        defer { close(descriptor) }
        guard fsync(descriptor) == 0 else { throw writeFailure(path) }
    }

    public static func syncDirectory(_ directory: String) throws(FileWriteError) {
        let descriptor = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard descriptor >= 0 else { throw .cannotWrite(path: directory, reason: lastError()) }
        defer { close(descriptor) }
        guard fsync(descriptor) == 0 else { throw .cannotWrite(path: directory, reason: lastError()) }
    }

    public static func lastError() -> String { String(cString: strerror(errno)) }

    /// The error for a write that just failed (`errno` still set): a full disk (or quota) is told
    /// apart, because its fix is to free space, not to look at permissions.
    static func writeFailure(_ path: String) -> FileWriteError {
        errno == ENOSPC || errno == EDQUOT ? .diskFull(path: path) : .cannotWrite(path: path, reason: lastError())
    }
}

public enum FileWriteError: Error, Sendable, Equatable, CustomStringConvertible {
    case cannotCreate(path: String, reason: String)
    case cannotWrite(path: String, reason: String)
    case interrupted(path: String)
    /// The file system holding `path` is full (or the quota used up); the file it was to replace,
    /// if any, is unchanged.
    case diskFull(path: String)

    public var description: String {
        switch self {
        case .cannotCreate(let path, let reason):
            return "Cannot create \(path) (\(reason)); check the directory's permissions and free space."
        case .cannotWrite(let path, let reason):
            return "Cannot write \(path) (\(reason)); check free space and permissions, then try again."
        case .interrupted(let path):
            return "Writing \(path) was interrupted before it replaced the previous file; try again."
        case .diskFull(let path):
            return "The disk holding \((path as NSString).deletingLastPathComponent) is full (the files already there are unchanged); free some space there, then try again."
        }
    }
}
