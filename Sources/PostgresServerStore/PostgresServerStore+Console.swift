import Foundation
import ServerStorage
import TracerCore

extension PostgresSchema {
    /// The console's tables, as the SQLite store's "v5" and "v6" steps make them. Names are
    /// unique without case through an index on lower(name), as SQLite's COLLATE NOCASE does.
    static let consoleMigration = (version: 3, name: "console accounts, sessions, set-password links, issued codes, audit", sql: """
        -- People who sign in to the console. Never deleted (the audit log names them);
        -- disabled_at ends their sign-ins.
        CREATE TABLE console_accounts (
            id bigserial PRIMARY KEY,
            name text NOT NULL,
            role text NOT NULL CHECK (role IN ('staff', 'operator')),
            password_hash text NOT NULL,
            created_at bigint NOT NULL,
            disabled_at bigint,
            last_sign_in_at bigint
        );
        CREATE UNIQUE INDEX console_accounts_by_name ON console_accounts (lower(name));

        -- Sessions by the SHA-256 of their id; the id itself is only in the browser's cookie.
        CREATE TABLE console_sessions (
            digest bytea PRIMARY KEY,
            account bigint NOT NULL REFERENCES console_accounts(id),
            csrf_token text NOT NULL,
            created_at bigint NOT NULL,
            last_seen_at bigint NOT NULL
        );
        CREATE INDEX console_sessions_by_account ON console_sessions (account);

        -- Links an operator hands to a person to set their own password, by the SHA-256 of
        -- their secret; one live link per account. Using one deletes its row, so a link works
        -- once whichever instance it reaches.
        CREATE TABLE console_password_links (
            digest bytea PRIMARY KEY,
            account bigint NOT NULL UNIQUE REFERENCES console_accounts(id),
            expires_at bigint NOT NULL
        );

        -- Which account issued which code (by the code's digest, as upload_codes keeps it).
        CREATE TABLE console_codes (
            id bigserial PRIMARY KEY,
            code_digest bytea NOT NULL UNIQUE,
            account bigint NOT NULL REFERENCES console_accounts(id),
            issued_at bigint NOT NULL,
            expires_at bigint NOT NULL,
            revoked_at bigint
        );
        CREATE INDEX console_codes_by_account ON console_codes (account, issued_at);

        -- Who signed in, failed to, issued or revoked, when and from where; pruned by age.
        CREATE TABLE console_audit (
            id bigserial PRIMARY KEY,
            at bigint NOT NULL,
            account text NOT NULL,
            event text NOT NULL,
            detail text NOT NULL,
            client text NOT NULL
        );
        CREATE INDEX console_audit_by_time ON console_audit (at);

        -- The sign-in limit shared by every instance (ConsoleSignInBudget): one row per key of a
        -- check, failed NULL while the check is in flight.
        CREATE TABLE console_sign_in_attempts (
            claim bigint NOT NULL,
            key text NOT NULL,
            at bigint NOT NULL,
            failed boolean,
            PRIMARY KEY (claim, key)
        );
        CREATE INDEX console_sign_in_attempts_by_key ON console_sign_in_attempts (key, at);

        -- ConsoleShownOnce: a page shown after a POST, sealed with a key from the session's id
        -- (which only the cookie holds), by the id's SHA-256.
        CREATE TABLE console_shown_once (
            session bytea NOT NULL,
            kind text NOT NULL,
            sealed bytea NOT NULL,
            expires_at bigint NOT NULL,
            PRIMARY KEY (session, kind)
        );
        """)

    /// Admits one sign-in claim at a time, on every instance, so that counting and inserting are
    /// one step ("TRPS" and a purpose, as the other advisory locks).
    static let consoleSignInLockKey: Int64 = 0x5452_5053_0000_0003
}

/// The console's store on PostgreSQL, for instances sharing one database. What must hold across
/// instances is decided by the database, never by an instance's memory: an account name is
/// taken by the unique index (INSERT … ON CONFLICT DO NOTHING), a set-password link is used by
/// deleting its row (of two instances, one deletes it, the other finds nothing), a session and
/// an issued code are locked (FOR UPDATE) while they are checked and changed.
extension PostgresServerStore: ConsoleStore {
    private static let accountColumns = "a.id, a.name, a.role, a.password_hash, a.created_at, a.disabled_at, a.last_sign_in_at"

