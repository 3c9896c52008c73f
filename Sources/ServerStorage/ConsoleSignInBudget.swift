import Foundation
import TracerCore

/// The answer to a claim on the shared sign-in budget.
public enum ConsoleSignInClaim: Sendable, Equatable {
    /// Settle it once with ``ConsoleStore/settleConsoleSignIn(_:failed:now:)``.
    case claimed(Int64)
    /// Seconds until the oldest counted attempt leaves the minute.
    case refused(retryAfterSeconds: Int)
}

/// The sign-in limit held in the store, so that instances sharing one database share one budget:
/// with an instance's own counter alone, n instances behind a load balancer would let a guesser
/// try n times the limit. Each check holds a row per key (the client address, the account name)
/// from its claim to its settling, so that checks in flight on any instance count; a failure's
/// rows stay for a minute, a success's go. A check whose instance died before settling stops
/// counting after the minute too. The claim counts and inserts in one transaction that the
/// store admits one at a time (SQLite's single writer; a PostgreSQL advisory lock).
package enum ConsoleSignInBudget {
    package static let windowSeconds: Int64 = 60

    /// A random claim number: unlike a counter, never that of a check still settling after its
    /// rows left the window.
    package static func newClaim() -> Int64 { Int64.random(in: 1...Int64.max) }

    /// Refusal when any key's counted attempts reach `limit`, else nil.
    package static func refusal(oldestCounted: [UnixSeconds?], countedPerKey: [Int], limit: Int, now: UnixSeconds) -> ConsoleSignInClaim? {
        var wait: Int?
        for (count, oldest) in zip(countedPerKey, oldestCounted) where count >= limit {
            let seconds = Int(max(1, (oldest ?? now) + windowSeconds - now))
            wait = max(wait ?? 0, seconds)
        }
        return wait.map { .refused(retryAfterSeconds: $0) }
    }
}
