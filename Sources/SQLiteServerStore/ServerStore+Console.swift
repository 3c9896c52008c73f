import Foundation
import GRDB
import ServerStorage
import TracerCore

extension ServerSchema {
    /// Registered after the submission store's steps (see ServerSchema.migrator).
    static func registerConsoleMigration(_ migrator: inout DatabaseMigrator) {
        migrator.registerMigration("v5: console accounts, sessions, issued codes, audit") { db in
            try db.execute(sql: """
                -- People who sign in to the console. Never deleted (the audit log names them);
                -- disabled_at ends their sign-ins.
                CREATE TABLE console_accounts (
                    id INTEGER PRIMARY KEY AUTOINCREMENT,
                    name TEXT NOT NULL UNIQUE COLLATE NOCASE,
                    role TEXT NOT NULL CHECK (role IN ('staff', 'operator')),
                    password_hash TEXT NOT NULL,
                    created_at INTEGER NOT NULL,
                    disabled_at INTEGER
                );

                -- Sessions by the SHA-256 of their id; the id itself is only in the browser's cookie.
                CREATE TABLE console_sessions (
                    digest BLOB NOT NULL PRIMARY KEY,
                    account INTEGER NOT NULL REFERENCES console_accounts(id),
                    csrf_token TEXT NOT NULL,
                    created_at INTEGER NOT NULL,
                    last_seen_at INTEGER NOT NULL
                ) WITHOUT ROWID;

                -- Which account issued which code (by the code's digest, as upload_codes keeps it).
                CREATE TABLE console_codes (
                    id INTEGER PRIMARY KEY AUTOINCREMENT,
                    code_digest BLOB NOT NULL UNIQUE,
                    account INTEGER NOT NULL REFERENCES console_accounts(id),
                    issued_at INTEGER NOT NULL,
                    expires_at INTEGER NOT NULL,
                    revoked_at INTEGER
                );
                CREATE INDEX console_codes_by_account ON console_codes(account, issued_at);

                -- Who signed in, failed to, issued or revoked, when and from where. The account is
                -- its name as typed for a failed sign-in; detail never holds a code.
                CREATE TABLE console_audit (
                    id INTEGER PRIMARY KEY AUTOINCREMENT,
                    at INTEGER NOT NULL,
                    account TEXT NOT NULL,
                    event TEXT NOT NULL,
                    detail TEXT NOT NULL,
                    client TEXT NOT NULL
                );
                """)
        }
        migrator.registerMigration("v6: console sign-in times, set-password links, audit by time") { db in
            try db.execute(sql: """
                ALTER TABLE console_accounts ADD COLUMN last_sign_in_at INTEGER;

                -- Links an operator hands to a person to set their own password, by the SHA-256 of
                -- their secret; one live link per account.
                CREATE TABLE console_password_links (
                    digest BLOB NOT NULL PRIMARY KEY,
                    account INTEGER NOT NULL UNIQUE REFERENCES console_accounts(id),
                    expires_at INTEGER NOT NULL
                ) WITHOUT ROWID;

                -- The audit log is pruned by age.
                CREATE INDEX console_audit_by_time ON console_audit(at);
                """)
        }
        registerSharedConsoleMigration(&migrator)
    }
}

extension ServerStore: ConsoleStore {
    public func createConsoleAccount(
        name: String, role: ConsoleAccount.Role, passwordHash: PasswordHash, link: ConsolePasswordLink?, by actor: ConsoleActor, now: UnixSeconds
    ) async throws(ServerStoreError) -> Bool {
        try await write { db in
            let taken = try Bool.fetchOne(db, sql: "SELECT EXISTS (SELECT 1 FROM console_accounts WHERE name = ?)", arguments: [name]) ?? false
            if taken { return false }
            try db.execute(
                sql: "INSERT INTO console_accounts (name, role, password_hash, created_at) VALUES (?, ?, ?, ?)",
                arguments: [name, role.rawValue, passwordHash.encoded, now])
            if let link { try Self.replaceLink(link, account: db.lastInsertedRowID, db) }
            try Self.appendAudit(ConsoleAuditEntry(
                at: now, account: actor.name, event: .accountCreated,
                detail: "account \(name), role \(role.rawValue)" + (link == nil ? "" : ", set-password link"), client: actor.client), db)
            return true
        }
    }

