/// A failure reported by libpq or the PostgreSQL server: what was being done, the SQLSTATE (the
/// five-character code PostgreSQL documents, e.g. 40001 for a serialization failure) when the
/// server sent one, and the server's primary message. The message never holds a password: libpq
/// does not repeat it, and only primary messages are kept (a DETAIL line may quote row values).
public struct PostgresError: Error, Sendable, CustomStringConvertible {
    public let context: String
    public let sqlState: String?
    public let message: String
    /// The connection failed before the transaction began, so nothing of it reached the
    /// database: running it again on a new connection cannot do anything twice. (A failure at
    /// COMMIT leaves unknown whether it committed, and is never retried.)
    public let nothingDone: Bool

    public init(context: String, sqlState: String?, message: String, nothingDone: Bool = false) {
        self.context = context
        self.sqlState = sqlState
        self.message = message
        self.nothingDone = nothingDone
    }

    /// Worth running the whole transaction again: a serialization failure or a deadlock.
    public var isRetryable: Bool { sqlState == "40001" || sqlState == "40P01" }
    public var isUniqueViolation: Bool { sqlState == "23505" }
    /// The connection itself failed (class 08), or there is no server answer at all.
    public var isConnectionFailure: Bool { sqlState == nil || sqlState!.hasPrefix("08") || sqlState!.hasPrefix("57P") }

    public var description: String {
        "PostgreSQL: \(context) failed" + (sqlState.map { " (SQLSTATE \($0))" } ?? "") + ": \(message)"
    }
}
