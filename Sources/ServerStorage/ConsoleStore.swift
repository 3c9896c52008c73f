import Foundation
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

    package init(id: Int64, name: String, role: Role, passwordHash: PasswordHash, createdAt: UnixSeconds, disabledAt: UnixSeconds? = nil, lastSignInAt: UnixSeconds? = nil) {
        self.id = id
        self.name = name
        self.role = role
        self.passwordHash = passwordHash
        self.createdAt = createdAt
        self.disabledAt = disabledAt
        self.lastSignInAt = lastSignInAt
    }
}

/// A signed-in session: the store keeps only the SHA-256 of its id, so a leaked database does
/// not let anyone take one over.
public struct ConsoleSession: Sendable, Equatable {
    public var account: ConsoleAccount
    /// The token every form of this session carries (see ConsoleServer's CSRF check).
    public var csrfToken: String
    public var createdAt: UnixSeconds

    package init(account: ConsoleAccount, csrfToken: String, createdAt: UnixSeconds) {
        self.account = account
        self.csrfToken = csrfToken
        self.createdAt = createdAt
    }
}

/// A code issued through the console, as its issuer sees it in "my codes": never the code.
public struct ConsoleCodeRecord: Sendable, Equatable {
    public enum State: String, Sendable { case open, used, expired, revoked }
    public var id: Int64
    public var issuedAt: UnixSeconds
    public var expiresAt: UnixSeconds
    public var state: State

    package init(id: Int64, issuedAt: UnixSeconds, expiresAt: UnixSeconds, state: State) {
        self.id = id
        self.issuedAt = issuedAt
        self.expiresAt = expiresAt
        self.state = state
    }
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
/// code, the audit log. Both stores have it (``ServerStore`` in ServerStore+Console.swift,
/// ``PostgresServerStore`` in PostgresServerStore+Console.swift); everything a later request
/// relies on is in the store, so a restart, or another instance on the same PostgreSQL, sees it.
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
