import Foundation
import GRDB
#if canImport(Glibc)
import Glibc
import SQLiteSupport
#endif

/// The node's SQLite database: its own id history, the daily keys its ids derive from, and the
/// encounters it logged.
///
/// One file per node, mode 0600 in a 0700 directory, in WAL mode so a reader (`tracer status`)
/// never blocks the writer and a killed process leaves a consistent file. Deleted rows are
/// overwritten (`secure_delete`) and the WAL is truncated after a purge, so expired data does
/// not linger in free pages.
public final class NodeStore: Sendable {
    public let location: StoreLocation
    let queue: DatabaseQueue

    /// Opens (creating if needed) the database at `location` and brings its schema up to date.
    ///
    /// An existing file is inspected first through a connection that writes nothing: a file that
    /// is not a Tracer database, or one from a newer tracer, is refused before it is touched
    /// (no WAL switch, no permission change).
    public static func open(_ location: StoreLocation) throws(StoreError) -> NodeStore {
        try prepareDirectory(for: location)
        if location.exists {
            try inspectExistingFile(at: location)
        }
        try createPrivateFile(at: location)
        var configuration = Configuration()
        configuration.journalMode = .wal
        configuration.busyMode = .timeout(5)
        configuration.label = "tracer.store"
        configuration.prepareDatabase { db in
            // NORMAL is durable against a process crash in WAL mode; only a power cut can lose
            // the last commits, and never the file's integrity.
            try db.execute(sql: "PRAGMA synchronous = NORMAL; PRAGMA secure_delete = ON")
            db.add(function: NodeStore.mergeHistograms)
        }
        do {
            let queue = try DatabaseQueue(path: location.path, configuration: configuration)
            try Schema.migrator.migrate(queue)
            return NodeStore(location: location, queue: queue)
        } catch {
            throw StoreError(error, path: location.path)
        }
    }

    /// An existing store on a file system that refuses writes (Linux turned it read-only after a
    /// disk error), opened for reading: what it holds can still be shown, and whatever would
    /// write fails with `.readOnlyFileSystem`. No migration runs; a file from a newer tracer is
    /// refused as `open` refuses it.
    public static func openReadOnly(_ location: StoreLocation) throws(StoreError) -> NodeStore {
        let name = readOnlyName(location)
        try inspectExistingFile(at: location, name: name)
        var configuration = Configuration()
        configuration.readonly = true
        configuration.busyMode = .timeout(5)
        configuration.label = "tracer.store"
        configuration.prepareDatabase { db in db.add(function: NodeStore.mergeHistograms) }
        do {
            return NodeStore(location: location, queue: try DatabaseQueue(path: name, configuration: configuration))
        } catch {
            throw StoreError(error, path: location.path)
        }
    }

    /// What SQLite is given to read the store on a read-only file system: the path, or the path
    /// as a URI with `immutable=1` when the store was stopped cleanly there. Reading a WAL
    /// database needs its -shm (and -wal) file, and a clean stop removes both; on a read-only
    /// file system SQLite cannot create them again, so every plain open fails ("unable to open
    /// database file"). With neither file there the WAL holds nothing, and nothing can change
    /// the file while the file system stays read-only: SQLite's documented way to read such a
    /// file is `immutable=1` (sqlite.org/wal.html, "Read-Only Databases"), which uses neither
    /// file nor locks. Only then: with a -wal left (a node killed, or the disk failing under a
    /// running node) immutable would skip the commits it holds, and the plain open reads them.
    /// Both files are looked for where SQLite keeps them: beside the file a link names, not
    /// beside the link. `readOnly` is `ReadOnlyFileSystem.holds` but in tests.
    static func readOnlyName(_ location: StoreLocation, readOnly: (String) -> Bool = ReadOnlyFileSystem.holds) -> String {
        let manager = FileManager.default
        let file = ReadOnlyFileSystem.realFile(location.path)
        guard understandsURIs, !manager.fileExists(atPath: file + "-wal"), !manager.fileExists(atPath: file + "-shm"),
              readOnly(location.path)
        else { return location.path }
        // The path as a URI's path: "?", "#" and "%" in it would otherwise end or escape it.
        let escaped = location.path.addingPercentEncoding(withAllowedCharacters: .urlPathAllowed) ?? location.path
        return "file:" + escaped + "?immutable=1"
    }

    /// GRDB opens without SQLITE_OPEN_URI, so SQLite reads a "file:" name as a URI only when
    /// built with SQLITE_USE_URI (Debian's and Ubuntu's are); elsewhere the plain open is all
    /// there is, and a cleanly stopped store on a read-only file system fails as before.
    /// (`package`: a test that needs the immutable open asks it first.)
    package static let understandsURIs: Bool = {
        let answer = try? DatabaseQueue().read { db in try Bool.fetchOne(db, sql: "SELECT sqlite_compileoption_used('USE_URI')") }
        return answer.flatMap { $0 } ?? false
    }()

    /// What an existing file holds, read without writing to it.
    enum Contents {
        case empty
        case tracer(unknownMigrations: [String])
    }

    /// Refuses a file that is not a Tracer database; reports schema steps this binary does not know.
    /// `name` is what SQLite opens: the path, or `readOnlyName`'s URI.
    @discardableResult
    static func inspect(_ location: StoreLocation, name: String? = nil) throws(StoreError) -> Contents {
        let contents: SQLiteFileProbe.Contents
        do {
            contents = try SQLiteFileProbe.inspect(path: name ?? location.path, applicationID: Schema.applicationID, migrator: Schema.migrator)
        } catch {
            throw StoreError(error, path: location.path)
        }
        switch contents {
        case .empty: return .empty
        case .foreign: throw .notATracerDatabase(path: location.path)
        case .own(let unknown): return .tracer(unknownMigrations: unknown)
        }
    }

