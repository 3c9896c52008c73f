import SQLiteSupport
import ServerStorage

extension ServerStoreError {
    /// GRDB's errors read as the SQLite store's failures at `path`. Kept with that store: the
    /// neutral error type knows no SQLite.
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
