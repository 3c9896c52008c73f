import Foundation
import IDRotation
@testable import PositiveListServer
import PostgresServerStore
import ServerStorage
import SQLiteServerStore
import Testing
import TestTiers
import TracerCore
import ServerTestSupport
import TracerTestSupport

/// A console store on one back end, and how to open it again as a restarted (or another)
/// instance would: a second ServerStore on the same file, a second pool on the same database
/// (a fresh one on the suite's shared PostgreSQL server).
struct ConsoleStoreFixture {
    typealias Store = any ConsoleStore & SubmissionStore
    let server: ServerFixture
    let postgresURL: String?
    let store: Store

    static func make(_ backEnd: StoreBackend) async throws -> ConsoleStoreFixture {
        let server = try ServerFixture()
        do {
            switch backEnd {
            case .sqlite:
                return ConsoleStoreFixture(server: server, postgresURL: nil, store: server.store)
            case .postgres:
                let url = try SharedPostgres.createDatabase()
                let store = try await PostgresServerStore.open(settings: PostgresSettings(connection: url, password: nil), publishedDirectory: server.paths.published, poolSize: 4)
                return ConsoleStoreFixture(server: server, postgresURL: url, store: store)
            }
        } catch {
            server.remove()
            throw error
        }
    }

    func openAgain() async throws -> Store {
        if let postgresURL {
            return try await PostgresServerStore.open(settings: PostgresSettings(connection: postgresURL, password: nil), publishedDirectory: server.paths.published, poolSize: 4)
        }
        return try ServerStore.open(path: server.paths.database, publishedDirectory: server.paths.published)
    }

    /// The database goes with the suite's server.
    func remove() {
        server.remove()
    }
}