    private static func inspectExistingFile(at location: StoreLocation, name: String? = nil) throws(StoreError) {
        if case .tracer(let unknown) = try inspect(location, name: name), !unknown.isEmpty {
            throw .newerSchema(path: location.path, unknownMigrations: unknown)
        }
    }

    private init(location: StoreLocation, queue: DatabaseQueue) {
        self.location = location
        self.queue = queue
    }

    /// The schema versions this binary knows, oldest first.
    public static var schemaVersions: [String] { Schema.knownMigrations }

    /// The schema steps applied to this database.
    public func appliedSchemaVersions() throws(StoreError) -> [String] {
        try read { db in try Schema.migrator.appliedMigrations(db) }
    }

    /// The SQLite library version in use.
    public static var sqliteVersion: String {
        (try? DatabaseQueue().read { db in try String.fetchOne(db, sql: "SELECT sqlite_version()") }) ?? "unknown"
    }

    /// `PRAGMA integrity_check`: "ok", or the problems SQLite found.
    public func integrityCheck() throws(StoreError) -> [String] {
        try read { db in try String.fetchAll(db, sql: "PRAGMA integrity_check") }
    }

    // MARK: Access with errors mapped to StoreError

    func read<T: Sendable>(_ body: @Sendable (Database) throws -> T) throws(StoreError) -> T {
        do { return try queue.read(body) } catch { throw StoreError(error, path: location.path) }
    }

    func write<T: Sendable>(_ body: @Sendable (Database) throws -> T) throws(StoreError) -> T {
        do { return try queue.write(body) } catch { throw StoreError(error, path: location.path) }
    }

    func writeOutsideTransaction<T: Sendable>(_ body: @Sendable (Database) throws -> T) throws(StoreError) -> T {
        do { return try queue.writeWithoutTransaction(body) } catch { throw StoreError(error, path: location.path) }
    }

    /// Moves WAL content into the database file and truncates the WAL to zero bytes.
    func checkpoint() throws(StoreError) {
        try writeOutsideTransaction { db in try db.execute(sql: "PRAGMA wal_checkpoint(TRUNCATE)") }
    }

    // MARK: Files

    private static func prepareDirectory(for location: StoreLocation) throws(StoreError) {
        let manager = FileManager.default
        let directory = location.directory
        var isDirectory: ObjCBool = false
        if !manager.fileExists(atPath: directory, isDirectory: &isDirectory) {
            do {
                try manager.createDirectory(
                    atPath: directory, withIntermediateDirectories: true,
                    attributes: [.posixPermissions: 0o700])
            } catch {
                throw .cannotCreateDirectory(path: directory, reason: Self.reason(error))
            }
        } else if !isDirectory.boolValue {
            throw .cannotCreateDirectory(path: directory, reason: "a file of that name is in the way")
        } else if location.ownsDirectory {
            chmod(directory, 0o700)
        }
    }

    /// Creates the file with mode 0600, or narrows the mode of an existing Tracer database (a
    /// copy or a restore may have a looser one).
    private static func createPrivateFile(at location: StoreLocation) throws(StoreError) {
        let descriptor = Glibc.open(location.path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else {
            if errno == EROFS { throw .readOnlyFileSystem(path: location.path) }
            throw .cannotCreateFile(path: location.path, reason: String(cString: strerror(errno)))
        }
        fchmod(descriptor, 0o600)
        close(descriptor)
    }

    private static func reason(_ error: any Error) -> String {
        (error as NSError).localizedFailureReason ?? (error as NSError).localizedDescription
    }

    /// Erases every row, then removes the database and its WAL and shared-memory files.
    /// Refuses, deleting nothing, when the file is not a Tracer database: a mistyped `--db` must
    /// not destroy someone else's file.
    public static func deleteAllData(at location: StoreLocation) throws(StoreError) {
        if location.exists {
            let contents = try inspect(location)
            if case .tracer(let unknown) = contents, unknown.isEmpty, let store = try? NodeStore.open(location) {
                // Overwrite before unlinking so the content does not survive in the file's old
                // blocks on storage that overwrites in place.
                _ = try? store.write { db in
                    try db.execute(sql: "DELETE FROM encounters; DELETE FROM own_ids; DELETE FROM daily_keys; DELETE FROM node_state; DELETE FROM places")
                }
                try? store.checkpoint()
            }
        }
        for file in location.allFiles where FileManager.default.fileExists(atPath: file) {
            if unlink(file) != 0 && errno != ENOENT {
                throw .cannotCreateFile(path: file, reason: "could not delete it: " + String(cString: strerror(errno)))
            }
        }
    }
}

extension StoreError {
    init(_ error: any Error, path: String) {
        if let storeError = error as? StoreError {
            self = storeError
            return
        }
        let failure = SQLiteFailure(error)
        // SQLite reports a write refused by a read-only file system as an I/O error or as a
        // read-only database, depending on the file and the step; only the file system can tell.
        let mayBeTheFileSystem = switch failure {
        case .readOnly, .cannotOpen, .other: true
        case .notADatabase, .busy, .diskFull, .damaged: false
        }
        if mayBeTheFileSystem, ReadOnlyFileSystem.holds(path) {
            self = .readOnlyFileSystem(path: path)
            return
        }
        switch failure {
        case .notADatabase: self = .notATracerDatabase(path: path)
        case .busy: self = .busy(path: path)
        case .readOnly: self = .readOnly(path: path)
        case .diskFull: self = .diskFull(path: path)
        case .damaged(let detail): self = .damaged(path: path, detail: detail)
        case .cannotOpen(let detail): self = .cannotCreateFile(path: path, reason: detail)
        case .other(let detail): self = .sqlite(path: path, detail: detail)
        }
    }
}