    public func consoleAccounts() async throws(ServerStoreError) -> [ConsoleAccount] {
        try await read { db in
            try Row.fetchAll(db, sql: "SELECT * FROM console_accounts ORDER BY name").compactMap(Self.account)
        }
    }

    public func setConsoleAccountDisabled(name: String, _ disabled: Bool, by actor: ConsoleActor, now: UnixSeconds) async throws(ServerStoreError) -> Bool {
        try await write { db in
            guard let id = try Int64.fetchOne(db, sql: "SELECT id FROM console_accounts WHERE name = ?", arguments: [name]) else { return false }
            try db.execute(sql: "UPDATE console_accounts SET disabled_at = ? WHERE id = ?", arguments: [disabled ? now : nil, id])
            if disabled {
                try db.execute(sql: "DELETE FROM console_sessions WHERE account = ?", arguments: [id])
                try Self.forgetShownOnceOfEndedSessions(db)
                try db.execute(sql: "DELETE FROM console_password_links WHERE account = ?", arguments: [id])
            }
            try Self.appendAudit(ConsoleAuditEntry(
                at: now, account: actor.name, event: disabled ? .accountDisabled : .accountEnabled, detail: "account \(name)", client: actor.client), db)
            return true
        }
    }

    public func resetConsolePassword(
        name: String, passwordHash: PasswordHash, link: ConsolePasswordLink?, by actor: ConsoleActor, now: UnixSeconds
    ) async throws(ServerStoreError) -> Bool {
        try await write { db in
            guard let id = try Int64.fetchOne(db, sql: "SELECT id FROM console_accounts WHERE name = ?", arguments: [name]) else { return false }
            try db.execute(sql: "UPDATE console_accounts SET password_hash = ? WHERE id = ?", arguments: [passwordHash.encoded, id])
            try db.execute(sql: "DELETE FROM console_sessions WHERE account = ?", arguments: [id])
            try Self.forgetShownOnceOfEndedSessions(db)
            try db.execute(sql: "DELETE FROM console_password_links WHERE account = ?", arguments: [id])
            if let link { try Self.replaceLink(link, account: id, db) }
            try Self.appendAudit(ConsoleAuditEntry(
                at: now, account: actor.name, event: link == nil ? .passwordSet : .passwordReset,
                detail: "account \(name)" + (link == nil ? "" : ", set-password link"), client: actor.client), db)
            return true
        }
    }

    public func consolePasswordLinkAccount(digest: [UInt8], now: UnixSeconds) async throws(ServerStoreError) -> ConsoleAccount? {
        try await read { db in
            try Row.fetchOne(
                db,
                sql: """
                    SELECT a.* FROM console_password_links l JOIN console_accounts a ON a.id = l.account
                    WHERE l.digest = ? AND l.expires_at > ? AND a.disabled_at IS NULL
                    """,
                arguments: [Data(digest), now]
            ).flatMap(Self.account)
        }
    }

    public func setConsolePassword(linkDigest: [UInt8], passwordHash: PasswordHash, client: String, now: UnixSeconds) async throws(ServerStoreError) -> String? {
        try await write { db in
            guard let row = try Row.fetchOne(
                db,
                sql: """
                    SELECT a.id, a.name FROM console_password_links l JOIN console_accounts a ON a.id = l.account
                    WHERE l.digest = ? AND l.expires_at > ? AND a.disabled_at IS NULL
                    """,
                arguments: [Data(linkDigest), now])
            else { return nil }
            let id: Int64 = row["id"]
            let name: String = row["name"]
            try db.execute(sql: "UPDATE console_accounts SET password_hash = ? WHERE id = ?", arguments: [passwordHash.encoded, id])
            try db.execute(sql: "DELETE FROM console_password_links WHERE account = ?", arguments: [id])
            try db.execute(sql: "DELETE FROM console_sessions WHERE account = ?", arguments: [id])
            try Self.forgetShownOnceOfEndedSessions(db)
            try Self.appendAudit(ConsoleAuditEntry(at: now, account: name, event: .passwordSet, detail: "through a set-password link", client: client), db)
            return name
        }
    }

    public func pruneConsoleAudit(before cutoff: UnixSeconds) async throws(ServerStoreError) {
        try await write { db in try db.execute(sql: "DELETE FROM console_audit WHERE at < ?", arguments: [cutoff]) }
    }