    public func createConsoleAccount(
        name: String, role: ConsoleAccount.Role, passwordHash: PasswordHash, link: ConsolePasswordLink?, by actor: ConsoleActor, now: UnixSeconds
    ) async throws(ServerStoreError) -> Bool {
        try await transaction { connection in
            guard let id = try connection.exec(
                """
                INSERT INTO console_accounts (name, role, password_hash, created_at) VALUES ($1, $2, $3, $4)
                ON CONFLICT ((lower(name))) DO NOTHING RETURNING id
                """,
                [.text(name), .text(role.rawValue), .text(passwordHash.encoded), .int(now)]).first?.int(0)
            else { return false }
            if let link { try Self.replaceLink(link, account: id, connection) }
            try Self.appendAudit(ConsoleAuditEntry(
                at: now, account: actor.name, event: .accountCreated,
                detail: "account \(name), role \(role.rawValue)" + (link == nil ? "" : ", set-password link"), client: actor.client), connection)
            return true
        }
    }

    public func consoleAccounts() async throws(ServerStoreError) -> [ConsoleAccount] {
        try await run { connection in
            try connection.exec("SELECT \(Self.accountColumns) FROM console_accounts a ORDER BY lower(a.name)").all.compactMap(Self.account)
        }
    }

    public func setConsoleAccountDisabled(name: String, _ disabled: Bool, by actor: ConsoleActor, now: UnixSeconds) async throws(ServerStoreError) -> Bool {
        try await transaction { connection in
            guard let id = try connection.exec(
                "UPDATE console_accounts SET disabled_at = $2::bigint WHERE lower(name) = lower($1) RETURNING id",
                [.text(name), disabled ? .int(now) : .null]).first?.int(0)
            else { return false }
            if disabled {
                try connection.exec("DELETE FROM console_sessions WHERE account = $1", [.int(id)])
                try Self.forgetShownOnceOfEndedSessions(connection)
                try connection.exec("DELETE FROM console_password_links WHERE account = $1", [.int(id)])
            }
            try Self.appendAudit(ConsoleAuditEntry(
                at: now, account: actor.name, event: disabled ? .accountDisabled : .accountEnabled, detail: "account \(name)", client: actor.client),
                connection)
            return true
        }
    }

    public func resetConsolePassword(
        name: String, passwordHash: PasswordHash, link: ConsolePasswordLink?, by actor: ConsoleActor, now: UnixSeconds
    ) async throws(ServerStoreError) -> Bool {
        try await transaction { connection in
            guard let id = try connection.exec(
                "UPDATE console_accounts SET password_hash = $2 WHERE lower(name) = lower($1) RETURNING id",
                [.text(name), .text(passwordHash.encoded)]).first?.int(0)
            else { return false }
            try connection.exec("DELETE FROM console_sessions WHERE account = $1", [.int(id)])
            try Self.forgetShownOnceOfEndedSessions(connection)
            try connection.exec("DELETE FROM console_password_links WHERE account = $1", [.int(id)])
            if let link { try Self.replaceLink(link, account: id, connection) }
            try Self.appendAudit(ConsoleAuditEntry(
                at: now, account: actor.name, event: link == nil ? .passwordSet : .passwordReset,
                detail: "account \(name)" + (link == nil ? "" : ", set-password link"), client: actor.client), connection)
            return true
        }
    }

    public func consolePasswordLinkAccount(digest: [UInt8], now: UnixSeconds) async throws(ServerStoreError) -> ConsoleAccount? {
        try await run { connection in
            try connection.exec(
                """
                SELECT \(Self.accountColumns) FROM console_password_links l JOIN console_accounts a ON a.id = l.account
                WHERE l.digest = $1 AND l.expires_at > $2 AND a.disabled_at IS NULL
                """,
                [.bytes(digest), .int(now)]).first.flatMap(Self.account)
        }
    }

