import GRDB
import IDRotation

/// Failures of the server's database, each with what the operator can do next.
public enum ServerStoreError: Error, Sendable, CustomStringConvertible {
    /// What a client refused because the database is unavailable is told to wait (Retry-After):
    /// the PostgreSQL pool tries to connect again at most this long after a failure
    /// (`ReconnectGate`), and a busy SQLite file clears far sooner, so a client told to wait a
    /// minute would only wait longer than the server needs.
    static let retryAfterSeconds = 10

    case cannotCreateFile(path: String, reason: String)
    case notAServerDatabase(path: String)
    case newerSchema(path: String, unknownMigrations: [String])
    case busy(path: String)
    case readOnly(path: String)
    case diskFull(path: String)
    case sqlite(path: String, detail: String)
    /// A live batch's file, which holds the published ids that uploads are checked against.
    case publishedBatchUnreadable(path: String, reason: String)
    /// The PostgreSQL store: what failed, with the server's SQLSTATE and message.
    case postgres(PostgresError)
    /// The PostgreSQL database's schema has steps this tracer-server does not know.
    case newerPostgresSchema(version: Int, known: Int)

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
            return "The published batch \(path) cannot be used (\(reason)), so uploads cannot be checked against the ids it holds and nothing was stored; restore the published directory from a backup (the database records each batch's size and SHA-256)."
        case .postgres(let error):
            let next = error.isConnectionFailure
                ? "check that the server is running and reachable and that the database settings and password are right"
                : "check the database server's log; try again"
            return "\(error); \(next)."
        case .newerPostgresSchema(let version, let known):
            return "The PostgreSQL database has schema version \(version), written by a newer tracer-server (this one knows up to \(known)); upgrade tracer-server. Nothing was changed."
        }
    }

    init(_ error: any Error, path: String) {
        if let storeError = error as? ServerStoreError {
            self = storeError
            return
        }
        switch SQLiteFailure(error) {
        case .notADatabase: self = .notAServerDatabase(path: path)
        case .busy: self = .busy(path: path)
        case .readOnly: self = .readOnly(path: path)
        case .diskFull: self = .diskFull(path: path)
        case .cannotOpen(let detail): self = .cannotCreateFile(path: path, reason: detail)
        case .damaged(let detail), .other(let detail): self = .sqlite(path: path, detail: detail)
        }
    }
}