/// The console's store promises, over SQLite and over PostgreSQL alike.
@Suite(.tags(.integration), .serialized, .sharedPostgres) struct ConsoleStoreTests {
    static let now: UnixSeconds = 1_800_000_000
    static let actor = ConsoleActor(name: "olga", client: "127.0.0.1")

    /// One hash for every account: scrypt at its full cost takes a while.
    static let password = "correct horse battery staple"
    static let passwordHash = Result { try PasswordHash.make(password: password) }
    static func hash() throws -> PasswordHash { try passwordHash.get() }

    /// What a page keeps to show once goes when its session ends, however it ends: an old cookie
    /// and a copy of the database must not open it afterwards.
    @Test(arguments: StoreBackend.allCases)
    func pagesShownOnceGoWithTheirSession(backEnd: StoreBackend) async throws {
        let fixture = try await ConsoleStoreFixture.make(backEnd)
        defer { fixture.remove() }
        let store = fixture.store
        let now = Self.now
        #expect(try await store.createConsoleAccount(name: "olga", role: .operator, passwordHash: Self.hash(), link: nil, by: .commandLine, now: now))
        let olga = try #require(try await store.consoleAccount(named: "olga"))
        let session: [UInt8] = Array(repeating: 7, count: 32)
        let other: [UInt8] = Array(repeating: 9, count: 32)
        func keepBoth() async throws {
            try await store.createConsoleSession(digest: session, account: olga.id, csrfToken: "token", now: now)
            try await store.keepConsoleShownOnce(session: session, kind: "code", sealed: [1, 2, 3], expiresAt: now + 86_400, now: now)
        }
        func kept() async throws -> Bool {
            try await store.consoleShownOnce(session: session, kind: "code", now: now + 10) != nil
        }
        try await store.createConsoleSession(digest: other, account: olga.id, csrfToken: "token", now: now)

        try await keepBoth()
        #expect(try await kept())
        try await store.deleteConsoleSession(digest: session)
        #expect(try await !kept(), "signed out")

        try await keepBoth()
        #expect(try await store.setConsoleAccountDisabled(name: "olga", true, by: .commandLine, now: now + 1))
        #expect(try await !kept(), "account disabled")
        #expect(try await store.setConsoleAccountDisabled(name: "olga", false, by: .commandLine, now: now + 2))

        try await keepBoth()
        #expect(try await store.resetConsolePassword(name: "olga", passwordHash: Self.hash(), link: nil, by: .commandLine, now: now + 3))
        #expect(try await !kept(), "password reset")
    }

    @Test(arguments: StoreBackend.allCases)
    func accountsSessionsAndTheAuditLog(backEnd: StoreBackend) async throws {
        let fixture = try await ConsoleStoreFixture.make(backEnd)
        defer { fixture.remove() }
        let store = fixture.store
        let now = Self.now
        #expect(try await store.createConsoleAccount(name: "Olga", role: .operator, passwordHash: Self.hash(), link: nil, by: .commandLine, now: now))
        #expect(try await store.createConsoleAccount(name: "sam", role: .staff, passwordHash: Self.hash(), link: nil, by: Self.actor, now: now))
        #expect(try await !store.createConsoleAccount(name: "OLGA", role: .staff, passwordHash: Self.hash(), link: nil, by: .commandLine, now: now),
                "names are compared without case")
        #expect(try await store.consoleAccounts().map(\.name) == ["Olga", "sam"])
        let olga = try #require(try await store.consoleAccount(named: "olga"))
        #expect(olga.role == .operator && olga.createdAt == now && olga.disabledAt == nil && olga.lastSignInAt == nil)
        #expect(olga.passwordHash.verify(Self.password))
        #expect(try await store.consoleAccount(named: "nobody") == nil)

        // A session lives while used within the idle time and younger than its lifetime.
        let session: [UInt8] = Array(repeating: 7, count: 32)
        try await store.createConsoleSession(digest: session, account: olga.id, csrfToken: "token", now: now)
        #expect(try await store.consoleAccount(named: "olga")?.lastSignInAt == now)
        let found = try #require(try await store.consoleSession(digest: session, now: now + 50, idleSeconds: 100, lifetimeSeconds: 1000))
        #expect(found.account.name == "Olga" && found.csrfToken == "token" && found.createdAt == now)
        #expect(try await store.consoleSession(digest: Array(repeating: 8, count: 32), now: now + 50, idleSeconds: 100, lifetimeSeconds: 1000) == nil)
        #expect(try await store.consoleSession(digest: session, now: now + 140, idleSeconds: 100, lifetimeSeconds: 1000) != nil, "used at +50")
        #expect(try await store.consoleSession(digest: session, now: now + 1000, idleSeconds: 2000, lifetimeSeconds: 1000) == nil, "too old")
        #expect(try await store.consoleSession(digest: session, now: now + 1001, idleSeconds: 5000, lifetimeSeconds: 5000) == nil, "deleted once expired")
        try await store.createConsoleSession(digest: session, account: olga.id, csrfToken: "token", now: now)
        #expect(try await store.consoleSession(digest: session, now: now + 200, idleSeconds: 100, lifetimeSeconds: 1000) == nil, "idle")

        // Disabling ends the account's sessions; signing out ends one; a reset ends them all.
        try await store.createConsoleSession(digest: session, account: olga.id, csrfToken: "token", now: now)
        #expect(try await store.setConsoleAccountDisabled(name: "OLGA", true, by: .commandLine, now: now + 1))
        #expect(try await store.consoleAccount(named: "olga")?.disabledAt == now + 1)
        #expect(try await store.consoleSession(digest: session, now: now + 2, idleSeconds: 100, lifetimeSeconds: 1000) == nil)
        #expect(try await store.setConsoleAccountDisabled(name: "olga", false, by: .commandLine, now: now + 3))
        #expect(try await !store.setConsoleAccountDisabled(name: "nobody", true, by: .commandLine, now: now + 3))
        try await store.createConsoleSession(digest: session, account: olga.id, csrfToken: "token", now: now + 3)
        try await store.deleteConsoleSession(digest: session)
        #expect(try await store.consoleSession(digest: session, now: now + 4, idleSeconds: 100, lifetimeSeconds: 1000) == nil)
        try await store.createConsoleSession(digest: session, account: olga.id, csrfToken: "token", now: now + 4)
        let newHash = try PasswordHash.make(password: "another long password here")
        #expect(try await store.resetConsolePassword(name: "olga", passwordHash: newHash, link: nil, by: .commandLine, now: now + 5))
        #expect(try await store.consoleSession(digest: session, now: now + 6, idleSeconds: 100, lifetimeSeconds: 1000) == nil)
        #expect(try await store.consoleAccount(named: "olga")?.passwordHash == newHash)
        #expect(try await !store.resetConsolePassword(name: "nobody", passwordHash: newHash, link: nil, by: .commandLine, now: now + 5))

        // The audit log, newest first, and pruned by age.
        try await store.appendConsoleAudit(ConsoleAuditEntry(at: now + 10, account: "sam", event: .failedSignIn, detail: "", client: "127.0.0.2"))
        let audit = try await store.consoleAudit(limit: 100)
        #expect(audit.map(\.event) == [.failedSignIn, .passwordSet, .accountEnabled, .accountDisabled, .accountCreated, .accountCreated])
        #expect(audit.first == ConsoleAuditEntry(at: now + 10, account: "sam", event: .failedSignIn, detail: "", client: "127.0.0.2"))
        #expect(audit.last?.account == "command line" && audit.last?.detail == "account Olga, role operator")
        #expect(try await store.consoleAudit(limit: 2).count == 2)
        try await store.pruneConsoleAudit(before: now + 5)
        #expect(try await store.consoleAudit(limit: 100).map(\.at) == [now + 10, now + 5])
    }

    @Test(arguments: StoreBackend.allCases)
    func setPasswordLinksWorkOnceUntilTheyExpireAndSurviveARestart(backEnd: StoreBackend) async throws {
        let fixture = try await ConsoleStoreFixture.make(backEnd)
        defer { fixture.remove() }
        let now = Self.now
        let link = ConsolePasswordLink(digest: Array(repeating: 1, count: 32), expiresAt: now + 100)
        #expect(try await fixture.store.createConsoleAccount(
            name: "pat", role: .staff, passwordHash: .unusable(), link: link, by: Self.actor, now: now))

        // Another instance, or this one restarted, knows the link: only its digest is stored.
        let restarted = try await fixture.openAgain()
        #expect(try await restarted.consolePasswordLinkAccount(digest: link.digest, now: now + 99)?.name == "pat")
        #expect(try await restarted.consolePasswordLinkAccount(digest: link.digest, now: now + 100) == nil, "expired")
        #expect(try await restarted.setConsolePassword(linkDigest: link.digest, passwordHash: Self.hash(), client: "c", now: now + 100) == nil)
        #expect(try await restarted.setConsolePassword(linkDigest: link.digest, passwordHash: Self.hash(), client: "c", now: now + 99) == "pat")
        #expect(try await restarted.consoleAccount(named: "pat")?.passwordHash.verify(Self.password) == true)
        // Once: not again, on either instance.
        #expect(try await fixture.store.setConsolePassword(linkDigest: link.digest, passwordHash: .unusable(), client: "c", now: now + 1) == nil)
        #expect(try await restarted.consolePasswordLinkAccount(digest: link.digest, now: now + 1) == nil)

        // A reset replaces the account's link; disabling the account ends it.
        let second = ConsolePasswordLink(digest: Array(repeating: 2, count: 32), expiresAt: now + 100)
        let third = ConsolePasswordLink(digest: Array(repeating: 3, count: 32), expiresAt: now + 100)
        #expect(try await fixture.store.resetConsolePassword(name: "pat", passwordHash: .unusable(), link: second, by: Self.actor, now: now + 2))
        #expect(try await fixture.store.resetConsolePassword(name: "pat", passwordHash: .unusable(), link: third, by: Self.actor, now: now + 3))
        #expect(try await restarted.consolePasswordLinkAccount(digest: second.digest, now: now + 4) == nil)
        #expect(try await restarted.consolePasswordLinkAccount(digest: third.digest, now: now + 4)?.name == "pat")
        #expect(try await fixture.store.setConsoleAccountDisabled(name: "pat", true, by: Self.actor, now: now + 5))
        #expect(try await fixture.store.setConsoleAccountDisabled(name: "pat", false, by: Self.actor, now: now + 6))
        #expect(try await restarted.setConsolePassword(linkDigest: third.digest, passwordHash: Self.hash(), client: "c", now: now + 7) == nil)
    }

    /// Two instances at once: one link, one name, one revoke, and each is won by exactly one.
    @Test(arguments: StoreBackend.allCases)
    func twoInstancesAtOnceUseALinkOnceAndTakeANameOnce(backEnd: StoreBackend) async throws {
        let fixture = try await ConsoleStoreFixture.make(backEnd)
        defer { fixture.remove() }
        let instances = [fixture.store, try await fixture.openAgain()]
        let now = Self.now
        let hash = try Self.hash()
        for round in 0..<10 {
            let link = ConsolePasswordLink(digest: Array(repeating: UInt8(round + 1), count: 32), expiresAt: now + 100)
            let name = "person\(round)"
            let created = try await withThrowingTaskGroup(of: Bool.self) { group in
                for index in 0..<4 {
                    group.addTask {
                        try await instances[index % 2].createConsoleAccount(
                            name: index == 0 ? name : name.uppercased(), role: .staff, passwordHash: .unusable(), link: link, by: Self.actor, now: now)
                    }
                }
                return try await group.reduce(into: 0) { $0 += $1 ? 1 : 0 }
            }
            #expect(created == 1, "round \(round): \(created) accounts named \(name)")
            let used = try await withThrowingTaskGroup(of: String?.self) { group in
                for index in 0..<4 {
                    group.addTask {
                        try await instances[index % 2].setConsolePassword(linkDigest: link.digest, passwordHash: hash, client: "c\(index)", now: now + 1)
                    }
                }
                return try await group.reduce(into: [String]()) { if let name = $1 { $0.append(name) } }
            }
            #expect(used.count == 1, "round \(round): the link was used \(used.count) times")
        }
        let setThroughLinks = try await instances[1].consoleAudit(limit: 100).filter { $0.event == .passwordSet }
        #expect(setThroughLinks.count == 10)
    }

    /// The sign-in budget is the store's: failures and checks in flight on either instance count.
    @Test(arguments: StoreBackend.allCases)
    func theSignInBudgetIsSharedByInstancesAndCountsChecksInFlight(backEnd: StoreBackend) async throws {
        let fixture = try await ConsoleStoreFixture.make(backEnd)
        defer { fixture.remove() }
        let instances = [fixture.store, try await fixture.openAgain()]
        let now = Self.now
        let keys = ["address 127.0.0.2", "account sam"]
        func claim(_ instance: Int, _ keys: [String], at time: UnixSeconds) async throws -> Int64? {
            if case .claimed(let claim) = try await instances[instance].claimConsoleSignIn(keys: keys, limit: 3, now: time) { return claim }
            return nil
        }
        for (instance, time) in [(0, now), (1, now + 10), (0, now + 20)] {
            let claimed = try #require(try await claim(instance, keys, at: time))
            try await instances[instance].settleConsoleSignIn(claimed, failed: true, now: time)
        }
        #expect(try await instances[1].claimConsoleSignIn(keys: keys, limit: 3, now: now + 30) == .refused(retryAfterSeconds: 30))
        #expect(try await instances[0].claimConsoleSignIn(keys: ["address 127.0.0.9", "account sam"], limit: 3, now: now + 30)
            == .refused(retryAfterSeconds: 30), "the account is locked from any address")
        #expect(try await claim(1, ["address 127.0.0.9", "account olga"], at: now + 30) != nil, "other accounts are not")
        // The oldest failure leaves the minute: one more try.
        #expect(try await claim(1, keys, at: now + 60) != nil)

        // Checks in flight hold the budget until settled; a success gives its unit back.
        let other = ["address 127.0.0.5", "account kim"]
        var held: [Int64] = []
        for instance in [0, 1, 0] { held.append(try #require(try await claim(instance, other, at: now + 100))) }
        #expect(try await claim(1, other, at: now + 100) == nil, "three checks in flight")
        try await instances[1].settleConsoleSignIn(held[0], failed: false, now: now + 101)
        #expect(try await claim(1, other, at: now + 101) != nil)
        // A check whose instance died stops counting after the minute.
        #expect(try await claim(0, other, at: now + 161) != nil)
    }

    @Test(arguments: StoreBackend.allCases)
    func issuedCodesAreListedForTheirIssuerAndRevokedOnlyWhileOpen(backEnd: StoreBackend) async throws {
        let fixture = try await ConsoleStoreFixture.make(backEnd)
        defer { fixture.remove() }
        let store = fixture.store
        let now = Self.now
        for name in ["sam", "kim"] {
            #expect(try await store.createConsoleAccount(name: name, role: .staff, passwordHash: Self.hash(), link: nil, by: .commandLine, now: now))
        }
        let sam = try #require(try await store.consoleAccount(named: "sam")).id
        let kim = try #require(try await store.consoleAccount(named: "kim")).id
        var numbers: [Int64] = []
        var codes: [UploadCode] = []
        for offset in 0..<4 {
            let issued = try await store.issueUploadCode(authority: "Health Authority A", lifetimeSeconds: 100, now: now + Int64(offset))
            codes.append(issued.code)
            numbers.append(try await store.recordConsoleCode(
                codeDigest: issued.code.digest, account: sam, issuedAt: issued.issuedAt, expiresAt: issued.expiresAt))
        }
        #expect(Set(numbers).count == 4)
        #expect(try await store.consoleCodes(account: sam, now: now + 10, limit: 50).map(\.state) == [.open, .open, .open, .open])
        #expect(try await store.consoleCodes(account: kim, now: now + 10, limit: 50).isEmpty)
        #expect(try await store.consoleCodes(account: sam, now: now + 10, limit: 2).map(\.id) == [numbers[3], numbers[2]], "newest first")

        // Used, revoked, expired: each shows so, and only an open code of one's own is revoked.
        let outcome = try await store.appendHistory([], credential: .uploadCode(codes[0]), idempotencyKey: nil, now: now + 10)
        if case .refused(let reason) = outcome { Issue.record("the code was refused: \(reason)") }
        #expect(try await !store.revokeConsoleCode(id: numbers[0], account: sam, now: now + 11), "used")
        #expect(try await !store.revokeConsoleCode(id: numbers[1], account: kim, now: now + 11), "not kim's")
        #expect(try await store.revokeConsoleCode(id: numbers[1], account: sam, now: now + 11))
        #expect(try await !store.revokeConsoleCode(id: numbers[1], account: sam, now: now + 12), "revoked already")
        #expect(try await store.status(of: codes[1], now: now + 12) == .revoked)
        #expect(try await store.status(of: codes[2], now: now + 12) == .valid(authority: "Health Authority A", expiresAt: now + 102))
        let states = try await store.consoleCodes(account: sam, now: now + 102, limit: 50)
        #expect(states.map(\.state) == [.open, .expired, .revoked, .used], "\(states)")
        #expect(try await !store.revokeConsoleCode(id: numbers[2], account: sam, now: now + 102), "expired")
        #expect(try await store.status(of: codes[2], now: now + 102) == .expired)
    }
}
