import Crypto
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Where a node that stops while its store refuses writes (a file system Linux turned read-only, a
/// full disk, a database another process locks) keeps the encounters it still holds in memory, so
/// that stopping it to mend the disk loses nothing: a store of the same schema in a runtime
/// directory (a tmpfs: systemd's `RuntimeDirectory=`, or the user's `$XDG_RUNTIME_DIR`), on another
/// file system than the failed one. The node's next start writes it into the store and removes it.
///
/// A tmpfs is memory: what it holds is gone when the machine restarts, as the node's memory is, so
/// this keeps the encounters across a stop, an fsck and a new mount, not across a reboot. It holds
/// what the store would (peer ids, times, signal, place), in a 0600 file in a 0700 directory, and
/// `tracer forget` removes it with the store.
public struct EncounterSpill: Sendable {
    /// Where a spill may be, in order of preference: one store per runtime directory
    /// (`candidateDirectories`), named after the node's store's real path, so that nodes with
    /// stores of their own on one machine each find their own.
    public let locations: [StoreLocation]

    /// The directory name under `$XDG_RUNTIME_DIR` and `/run`.
    static let directoryName = "tracer"

    public init(forStoreAt storePath: String, environment: [String: String]) {
        self.init(directories: Self.candidateDirectories(environment: environment), storePath: storePath)
    }

    init(directories: [String], storePath: String) {
        let name = Self.fileName(forStoreAt: storePath)
        locations = directories.map { StoreLocation(path: $0 + "/" + name, source: .flag, ownsDirectory: true) }
    }

    /// systemd's `$RUNTIME_DIRECTORY` (a list; the first), `$XDG_RUNTIME_DIR/tracer`, `/run/tracer`.
    /// All are looked in: `tracer forget` run from a shell does not see the service's
    /// `$RUNTIME_DIRECTORY`.
    static func candidateDirectories(environment: [String: String]) -> [String] {
        var directories: [String] = []
        if let runtime = environment["RUNTIME_DIRECTORY"]?.split(separator: ":").first, runtime.hasPrefix("/") {
            directories.append(String(runtime))
        }
        if let user = environment["XDG_RUNTIME_DIR"], user.hasPrefix("/") {
            directories.append(user + "/" + directoryName)
        }
        directories.append("/run/" + directoryName)
        var seen = Set<String>()
        return directories.filter { seen.insert($0).inserted }
    }

    /// A name that says what the file is and whose store it belongs to, without the store's path.
    static func fileName(forStoreAt storePath: String) -> String {
        let real = ReadOnlyFileSystem.realFile(storePath)
        let digest = SHA256.hash(data: Data(real.utf8)).prefix(8).map { String(format: "%02x", $0) }.joined()
        return "unwritten-encounters-\(digest).db"
    }

    /// The spills there are now.
    public var existing: [StoreLocation] { locations.filter(\.exists) }

    /// What `take` read: the encounters of every spill it could read, where they were, and the
    /// spills it could not read (left where they are: only `discardAll` removes them).
    public struct Taken: Sendable {
        public var batch = SightingBatch()
        public var from: [StoreLocation] = []
        public var unreadable: [(location: StoreLocation, error: StoreError)] = []
    }

    /// Keeps `batch` in place of the spills in `held` (whose encounters the batch holds, once
    /// `take` gave them back), in the first runtime directory that takes it and holds no other
    /// spill; returns where. A spill not in `held` (one `take` could not read) is never touched.
    @discardableResult
    public func keep(_ batch: SightingBatch, replacing held: [StoreLocation] = []) throws(StoreError) -> StoreLocation {
        try discard(held)
        var lastError = StoreError.cannotCreateDirectory(path: "/run/" + Self.directoryName, reason: "no runtime directory")
        for location in locations where !location.exists {
            do throws(StoreError) {
                let store = try NodeStore.open(location)
                try store.write(batch)
                try store.checkpoint()
                // Out of WAL mode, so that `take` reads it without creating a -wal or -shm.
                try store.writeOutsideTransaction { db in try db.execute(sql: "PRAGMA journal_mode = DELETE") }
                return location
            } catch {
                lastError = error
                try? Self.remove(location)
            }
        }
        throw lastError
    }

    /// What is kept, read without writing anything (a reader such as `tracer status` must not
    /// create a spill, nor its -wal or -shm); nil when there is none. The files stay until
    /// `discard`, once the batch is in the node's store.
    public func take() -> Taken? {
        let kept = existing
        guard !kept.isEmpty else { return nil }
        var taken = Taken()
        for location in kept {
            do throws(StoreError) {
                for encounter in try NodeStore.openReadOnly(location).encounters() { taken.batch.add(encounter) }
                taken.from.append(location)
            } catch {
                taken.unreadable.append((location, error))
            }
        }
        return taken
    }

    /// Removes the spills in `held` with their WAL and shared-memory files.
    public func discard(_ held: [StoreLocation]) throws(StoreError) {
        for location in held { try Self.remove(location) }
    }

    /// Removes every spill there is, read or not (`tracer forget`).
    public func discardAll() throws(StoreError) {
        try discard(locations)
    }

    private static func remove(_ location: StoreLocation) throws(StoreError) {
        for file in [location.path, location.path + "-wal", location.path + "-shm"] {
            if unlink(file) != 0 && errno != ENOENT {
                throw .cannotCreateFile(path: file, reason: "could not delete it: " + String(cString: strerror(errno)))
            }
        }
    }
}
