import Foundation
import PositiveListFormat
#if canImport(Glibc)
import Glibc
#endif

/// The directory of published files: `index.tpli` and `batches/N.tplb`, `keys/index.tpki` and
/// `keys/N.tpkb`, self-contained, so any static web server or CDN can serve it as it is.
public struct PublishedDirectory: Sendable {
    public let path: String

    public init(path: String) {
        self.path = path
    }

    public var indexPath: String { path + "/" + PositiveListIndex.relativePath }
    public var batchesPath: String { path + "/batches" }

    public func batchPath(number: UInt64) -> String { path + "/" + PositiveListBatch.relativePath(number: number) }

    public var keyIndexPath: String { path + "/" + PositiveListKeyIndex.relativePath }
    public var keysPath: String { path + "/keys" }

    public func keyBatchPath(number: UInt64) -> String { path + "/" + PositiveListKeyBatch.relativePath(number: number) }

    /// The log (format version 3): `log/checkpoint` and `log/tile/...`.
    public var logPath: String { path + "/log" }
    public var logCheckpointPath: String { logPath + "/checkpoint" }
    /// The authority's upload policy, signed by the log's key (``UploadPolicyNote``).
    public var uploadPolicyPath: String { path + "/" + UploadPolicyNote.relativePath }

    /// Creates the directory tree, world-readable so a web server's user can serve it.
    public func prepare() throws(FileWriteError) {
        for directory in [path, batchesPath, keysPath] {
            var isDirectory: ObjCBool = false
            if FileManager.default.fileExists(atPath: directory, isDirectory: &isDirectory) {
                guard isDirectory.boolValue else { throw .cannotCreate(path: directory, reason: "a file of that name is in the way") }
                continue
            }
            guard mkdir(directory, 0o755) == 0 || errno == EEXIST else {
                throw .cannotCreate(path: directory, reason: AtomicFile.lastError())
            }
            chmod(directory, 0o755)
        }
    }

    /// Batch numbers of the `N.tplb` files present.
    func batchFileNumbers() -> [UInt64] { Self.numbers(in: batchesPath, suffix: ".tplb") }

    /// Key batch numbers of the `keys/N.tpkb` files present.
    func keyBatchFileNumbers() -> [UInt64] { Self.numbers(in: keysPath, suffix: ".tpkb") }

    private static func numbers(in directory: String, suffix: String) -> [UInt64] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
        return names.compactMap { name in
            guard name.hasSuffix(suffix) else { return nil }
            return UInt64(name.dropLast(suffix.count))
        }
    }

    /// Removes temporary files a crashed writer left behind.
    func removeStaleTemporaryFiles() {
        for directory in [path, batchesPath, keysPath] {
            let names = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
            for name in names where name.hasPrefix(AtomicFile.temporaryPrefix) {
                unlink(directory + "/" + name)
            }
        }
    }
}

/// An exclusive lock on the data directory's `publish.lock`, held while publishing, so the
/// schedule inside `serve` and a `tracer-server publish` run never interleave.
final class PublishLock {
    private let descriptor: Int32

    init(path: String) throws(FileWriteError) {
        descriptor = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { throw .cannotCreate(path: path, reason: AtomicFile.lastError()) }
        while flock(descriptor, LOCK_EX) != 0 {
            guard errno == EINTR else {
                let reason = AtomicFile.lastError()
                close(descriptor)
                throw .cannotWrite(path: path, reason: "cannot lock it: " + reason)
            }
        }
    }

    deinit {
        flock(descriptor, LOCK_UN)
        close(descriptor)
    }
}
