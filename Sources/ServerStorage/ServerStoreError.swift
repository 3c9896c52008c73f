/// Failures of the server's database, each with what the operator can do next.
public enum ServerStoreError: Error, Sendable, CustomStringConvertible {
    /// What a client refused because the database is unavailable is told to wait (Retry-After):
    /// the PostgreSQL pool tries to connect again at most this long after a failure
    /// (`ReconnectGate`), and a busy SQLite file clears far sooner, so a client told to wait a
    /// minute would only wait longer than the server needs.
    package static let retryAfterSeconds = 10

    case cannotCreateFile(path: String, reason: String)
    case notAServerDatabase(path: String)
    case newerSchema(path: String, unknownMigrations: [String])
    case busy(path: String)
    case readOnly(path: String)
    case diskFull(path: String)
    case sqlite(path: String, detail: String)
    /// The file of a live batch recorded before the database kept what each batch published,
    /// read when the store is opened to copy that in (``RecordedBatchFile``): a warning then.
    case publishedBatchUnreadable(path: String, reason: String)
    /// A live batch without its published content in the database (or with a damaged one): an
    /// older tracer-server recorded it, and no open found its file to copy that in.
    case batchContentMissing(batch: String)
    /// The PostgreSQL store: what failed, with the server's SQLSTATE and message.
    case postgres(PostgresError)
    /// The PostgreSQL database's schema has steps this tracer-server does not know.
    case newerPostgresSchema(version: Int, known: Int)
    /// A store was asked to record a batch of pending entries it did not read (``PendingRead``):
    /// a bug, which must not read as "another publisher was first".
    case pendingEntriesReadElsewhere

    public var description: String {
        switch self {
        case .cannotCreateFile(let path, let reason):
            return "Cannot create the server database \(path) (\(reason)); check the data directory's permissions or choose another with --data-dir."
        case .notAServerDatabase(let path):
            return "The file \(path) is not a tracer-server database; point --data-dir at the server's data directory or at a new one."
        case .newerSchema(let path, let unknown):
            return "The database \(path) was written by a newer tracer-server (unknown schema steps: \(unknown.joined(separator: ", "))); upgrade tracer-server. Nothing was changed."
        case .busy(let path):
            return "The database \(path) stayed locked by another process; try again, or stop the other tracer-server using it."
        case .readOnly(let path):
            return "The database \(path) cannot be written; check the file's and directory's permissions."
        case .diskFull(let path):
            return "The disk holding \(path) is full; free some space and try again. Nothing was stored."
        case .sqlite(let path, let detail):
            return "The database \(path) could not be used (\(detail)); check the file and try again."
        case .publishedBatchUnreadable(let path, let reason):
            return "The published batch \(path) cannot be used (\(reason)). An older tracer-server published it and kept what it holds only in this file; this one copies that into the database when it opens it, and until then the list log waits at this batch (with SQLite, uploads are refused too: their ids cannot be checked against it). Restore the file to \(path) from a backup or from the bucket the list is synced to (same name; the database records its size and SHA-256) and restart, or restart with this version the instance whose published directory holds it."
        case .batchContentMissing(let batch):
            return "\(batch) is live but the database does not hold what it published yet, so the list log waits at it (batches and indexes are still published). An older tracer-server recorded it and kept that only in the batch's file, which no open of this database could read: put the file back in the published directory (batches/ or keys/) from a backup or from the bucket the list is synced to, stop any older tracer-server still using this database, and restart (opening the database copies the file in, checked against its recorded size and SHA-256), or restart with this version the instance whose published directory holds it. If no older tracer-server ever used this database, the record is damaged: restore the database from a backup."
        case .postgres(let error):
            let next = error.isConnectionFailure
                ? "check that the server is running and reachable and that the database settings and password are right"
                : "check the database server's log; try again"
            return "\(error); \(next)."
        case .newerPostgresSchema(let version, let known):
            return "The PostgreSQL database has schema version \(version), written by a newer tracer-server (this one knows up to \(known)); upgrade tracer-server. Nothing was changed."
        case .pendingEntriesReadElsewhere:
            return "The database was asked to record a batch of pending ids that were not read from it, so nothing was recorded. This is a bug in tracer-server; please report it with the server's log."
        }
    }
}
