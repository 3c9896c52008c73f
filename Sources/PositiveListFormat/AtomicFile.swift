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
        let descriptor = open(temporary, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { throw .cannotWrite(path: temporary, reason: lastError()) }
        let synced = fsync(descriptor) == 0
        let failure = writeFailure(temporary)
        close(descriptor)
        guard synced else { throw failure }
        guard rename(temporary, path) == 0 else { throw .cannotWrite(path: path, reason: lastError()) }
        try syncDirectory((path as NSString).deletingLastPathComponent)
    }

    /// `beforeRename` runs after the temporary file is durable and before it replaces the
    /// target: the publisher's fault injection uses it to prove that a crash there is harmless.
    public static func write(
        _ bytes: [UInt8], to path: String, mode: mode_t = 0o644, beforeRename: () throws -> Void = {}
    ) throws(FileWriteError) {
        let directory = (path as NSString).deletingLastPathComponent
        let temporary = temporaryPath(for: path)
        let descriptor = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode)
        guard descriptor >= 0 else {
            throw errno == ENOSPC || errno == EDQUOT ? .diskFull(path: temporary) : .cannotCreate(path: temporary, reason: lastError())
        }
        var written = 0
        while written < bytes.count {
            let result = bytes.withUnsafeBytes { buffer in
                Glibc.write(descriptor, buffer.baseAddress! + written, buffer.count - written)
            }
            if result < 0 && errno == EINTR { continue }
            guard result > 0 else {
                let failure = writeFailure(temporary)
                close(descriptor)
                unlink(temporary)
                throw failure
            }
            written += result
        }
        // The mode passed to open() is narrowed by the umask; published files must be readable
        // by the web server's user whatever the umask of whoever ran `publish`.
        fchmod(descriptor, mode)
        guard fsync(descriptor) == 0 else {
            let failure = writeFailure(temporary)
            close(descriptor)
            unlink(temporary)
            throw failure
        }
        close(descriptor)
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
        try syncDirectory(directory)
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