    /// One live link per account; links long expired are removed on the way.
    private static func replaceLink(_ link: ConsolePasswordLink, account: Int64, _ db: Database) throws {
        try db.execute(sql: "DELETE FROM console_password_links WHERE account = ? OR expires_at <= ?", arguments: [account, link.expiresAt - 7 * 86_400])
        try db.execute(
            sql: "INSERT INTO console_password_links (digest, account, expires_at) VALUES (?, ?, ?)",
            arguments: [Data(link.digest), account, link.expiresAt])
    }

    public func consoleAccount(named name: String) async throws(ServerStoreError) -> ConsoleAccount? {
        try await read { db in
            try Row.fetchOne(db, sql: "SELECT * FROM console_accounts WHERE name = ?", arguments: [name]).flatMap(Self.account)
        }
    }

    public func createConsoleSession(digest: [UInt8], account: Int64, csrfToken: String, now: UnixSeconds) async throws(ServerStoreError) {
        try await write { db in
            // Sessions that ended are removed here rather than by a timer; the table stays small.
            try db.execute(sql: "DELETE FROM console_sessions WHERE last_seen_at < ?", arguments: [now - 7 * 86_400])
            try Self.forgetShownOnceOfEndedSessions(db)
            try db.execute(sql: "UPDATE console_accounts SET last_sign_in_at = ? WHERE id = ?", arguments: [now, account])
            try db.execute(
                sql: "INSERT INTO console_sessions (digest, account, csrf_token, created_at, last_seen_at) VALUES (?, ?, ?, ?, ?)",
                arguments: [Data(digest), account, csrfToken, now, now])
        }
    }

    public func consoleSession(
        digest: [UInt8], now: UnixSeconds, idleSeconds: Int64, lifetimeSeconds: Int64
    ) async throws(ServerStoreError) -> ConsoleSession? {
        try await write { db in
            guard let row = try Row.fetchOne(
                db,
                sql: """
                    SELECT s.digest, s.csrf_token, s.created_at AS session_created_at, s.last_seen_at, a.*
                    FROM console_sessions s JOIN console_accounts a ON a.id = s.account WHERE s.digest = ?
                    """,
                arguments: [Data(digest)])
            else { return nil }
            let stored: Data = row["digest"]
            guard ConstantTime.equal(Array(stored), digest) else { return nil }
            let createdAt: Int64 = row["session_created_at"]
            let lastSeenAt: Int64 = row["last_seen_at"]
            guard let account = Self.account(row), account.disabledAt == nil,
                  now - lastSeenAt < idleSeconds, now - createdAt < lifetimeSeconds
            else {
                try db.execute(sql: "DELETE FROM console_sessions WHERE digest = ?", arguments: [Data(digest)])
                try Self.forgetShownOnceOfEndedSessions(db)
                return nil
            }
            try db.execute(sql: "UPDATE console_sessions SET last_seen_at = ? WHERE digest = ?", arguments: [now, Data(digest)])
            return ConsoleSession(account: account, csrfToken: row["csrf_token"], createdAt: createdAt)
        }
    }

    public func deleteConsoleSession(digest: [UInt8]) async throws(ServerStoreError) {
        try await write { db in
            try db.execute(sql: "DELETE FROM console_sessions WHERE digest = ?", arguments: [Data(digest)])
            try Self.forgetShownOnceOfEndedSessions(db)
        }
    }

    public func recordConsoleCode(
        codeDigest: [UInt8], account: Int64, issuedAt: UnixSeconds, expiresAt: UnixSeconds
    ) async throws(ServerStoreError) -> Int64 {
        try await write { db in
            try db.execute(
                sql: "INSERT INTO console_codes (code_digest, account, issued_at, expires_at) VALUES (?, ?, ?, ?)",
                arguments: [Data(codeDigest), account, issuedAt, expiresAt])
            return db.lastInsertedRowID
        }
    }

