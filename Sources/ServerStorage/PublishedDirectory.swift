import Foundation
import PositiveListFormat
#if canImport(Glibc)
import Glibc
#endif

/// The directory of published files: the list log (`log/checkpoint`, `log/tile/...`) and the
/// upload policy (`log/uploads`), self-contained, so any static web server or CDN can serve it
/// as it is.
///
/// Formats 1 and 2 (`index.tpli` and `batches/N.tplb`, `keys/index.tpki` and `keys/N.tpkb`)
/// are retired: nothing writes them any more. A directory an older tracer-server published
/// still holds them until an open of the database finds every live batch's content copied in
/// (``RecordedBatchFile``), which then deletes them (``removeRetiredFiles()``); until then they
/// are the only copy of what those batches published.
public struct PublishedDirectory: Sendable {
    public let path: String

    public init(path: String) {
        self.path = path
    }

    /// The log (format version 3): `log/checkpoint` and `log/tile/...`.
    public var logPath: String { path + "/log" }
    public var logCheckpointPath: String { logPath + "/checkpoint" }
    /// The authority's upload policy, signed by the log's key (``UploadPolicyNote``).
    public var uploadPolicyPath: String { path + "/" + UploadPolicyNote.relativePath }

    // MARK: Retired files (formats 1 and 2), read only by the upgrade

    /// The names, relative to the directory, of what formats 1 and 2 kept here: the id index, then
    /// the folders of the id batches and of the key index and key batches.
    public static let retiredNames = [PositiveListIndex.relativePath, "batches", "keys"]

    public var retiredIndexPath: String { path + "/" + PositiveListIndex.relativePath }

    /// Where an older tracer-server wrote id batch `number`.
    public func retiredBatchPath(number: UInt64) -> String { path + "/" + PositiveListBatch.relativePath(number: number) }

    /// Where an older tracer-server wrote key batch `number`.
    public func retiredKeyBatchPath(number: UInt64) -> String { path + "/" + PositiveListKeyBatch.relativePath(number: number) }

    /// The numbers of the retired id batch files (`batches/N.tplb`) and key batch files
    /// (`keys/N.tpkb`) present here.
    package func retiredBatchFileNumbers() -> (ids: [UInt64], keys: [UInt64]) {
        (Self.numbers(in: path + "/batches", suffix: ".tplb"), Self.numbers(in: path + "/keys", suffix: ".tpkb"))
    }

    private static func numbers(in directory: String, suffix: String) -> [UInt64] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
        return names.compactMap { name in
            guard name.hasSuffix(suffix) else { return nil }
            return UInt64(name.dropLast(suffix.count))
        }
    }

    /// Those of ``retiredNames`` present here.
    public func retiredFilesPresent() -> [String] {
        Self.retiredNames.filter { FileManager.default.fileExists(atPath: path + "/" + $0) }
    }

    /// Deletes the retired files: the id index first (a web server then names no batch that is
    /// going), then the folders with everything in them. Returns the names deleted; one that
    /// could not be is left and named in `failures`.
    package func removeRetiredFiles() -> (removed: [String], failures: [String: String]) {
        var removed: [String] = []
        var failures: [String: String] = [:]
        for name in retiredFilesPresent() {
            do {
                try FileManager.default.removeItem(atPath: path + "/" + name)
                removed.append(name)
            } catch {
                failures[name] = (error as NSError).localizedDescription
            }
        }
        return (removed, failures)
    }

    /// Creates the directory, world-readable so a web server's user can serve it.
    public func prepare() throws(FileWriteError) {
        var isDirectory: ObjCBool = false
        if FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) {
            guard isDirectory.boolValue else { throw .cannotCreate(path: path, reason: "a file of that name is in the way") }
            return
        }
        guard mkdir(path, 0o755) == 0 || errno == EEXIST else {
            throw .cannotCreate(path: path, reason: AtomicFile.lastError())
        }
        chmod(path, 0o755)
    }

    /// Removes temporary files a crashed writer left behind.
    package func removeStaleTemporaryFiles() {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []
        for name in names where name.hasPrefix(AtomicFile.temporaryPrefix) {
            unlink(path + "/" + name)
        }
    }
}