    public func setConsolePassword(linkDigest: [UInt8], passwordHash: PasswordHash, client: String, now: UnixSeconds) async throws(ServerStoreError) -> String? {
        try await transaction { connection in
            // Deleting the row is what uses the link: a second use, here or on another instance,
            // waits for this transaction and then finds no row.
            guard let row = try connection.exec(
                """
                DELETE FROM console_password_links l USING console_accounts a
                WHERE l.digest = $1 AND l.expires_at > $2 AND a.id = l.account AND a.disabled_at IS NULL
                RETURNING a.id, a.name
                """,
                [.bytes(linkDigest), .int(now)]).first
            else { return nil }
            let id = try row.int(0)
            let name = try row.string(1)
            try connection.exec("UPDATE console_accounts SET password_hash = $1 WHERE id = $2", [.text(passwordHash.encoded), .int(id)])
            try connection.exec("DELETE FROM console_sessions WHERE account = $1", [.int(id)])
            try Self.forgetShownOnceOfEndedSessions(connection)
            try Self.appendAudit(
                ConsoleAuditEntry(at: now, account: name, event: .passwordSet, detail: "through a set-password link", client: client), connection)
            return name
        }
    }

    public func pruneConsoleAudit(before cutoff: UnixSeconds) async throws(ServerStoreError) {
        _ = try await run { connection in try connection.exec("DELETE FROM console_audit WHERE at < $1", [.int(cutoff)]) }
    }

    /// One live link per account; links long expired are removed on the way.
    private static func replaceLink(_ link: ConsolePasswordLink, account: Int64, _ connection: PostgresConnection) throws {
        try connection.exec(
            "DELETE FROM console_password_links WHERE account = $1 OR expires_at <= $2", [.int(account), .int(link.expiresAt - 7 * 86_400)])
        try connection.exec(
            "INSERT INTO console_password_links (digest, account, expires_at) VALUES ($1, $2, $3)",
            [.bytes(link.digest), .int(account), .int(link.expiresAt)])
    }

    public func consoleAccount(named name: String) async throws(ServerStoreError) -> ConsoleAccount? {
        try await run { connection in
            try connection.exec("SELECT \(Self.accountColumns) FROM console_accounts a WHERE lower(a.name) = lower($1)", [.text(name)])
                .first.flatMap(Self.account)
        }
    }

    public func createConsoleSession(digest: [UInt8], account: Int64, csrfToken: String, now: UnixSeconds) async throws(ServerStoreError) {
        try await transaction { connection in
            // Sessions that ended are removed here rather than by a timer; the table stays small.
            try connection.exec("DELETE FROM console_sessions WHERE last_seen_at < $1", [.int(now - 7 * 86_400)])
            try Self.forgetShownOnceOfEndedSessions(connection)
            try connection.exec("UPDATE console_accounts SET last_sign_in_at = $1 WHERE id = $2", [.int(now), .int(account)])
            try connection.exec(
                "INSERT INTO console_sessions (digest, account, csrf_token, created_at, last_seen_at) VALUES ($1, $2, $3, $4, $4)",
                [.bytes(digest), .int(account), .text(csrfToken), .int(now)])
        }
    }

    public func consoleSession(
        digest: [UInt8], now: UnixSeconds, idleSeconds: Int64, lifetimeSeconds: Int64
    ) async throws(ServerStoreError) -> ConsoleSession? {
        try await transaction { connection in
            guard let row = try connection.exec(
                """
                SELECT s.digest, s.csrf_token, s.created_at, s.last_seen_at, \(Self.accountColumns)
                FROM console_sessions s JOIN console_accounts a ON a.id = s.account WHERE s.digest = $1
                FOR UPDATE OF s
                """,
                [.bytes(digest)]).first
            else { return nil }
            guard ConstantTime.equal(try row.bytes(0), digest) else { return nil }
            let createdAt = try row.int(2)
            let lastSeenAt = try row.int(3)
            guard let account = Self.account(PostgresRow(cells: Array(row.cells.dropFirst(4)))), account.disabledAt == nil,
                  now - lastSeenAt < idleSeconds, now - createdAt < lifetimeSeconds
            else {
                try connection.exec("DELETE FROM console_sessions WHERE digest = $1", [.bytes(digest)])
                try Self.forgetShownOnceOfEndedSessions(connection)
                return nil
            }
            try connection.exec("UPDATE console_sessions SET last_seen_at = greatest(last_seen_at, $1) WHERE digest = $2", [.int(now), .bytes(digest)])
            return ConsoleSession(account: account, csrfToken: try row.string(1), createdAt: createdAt)
        }
    }