    public func consoleCodes(account: Int64, now: UnixSeconds, limit: Int) async throws(ServerStoreError) -> [ConsoleCodeRecord] {
        try await read { db in
            try Row.fetchAll(
                db,
                sql: """
                    SELECT c.id, c.issued_at, c.expires_at, c.revoked_at, u.used_at
                    FROM console_codes c LEFT JOIN upload_codes u ON u.digest = c.code_digest
                    WHERE c.account = ? ORDER BY c.issued_at DESC, c.id DESC LIMIT ?
                    """,
                arguments: [account, limit]
            ).map { row in
                let expiresAt: Int64 = row["expires_at"]
                let state: ConsoleCodeRecord.State
                if (row["used_at"] as Int64?) != nil {
                    state = .used
                } else if (row["revoked_at"] as Int64?) != nil {
                    state = .revoked
                } else if expiresAt <= now {
                    state = .expired
                } else {
                    state = .open
                }
                return ConsoleCodeRecord(id: row["id"], issuedAt: row["issued_at"], expiresAt: expiresAt, state: state)
            }
        }
    }

    public func revokeConsoleCode(id: Int64, account: Int64, now: UnixSeconds) async throws(ServerStoreError) -> Bool {
        try await write { db in
            guard let digest = try Data.fetchOne(
                db, sql: "SELECT code_digest FROM console_codes WHERE id = ? AND account = ? AND revoked_at IS NULL AND expires_at > ?",
                arguments: [id, account, now])
            else { return false }
            // The code ends as an expired one would: an upload with it is refused from now on.
            try db.execute(
                sql: "UPDATE upload_codes SET expires_at = ? WHERE digest = ? AND used_at IS NULL AND expires_at > ?",
                arguments: [now, digest, now])
            guard db.changesCount == 1 else { return false }
            try db.execute(sql: "UPDATE console_codes SET revoked_at = ? WHERE id = ?", arguments: [now, id])
            return true
        }
    }

    public func appendConsoleAudit(_ entry: ConsoleAuditEntry) async throws(ServerStoreError) {
        try await write { db in try Self.appendAudit(entry, db) }
    }

    public func keepConsoleShownOnce(
        session: [UInt8], kind: String, sealed: [UInt8], expiresAt: UnixSeconds, now: UnixSeconds
    ) async throws(ServerStoreError) {
        try await write { db in
            try db.execute(sql: "DELETE FROM console_shown_once WHERE expires_at <= ?", arguments: [now])
            try db.execute(
                sql: "INSERT OR REPLACE INTO console_shown_once (session, kind, sealed, expires_at) VALUES (?, ?, ?, ?)",
                arguments: [Data(session), kind, Data(sealed), expiresAt])
        }
    }

    public func consoleShownOnce(session: [UInt8], kind: String, now: UnixSeconds) async throws(ServerStoreError) -> [UInt8]? {
        try await read { db in
            try Data.fetchOne(
                db, sql: "SELECT sealed FROM console_shown_once WHERE session = ? AND kind = ? AND expires_at > ?",
                arguments: [Data(session), kind, now]
            ).map { Array($0) }
        }
    }

    public func consoleAudit(limit: Int) async throws(ServerStoreError) -> [ConsoleAuditEntry] {
        try await read { db in
            try Row.fetchAll(db, sql: "SELECT * FROM console_audit ORDER BY id DESC LIMIT ?", arguments: [limit]).map { row in
                ConsoleAuditEntry(
                    at: row["at"], account: row["account"], event: ConsoleAuditEntry.Event(rawValue: row["event"]) ?? .signIn,
                    detail: row["detail"], client: row["client"])
            }
        }
    }

    /// A page kept to be shown once goes with its session: after sign-out, a disabled account or
    /// a new password, an old cookie and a copy of the database together must not open it.
    private static func forgetShownOnceOfEndedSessions(_ db: Database) throws {
        try db.execute(sql: "DELETE FROM console_shown_once WHERE session NOT IN (SELECT digest FROM console_sessions)")
    }

    private static func appendAudit(_ entry: ConsoleAuditEntry, _ db: Database) throws {
        try db.execute(
            sql: "INSERT INTO console_audit (at, account, event, detail, client) VALUES (?, ?, ?, ?, ?)",
            arguments: [entry.at, entry.account, entry.event.rawValue, entry.detail, entry.client])
    }

    private static func account(_ row: Row) -> ConsoleAccount? {
        guard let role = ConsoleAccount.Role(rawValue: row["role"]), let hash = PasswordHash(encoded: row["password_hash"]) else { return nil }
        return ConsoleAccount(id: row["id"], name: row["name"], role: role, passwordHash: hash, createdAt: row["created_at"], disabledAt: row["disabled_at"],
            lastSignInAt: row["last_sign_in_at"])
    }
}
