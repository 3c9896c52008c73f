import Foundation
import GRDB
import TracerCore

/// A person who signs in to the console.
public struct ConsoleAccount: Sendable, Equatable {
    public enum Role: String, Sendable, CaseIterable {
        /// Issues codes and manages their own.
        case staff
        /// Everything staff can, plus the operator pages.
        case `operator`
    }

    public var id: Int64
    public var name: String
    public var role: Role
    public var passwordHash: PasswordHash
    public var createdAt: UnixSeconds
    public var disabledAt: UnixSeconds?
    public var lastSignInAt: UnixSeconds?
}

/// A signed-in session: the store keeps only the SHA-256 of its id, so a leaked database does
/// not let anyone take one over.
public struct ConsoleSession: Sendable, Equatable {
    public var account: ConsoleAccount
    /// The token every form of this session carries (see ConsoleServer's CSRF check).
    public var csrfToken: String
    public var createdAt: UnixSeconds
}

/// A code issued through the console, as its issuer sees it in "my codes": never the code.
public struct ConsoleCodeRecord: Sendable, Equatable {
    public enum State: String, Sendable { case open, used, expired, revoked }
    public var id: Int64
    public var issuedAt: UnixSeconds
    public var expiresAt: UnixSeconds
    public var state: State
}

/// One line of the audit log: who did what, when, from where; never a code or a password.
public struct ConsoleAuditEntry: Sendable, Equatable {
    public enum Event: String, Sendable {
        case signIn = "sign-in", failedSignIn = "failed sign-in", signOut = "sign-out", issue, revoke
        case accountCreated = "account created", accountDisabled = "account disabled", accountEnabled = "account enabled"
        case passwordReset = "password reset", passwordSet = "password set"
    }
    /// What a failed sign-in records as its account when the name typed is none: the text typed
    /// may be a password typed into the wrong field, and is never kept.
    public static let unknownAccount = "unknown account"

    public var at: UnixSeconds
    public var account: String
    public var event: Event
    public var detail: String
    public var client: String

    public init(at: UnixSeconds, account: String, event: Event, detail: String, client: String) {
        self.at = at
        self.account = account
        self.event = event
        self.detail = detail
        self.client = client
    }
}

/// Who changes an account, for the audit log: an operator in the console, or the command line.
public struct ConsoleActor: Sendable, Equatable {
    public var name: String
    public var client: String
    public static let commandLine = ConsoleActor(name: "command line", client: "command line")
    public init(name: String, client: String) {
        self.name = name
        self.client = client
    }
}

/// A set-password link's secret, kept by the store as its SHA-256 only, like a session id.
public struct ConsolePasswordLink: Sendable, Equatable {
    public var digest: [UInt8]
    public var expiresAt: UnixSeconds
    public init(digest: [UInt8], expiresAt: UnixSeconds) {
        self.digest = digest
        self.expiresAt = expiresAt
    }
}

/// What the console keeps: accounts, sessions, set-password links, which account issued which
/// code, the audit log. Both stores have it (``ServerStore`` here, ``PostgresServerStore`` in
/// PostgresServerStore+Console.swift); everything a later request relies on is in the store, so
/// a restart, or another instance on the same PostgreSQL, sees it.
public protocol ConsoleStore: Sendable {
    /// False when an account with that name (in any case) exists already. With `link`, the
    /// person sets their own password through it (the hash is then ``PasswordHash/unusable()``).
    func createConsoleAccount(
        name: String, role: ConsoleAccount.Role, passwordHash: PasswordHash, link: ConsolePasswordLink?, by actor: ConsoleActor, now: UnixSeconds
    ) async throws(ServerStoreError) -> Bool
    func consoleAccounts() async throws(ServerStoreError) -> [ConsoleAccount]
    /// Disables (its sessions end at once) or enables the account; false when there is none.
    func setConsoleAccountDisabled(name: String, _ disabled: Bool, by actor: ConsoleActor, now: UnixSeconds) async throws(ServerStoreError) -> Bool
    /// Replaces the password (ending the account's sessions and links); with `link`, the old
    /// one stops working now and the person sets a new one through the link.
    func resetConsolePassword(
        name: String, passwordHash: PasswordHash, link: ConsolePasswordLink?, by actor: ConsoleActor, now: UnixSeconds
    ) async throws(ServerStoreError) -> Bool
    /// The account a live set-password link is for.
    func consolePasswordLinkAccount(digest: [UInt8], now: UnixSeconds) async throws(ServerStoreError) -> ConsoleAccount?
    /// Sets the password through a live link, which then ends; the account's name, or nil when
    /// the link is unknown or expired.
    func setConsolePassword(linkDigest: [UInt8], passwordHash: PasswordHash, client: String, now: UnixSeconds) async throws(ServerStoreError) -> String?
    /// Removes audit entries older than `cutoff`.
    func pruneConsoleAudit(before cutoff: UnixSeconds) async throws(ServerStoreError)
    func consoleAccount(named name: String) async throws(ServerStoreError) -> ConsoleAccount?
    func createConsoleSession(digest: [UInt8], account: Int64, csrfToken: String, now: UnixSeconds) async throws(ServerStoreError)
    /// The session, if it exists, its account is enabled and it has neither been idle longer than
    /// `idleSeconds` nor lived longer than `lifetimeSeconds`; marks it used now. An expired
    /// session is deleted.
    func consoleSession(digest: [UInt8], now: UnixSeconds, idleSeconds: Int64, lifetimeSeconds: Int64) async throws(ServerStoreError) -> ConsoleSession?
    func deleteConsoleSession(digest: [UInt8]) async throws(ServerStoreError)
    func recordConsoleCode(codeDigest: [UInt8], account: Int64, issuedAt: UnixSeconds, expiresAt: UnixSeconds) async throws(ServerStoreError) -> Int64
    func consoleCodes(account: Int64, now: UnixSeconds, limit: Int) async throws(ServerStoreError) -> [ConsoleCodeRecord]
    /// Ends an unused code of `account` now; false when it is not theirs, used, expired or revoked already.
    func revokeConsoleCode(id: Int64, account: Int64, now: UnixSeconds) async throws(ServerStoreError) -> Bool
    func appendConsoleAudit(_ entry: ConsoleAuditEntry) async throws(ServerStoreError)
    func consoleAudit(limit: Int) async throws(ServerStoreError) -> [ConsoleAuditEntry]
    /// Takes one unit of each of `keys`' sign-in budget, shared by every instance on this store:
    /// refused while the failures and checks in flight of the last minute of any key reach
    /// `limit`. See ConsoleSignInBudget.swift.
    func claimConsoleSignIn(keys: [String], limit: Int, now: UnixSeconds) async throws(ServerStoreError) -> ConsoleSignInClaim
    /// Ends a claimed check: a failure stays counted for a minute, a success gives its units back.
    func settleConsoleSignIn(_ claim: Int64, failed: Bool, now: UnixSeconds) async throws(ServerStoreError)
    /// Keeps a sealed page of ``ConsoleShownOnce`` for the session (by its id's SHA-256), replacing
    /// the one of that kind; those expired go.
    func keepConsoleShownOnce(session: [UInt8], kind: String, sealed: [UInt8], expiresAt: UnixSeconds, now: UnixSeconds) async throws(ServerStoreError)
    func consoleShownOnce(session: [UInt8], kind: String, now: UnixSeconds) async throws(ServerStoreError) -> [UInt8]?
}

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