    public func deleteConsoleSession(digest: [UInt8]) async throws(ServerStoreError) {
        try await transaction { connection in
            try connection.exec("DELETE FROM console_sessions WHERE digest = $1", [.bytes(digest)])
            try Self.forgetShownOnceOfEndedSessions(connection)
        }
    }

    public func recordConsoleCode(
        codeDigest: [UInt8], account: Int64, issuedAt: UnixSeconds, expiresAt: UnixSeconds
    ) async throws(ServerStoreError) -> Int64 {
        try await run { connection in
            try connection.exec(
                "INSERT INTO console_codes (code_digest, account, issued_at, expires_at) VALUES ($1, $2, $3, $4) RETURNING id",
                [.bytes(codeDigest), .int(account), .int(issuedAt), .int(expiresAt)]).first!.int(0)
        }
    }

    public func consoleCodes(account: Int64, now: UnixSeconds, limit: Int) async throws(ServerStoreError) -> [ConsoleCodeRecord] {
        try await run { connection in
            try connection.exec(
                """
                SELECT c.id, c.issued_at, c.expires_at, c.revoked_at, u.used_at
                FROM console_codes c LEFT JOIN upload_codes u ON u.digest = c.code_digest
                WHERE c.account = $1 ORDER BY c.issued_at DESC, c.id DESC LIMIT $2
                """,
                [.int(account), .int(Int64(limit))]
            ).all.map { row in
                let expiresAt = try row.int(2)
                let state: ConsoleCodeRecord.State
                if !row.isNull(4) {
                    state = .used
                } else if !row.isNull(3) {
                    state = .revoked
                } else if expiresAt <= now {
                    state = .expired
                } else {
                    state = .open
                }
                return ConsoleCodeRecord(id: try row.int(0), issuedAt: try row.int(1), expiresAt: expiresAt, state: state)
            }
        }
    }

    public func revokeConsoleCode(id: Int64, account: Int64, now: UnixSeconds) async throws(ServerStoreError) -> Bool {
        try await transaction { connection in
            guard let digest = try connection.exec(
                "SELECT code_digest FROM console_codes WHERE id = $1 AND account = $2 AND revoked_at IS NULL AND expires_at > $3 FOR UPDATE",
                [.int(id), .int(account), .int(now)]).first?.bytes(0)
            else { return false }
            // The code ends as an expired one would; an upload holding the code's row makes this
            // wait, and READ COMMITTED then sees it used and revokes nothing.
            let ended = try connection.exec(
                "UPDATE upload_codes SET expires_at = $2 WHERE digest = $1 AND used_at IS NULL AND expires_at > $2",
                [.bytes(digest), .int(now)]).affectedRowCount
            guard ended == 1 else { return false }
            try connection.exec("UPDATE console_codes SET revoked_at = $1 WHERE id = $2", [.int(now), .int(id)])
            return true
        }
    }

    /// A code past its expiry was revoked when the console says so (revoking ends it as expiry
    /// does), so that its holder hears it was revoked.
    static func endedCodeStatus(digest: [UInt8], _ connection: PostgresConnection) throws -> UploadCodeStatus {
        let revoked = try connection.exec(
            "SELECT EXISTS (SELECT 1 FROM console_codes WHERE code_digest = $1 AND revoked_at IS NOT NULL)", [.bytes(digest)]).first?.bool(0) ?? false
        return revoked ? .revoked : .expired
    }

    public func claimConsoleSignIn(keys: [String], limit: Int, now: UnixSeconds) async throws(ServerStoreError) -> ConsoleSignInClaim {
        try await transaction { connection in
            try connection.exec("SELECT pg_advisory_xact_lock($1)", [.int(PostgresSchema.consoleSignInLockKey)])
            try connection.exec("DELETE FROM console_sign_in_attempts WHERE at <= $1", [.int(now - ConsoleSignInBudget.windowSeconds)])
            var counts: [Int] = []
            var oldest: [UnixSeconds?] = []
            for key in keys {
                let row = try connection.exec("SELECT count(*), min(at) FROM console_sign_in_attempts WHERE key = $1", [.text(key)]).first!
                counts.append(Int(try row.int(0)))
                oldest.append(try row.optionalInt(1))
            }
            if let refusal = ConsoleSignInBudget.refusal(oldestCounted: oldest, countedPerKey: counts, limit: limit, now: now) { return refusal }
            let claim = ConsoleSignInBudget.newClaim()
            for key in Set(keys) {
                try connection.exec("INSERT INTO console_sign_in_attempts (claim, key, at) VALUES ($1, $2, $3)", [.int(claim), .text(key), .int(now)])
            }
            return .claimed(claim)
        }
    }

