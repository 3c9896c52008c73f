import GRDB

/// What an SQLite failure means for the person running the program, whichever store met it.
/// The node's and the server's stores turn it into their own errors with their own advice.
public enum SQLiteFailure: Sendable, Equatable {
    case notADatabase
    case busy
    case readOnly
    case diskFull
    case damaged(detail: String)
    case cannotOpen(detail: String)
    case other(detail: String)

    public init(_ error: any Error) {
        guard let databaseError = error as? DatabaseError else {
            self = .other(detail: String(describing: error))
            return
        }
        let detail = databaseError.message ?? "SQLite error \(databaseError.resultCode.rawValue)"
        switch databaseError.resultCode {
        case .SQLITE_NOTADB: self = .notADatabase
        case .SQLITE_BUSY, .SQLITE_LOCKED: self = .busy
        case .SQLITE_READONLY, .SQLITE_PERM: self = .readOnly
        case .SQLITE_FULL: self = .diskFull
        case .SQLITE_CORRUPT: self = .damaged(detail: detail)
        case .SQLITE_CANTOPEN: self = .cannotOpen(detail: detail)
        default: self = .other(detail: detail)
        }
    }
}
