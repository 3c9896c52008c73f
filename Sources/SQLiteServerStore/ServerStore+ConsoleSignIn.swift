import Foundation
import GRDB
import ServerStorage
import TracerCore

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