    public func settleConsoleSignIn(_ claim: Int64, failed: Bool, now: UnixSeconds) async throws(ServerStoreError) {
        _ = try await run { connection in
            if failed {
                try connection.exec("UPDATE console_sign_in_attempts SET failed = true, at = $1 WHERE claim = $2", [.int(now), .int(claim)])
            } else {
                try connection.exec("DELETE FROM console_sign_in_attempts WHERE claim = $1", [.int(claim)])
            }
        }
    }

    public func keepConsoleShownOnce(
        session: [UInt8], kind: String, sealed: [UInt8], expiresAt: UnixSeconds, now: UnixSeconds
    ) async throws(ServerStoreError) {
        try await transaction { connection in
            try connection.exec("DELETE FROM console_shown_once WHERE expires_at <= $1", [.int(now)])
            try connection.exec(
                """
                INSERT INTO console_shown_once (session, kind, sealed, expires_at) VALUES ($1, $2, $3, $4)
                ON CONFLICT (session, kind) DO UPDATE SET sealed = excluded.sealed, expires_at = excluded.expires_at
                """,
                [.bytes(session), .text(kind), .bytes(sealed), .int(expiresAt)])
        }
    }

    public func consoleShownOnce(session: [UInt8], kind: String, now: UnixSeconds) async throws(ServerStoreError) -> [UInt8]? {
        try await run { connection in
            try connection.exec(
                "SELECT sealed FROM console_shown_once WHERE session = $1 AND kind = $2 AND expires_at > $3",
                [.bytes(session), .text(kind), .int(now)]).first?.bytes(0)
        }
    }

    public func appendConsoleAudit(_ entry: ConsoleAuditEntry) async throws(ServerStoreError) {
        _ = try await run { connection in try Self.appendAudit(entry, connection) }
    }

    public func consoleAudit(limit: Int) async throws(ServerStoreError) -> [ConsoleAuditEntry] {
        try await run { connection in
            try connection.exec("SELECT at, account, event, detail, client FROM console_audit ORDER BY id DESC LIMIT $1", [.int(Int64(limit))]).all.map { row in
                ConsoleAuditEntry(
                    at: try row.int(0), account: try row.string(1), event: ConsoleAuditEntry.Event(rawValue: try row.string(2)) ?? .signIn,
                    detail: try row.string(3), client: try row.string(4))
            }
        }
    }

    /// A page kept to be shown once goes with its session: after sign-out, a disabled account or
    /// a new password, an old cookie and a copy of the database together must not open it.
    private static func forgetShownOnceOfEndedSessions(_ connection: PostgresConnection) throws {
        try connection.exec("DELETE FROM console_shown_once WHERE session NOT IN (SELECT digest FROM console_sessions)")
    }

    private static func appendAudit(_ entry: ConsoleAuditEntry, _ connection: PostgresConnection) throws {
        try connection.exec(
            "INSERT INTO console_audit (at, account, event, detail, client) VALUES ($1, $2, $3, $4, $5)",
            [.int(entry.at), .text(entry.account), .text(entry.event.rawValue), .text(entry.detail), .text(entry.client)])
    }

    /// An account from the columns of ``accountColumns``, in their order.
    private static func account(_ row: PostgresRow) -> ConsoleAccount? {
        guard let id = try? row.int(0), let name = try? row.string(1), let role = (try? row.string(2)).flatMap(ConsoleAccount.Role.init(rawValue:)),
              let hash = (try? row.string(3)).flatMap(PasswordHash.init(encoded:)), let createdAt = try? row.int(4)
        else { return nil }
        return ConsoleAccount(
            id: id, name: name, role: role, passwordHash: hash, createdAt: createdAt, disabledAt: try? row.optionalInt(5),
            lastSignInAt: try? row.optionalInt(6))
    }
}
