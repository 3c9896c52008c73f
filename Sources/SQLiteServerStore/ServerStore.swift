import Foundation
import GRDB
import Logging
import SQLiteSupport
#if canImport(Glibc)
import Glibc
import ServerStorage
#endif

/// The server's SQLite database: submissions, upload codes, idempotency keys, the ids waiting
/// for the next batch and the record of published batches with what each published (the files
/// in the published directory are written from it, never read back).
///
/// Same conventions as the node's store: file mode 0600, WAL (the HTTP server, `publish` and
/// `append` can run at once), a busy timeout, and versioned migrations. Every method is async
/// and runs on GRDB's serial writer, never on an event loop thread.
public final class ServerStore: Sendable {
    public let path: String
    /// The data directory's `publish.lock`, which ``lockPublication()`` takes.
    public let publicationLockPath: String
    let queue: DatabaseQueue
    let pendingIDs = PendingIDCache.make()
    /// This store's own mark on the pending entries it reads (``PendingRead``), so that its
    /// ``recordBatch(_:publishing:)`` knows them from any other.
    let pendingReader = UInt64.random(in: 0...UInt64.max)
    let publishedIDs: DatabaseMirror<PublishedIDIndex>

    /// Opens (creating or migrating) the database at `path`; `publishedDirectory` is where the
    /// batches it records are published, read only for live batches recorded before schema v6
    /// and still without their content (``fillRecordedContent(_:directory:logger:)``, which
    /// `logger` warns through); `publicationLockPath` is the lock file publishers of this
    /// database share, by default `publish.lock` next to it (``ServerPaths/publishLock``).
    public static func open(
        path: String, publishedDirectory: PublishedDirectory, publicationLockPath: String? = nil,
        logger: Logger = Logger(label: "tracer-server")
    ) throws(ServerStoreError) -> ServerStore {
        if FileManager.default.fileExists(atPath: path) {
            try refuseForeignFile(at: path)
        }
        let descriptor = Glibc.open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else {
            throw .cannotCreateFile(path: path, reason: String(cString: strerror(errno)))
        }
        fchmod(descriptor, 0o600)
        close(descriptor)
        var configuration = Configuration()
        configuration.journalMode = .wal
        configuration.busyMode = .timeout(5)
        configuration.label = "tracer-server.store"
        configuration.prepareDatabase { db in
            try db.execute(sql: "PRAGMA synchronous = NORMAL")
        }
        do {
            let queue = try DatabaseQueue(path: path, configuration: configuration)
            try ServerSchema.migrator.migrate(queue)
            fillRecordedContent(queue, directory: publishedDirectory, logger: logger)
            let lockPath = publicationLockPath ?? (path as NSString).deletingLastPathComponent + "/publish.lock"
            return ServerStore(
                path: path, publicationLockPath: lockPath, queue: queue, publishedIDs: PublishedIDCache.make())
        } catch {
            throw ServerStoreError(error, path: path)
        }
    }

    private init(path: String, publicationLockPath: String, queue: DatabaseQueue, publishedIDs: DatabaseMirror<PublishedIDIndex>) {
        self.path = path
        self.publicationLockPath = publicationLockPath
        self.queue = queue
        self.publishedIDs = publishedIDs
    }

    /// Copies into the database what the live batches recorded before schema v6 published, from
    /// the files present and intact (``RecordedBatchFile``). Best effort, at every open, after
    /// the migration committed v6: a missing or damaged file, or a failure here, leaves those
    /// rows without content (the log waits at them, uploads are refused) and a warning, never a
    /// refused open, and the next open tries again. The rows are looked for with a read, so an
    /// ordinary open takes no write lock; the files are read outside any transaction, and the
    /// write is immediate, as every write of this store, so that a `publish` committing
    /// meanwhile makes it wait, not fail.
    ///
    /// Then, once no live row is without content, the retired files are deleted
    /// (``RecordedBatchFile/retireFiles(in:stillUnfilled:lastIDBatch:lastKeyBatch:logger:)``); never after a failure here.
    static func fillRecordedContent(_ queue: DatabaseQueue, directory: PublishedDirectory, logger: Logger) {
        do {
            var unfilled = try queue.read { db in try Self.unfilled(db) }
            if !unfilled.isEmpty {
                let filled = RecordedBatchFile.fill(unfilled, in: directory, logger: logger)
                if !filled.ids.isEmpty || !filled.keys.isEmpty {
                    try queue.writeWithoutTransaction { db in
                        try db.inTransaction(.immediate) {
                            try SQLiteBatchLedger.ids.fill(filled.ids, db)
                            try SQLiteBatchLedger.keys.fill(filled.keys, db)
                            return .commit
                        }
                    }
                }
                unfilled = try queue.read { db in try Self.unfilled(db) }
            }
            let (lastIDBatch, lastKeyBatch) = try queue.read { db in
                (try SQLiteBatchLedger.ids.nextNumber(db) - 1, try SQLiteBatchLedger.keys.nextNumber(db) - 1)
            }
            RecordedBatchFile.retireFiles(in: directory, stillUnfilled: unfilled, lastIDBatch: lastIDBatch, lastKeyBatch: lastKeyBatch, logger: logger)
        } catch {
            logger.warning("published batches not copied into the database; the next start tries again", metadata: [
                "reason": "\(ServerStoreError(error, path: queue.path))",
            ])
        }
    }

    private static func unfilled(_ db: Database) throws -> RecordedBatchFile.Unfilled {
        RecordedBatchFile.Unfilled(
            ids: try SQLiteBatchLedger.ids.listingsWithoutContent(kind: .ids, db),
            keys: try SQLiteBatchLedger.keys.listingsWithoutContent(kind: .keys, db))
    }

    public func batchesWithoutContent() async throws(ServerStoreError) -> [String] {
        try await read { db in try Self.unfilled(db).names }
    }

    /// Refuses, before writing anything, a file that is another program's database or one from
    /// a newer server.
    private static func refuseForeignFile(at path: String) throws(ServerStoreError) {
        let contents: SQLiteFileProbe.Contents
        do {
            contents = try SQLiteFileProbe.inspect(path: path, applicationID: ServerSchema.applicationID, migrator: ServerSchema.migrator)
        } catch {
            throw ServerStoreError(error, path: path)
        }
        switch contents {
        case .empty: return
        case .foreign: throw .notAServerDatabase(path: path)
        case .own(let unknown) where !unknown.isEmpty: throw .newerSchema(path: path, unknownMigrations: unknown)
        case .own: return
        }
    }

    func read<T: Sendable>(_ body: @escaping @Sendable (Database) throws -> T) async throws(ServerStoreError) -> T {
        do { return try await queue.read(body) } catch { throw ServerStoreError(error, path: path) }
    }

    func write<T: Sendable>(_ body: @escaping @Sendable (Database) throws -> T) async throws(ServerStoreError) -> T {
        do { return try await queue.write(body) } catch { throw ServerStoreError(error, path: path) }
    }

    /// For a write that must act once its transaction committed, still before any other write
    /// runs; `body` opens the transaction itself.
    func writeWithoutTransaction<T: Sendable>(_ body: @escaping @Sendable (Database) throws -> T) async throws(ServerStoreError) -> T {
        do { return try await queue.writeWithoutTransaction(body) } catch { throw ServerStoreError(error, path: path) }
    }
}
