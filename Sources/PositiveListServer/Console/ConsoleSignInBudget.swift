import Foundation
import GRDB
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
enum ConsoleSignInBudget {
    static let windowSeconds: Int64 = 60

    /// A random claim number: unlike a counter, never that of a check still settling after its
    /// rows left the window.
    static func newClaim() -> Int64 { Int64.random(in: 1...Int64.max) }

    /// Refusal when any key's counted attempts reach `limit`, else nil.
    static func refusal(oldestCounted: [UnixSeconds?], countedPerKey: [Int], limit: Int, now: UnixSeconds) -> ConsoleSignInClaim? {
        var wait: Int?
        for (count, oldest) in zip(countedPerKey, oldestCounted) where count >= limit {
            let seconds = Int(max(1, (oldest ?? now) + windowSeconds - now))
            wait = max(wait ?? 0, seconds)
        }
        return wait.map { .refused(retryAfterSeconds: $0) }
    }
}

extension ServerSchema {
    static func registerSharedConsoleMigration(_ migrator: inout DatabaseMigrator) {
        migrator.registerMigration("v7: console sign-in attempts and shown-once pages shared by instances") { db in
            try db.execute(sql: """
                -- One row per key of a sign-in check: failed is NULL while the check is in flight.
                CREATE TABLE console_sign_in_attempts (
                    claim INTEGER NOT NULL,
                    key TEXT NOT NULL,
                    at INTEGER NOT NULL,
                    failed INTEGER,
                    PRIMARY KEY (claim, key)
                ) WITHOUT ROWID;
                CREATE INDEX console_sign_in_attempts_by_key ON console_sign_in_attempts(key, at);

                -- ConsoleShownOnce: a page shown after a POST, sealed with a key from the session's
                -- id (which only the cookie holds), by the id's SHA-256.
                CREATE TABLE console_shown_once (
                    session BLOB NOT NULL,
                    kind TEXT NOT NULL,
                    sealed BLOB NOT NULL,
                    expires_at INTEGER NOT NULL,
                    PRIMARY KEY (session, kind)
                ) WITHOUT ROWID;
                """)
        }
    }
}

extension ServerStore {
    public func claimConsoleSignIn(keys: [String], limit: Int, now: UnixSeconds) async throws(ServerStoreError) -> ConsoleSignInClaim {
        try await write { db in
            let windowStart = now - ConsoleSignInBudget.windowSeconds
            try db.execute(sql: "DELETE FROM console_sign_in_attempts WHERE at <= ?", arguments: [windowStart])
            var counts: [Int] = []
            var oldest: [UnixSeconds?] = []
            for key in keys {
                let row = try Row.fetchOne(db, sql: "SELECT count(*), min(at) FROM console_sign_in_attempts WHERE key = ?", arguments: [key])
                counts.append(row?[0] ?? 0)
                oldest.append(row?[1])
            }
            if let refusal = ConsoleSignInBudget.refusal(oldestCounted: oldest, countedPerKey: counts, limit: limit, now: now) { return refusal }
            let claim = ConsoleSignInBudget.newClaim()
            for key in Set(keys) {
                try db.execute(sql: "INSERT INTO console_sign_in_attempts (claim, key, at) VALUES (?, ?, ?)", arguments: [claim, key, now])
            }
            return .claimed(claim)
        }
    }

    public func settleConsoleSignIn(_ claim: Int64, failed: Bool, now: UnixSeconds) async throws(ServerStoreError) {
        try await write { db in
            if failed {
                try db.execute(sql: "UPDATE console_sign_in_attempts SET failed = 1, at = ? WHERE claim = ?", arguments: [now, claim])
            } else {
                try db.execute(sql: "DELETE FROM console_sign_in_attempts WHERE claim = ?", arguments: [claim])
            }
        }
    }
}
