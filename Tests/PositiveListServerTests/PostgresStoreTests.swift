import Crypto
import Foundation
import IDRotation
import PositiveListFormat
@testable import PositiveListServer
import Synchronization
import Testing
import TestTiers
import TracerTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// A scratch server (ServerFixture: data directory, signing key, clock) whose data lives in a
/// fresh PostgreSQL 15 started for the test, with as many stores (connection pools, as separate
/// `serve` instances would have) as the test asks for.
struct PostgresFixture {
    let server: ServerFixture
    let postgres: PostgresProcess
    let url: String
    let stores: [PostgresServerStore]

    static func make(stores count: Int = 1) async throws -> PostgresFixture {
        let server = try ServerFixture()
        let postgres = try PostgresProcess()
        do {
            let url = try postgres.createDatabase("tracer")
            var stores: [PostgresServerStore] = []
            for _ in 0..<count {
                stores.append(try await PostgresServerStore.open(settings: PostgresSettings(connection: url, password: nil), poolSize: 4))
            }
            return PostgresFixture(server: server, postgres: postgres, url: url, stores: stores)
        } catch {
            postgres.stop(keepDirectory: true)
            server.remove()
            throw error
        }
    }

    var store: PostgresServerStore { stores[0] }

    func remove() {
        postgres.stop()
        server.remove()
    }

    /// `idPublicationDelaySeconds` is 0 unless a test is about that rule, as in ServerFixture.
    func publisher(
        _ store: PostgresServerStore? = nil, faultInjection: Publisher.FaultInjection? = nil, idPublicationDelaySeconds: Int64 = 0
    ) -> Publisher {
        Publisher(
            store: store ?? self.store, directory: server.paths.published, lockPath: server.paths.publishLock,
            signingKey: server.signingKey, retentionSeconds: server.configuration.retentionSeconds,
            idPublicationDelaySeconds: idPublicationDelaySeconds, clock: server.clock, logger: server.logs.logger, faultInjection: faultInjection)
    }

    func entries(count: Int, seed: UInt64, endingAt end: UnixSeconds = ServerFixture.start) throws -> [PositiveListEntry] {
        try HistoryRules(server.configuration)
            .validate(SubmittedHistory(ids: Histories.entries(count: count, endingAt: end, seed: seed)), now: server.clock.now())
    }

    /// Every id of every batch the verified index lists, repeated ones included.
    func publishedIDs() throws -> [UInt64] {
        try server.verifiedBatches().flatMap { batch in batch.entries.map(\.id.rawValue) }
    }
}

@Suite(.tags(.integration), .serialized) struct PostgresStoreTests {
    static let authority = SubmissionCredential.authority(name: "Health Authority A")

    @Test func idsStillValidWaitUntilExpiredPlusSkew() async throws {
        // Issue 25: the same rule as ServerStore's (HostileClientTests), on PostgreSQL.
        let fixture = try await PostgresFixture.make()
        defer { fixture.remove() }
        let now = fixture.server.clock.now()
        let skew = fixture.server.configuration.clockSkewSeconds
        let past = try fixture.entries(count: 3, seed: 31, endingAt: now - 900)
        let current = try fixture.entries(count: 3, seed: 32, endingAt: now + 600)
        for entries in [past, current] {
            _ = try await fixture.store.appendHistory(entries, credential: Self.authority, idempotencyKey: nil, now: now)
        }
        let publisher = fixture.publisher(idPublicationDelaySeconds: skew)
        let first = try await publisher.publish()
        // The current history's two older ids ended by now - 300: due; its newest is not.
        let dueNow = (past + current).filter { $0.validUntil + skew <= now }
        #expect(first.newBatch?.idCount == dueNow.count)
        #expect(first.waitingIDs == past.count + current.count - dueNow.count)
        #expect(first.nextDueAt == now + 600 + skew, "when the scheduler wakes for the held id")
        fixture.server.clock.advance(by: 600 + skew - 1)
        #expect(try await publisher.publish().newBatch == nil)
        fixture.server.clock.advance(by: 1)
        #expect(try await publisher.publish().newBatch?.idCount == past.count + current.count - dueNow.count)
        #expect(Set(try fixture.publishedIDs()) == Set((past + current).map(\.id.rawValue)))
    }

    @Test func codesUploadsIdempotencyAndPublicationRoundTrip() async throws {
        let fixture = try await PostgresFixture.make()
        defer { fixture.remove() }
        let store = fixture.store
        let now = fixture.server.clock.now()

        let code = UploadCode.generate()
        try await store.recordIssuedCode(code, authority: "Health Authority B", issuedAt: now, expiresAt: now + 3_600)
        #expect(try await store.status(of: code, now: now) == .valid(authority: "Health Authority B", expiresAt: now + 3_600))
        #expect(try await store.status(of: code, now: now + 3_600) == .expired)
        #expect(try await store.status(of: UploadCode.generate(), now: now) == .unknown)

        let first = try fixture.entries(count: 30, seed: 1)
        let key = IdempotencyKey(key: "request-1", requestDigest: Array(repeating: 7, count: 32))
        let stored = try await store.appendHistory(first, credential: .uploadCode(code), idempotencyKey: key, now: now)
        guard case .stored(let receipt) = stored else { Issue.record("not stored: \(stored)"); return }
        #expect(receipt.received == 30 && receipt.stored == 30)
        #expect(try await store.status(of: code, now: now) == .alreadyUsed)
        // The same request again is replayed; another body under the key is refused; the code
        // cannot be used for a new request.
        #expect(try await store.appendHistory(first, credential: .uploadCode(code), idempotencyKey: key, now: now) == .replayed(receipt))
        let otherDigest = IdempotencyKey(key: "request-1", requestDigest: Array(repeating: 8, count: 32))
        #expect(try await store.appendHistory(first, credential: .uploadCode(code), idempotencyKey: otherDigest, now: now) == .refused(.idempotencyKeyReused))
        #expect(try await store.appendHistory(first, credential: .uploadCode(code), idempotencyKey: nil, now: now) == .refused(.usedCode))
        #expect(try await store.appendHistory(first, credential: .uploadCode(UploadCode.generate()), idempotencyKey: nil, now: now) == .refused(.unknownCode))

        // Ids already pending are not new; repeated ids in one history count once.
        let second = try fixture.entries(count: 10, seed: 2)
        let mixed = Array(first.prefix(5)) + second + [second[0]]
        guard case .stored(let mixedReceipt) = try await store.appendHistory(mixed, credential: Self.authority, idempotencyKey: nil, now: now) else {
            Issue.record("not stored"); return
        }
        #expect(mixedReceipt.received == 16 && mixedReceipt.stored == 10)

        var summary = try await store.summary(now: now)
        #expect(summary.submissions == 2 && summary.storedIDs == 40 && summary.unpublishedIDs == 40 && summary.openUploadCodes == 0)

        let report = try await fixture.publisher().publish()
        #expect(report.newBatch?.number == 1 && report.newBatch?.idCount == 40)
        #expect(try fixture.publishedIDs().sorted() == (first + second).map(\.id.rawValue).sorted())
        summary = try await store.summary(now: now)
        #expect(summary.unpublishedIDs == 0 && summary.liveBatches == 1 && summary.lastPublishedAt == now)

        // A published id is still known; an idle publication cuts no batch.
        guard case .stored(let again) = try await store.appendHistory(first, credential: Self.authority, idempotencyKey: nil, now: now) else {
            Issue.record("not stored"); return
        }
        #expect(again.stored == 0)
        #expect(try await fixture.publisher().publish().newBatch == nil)

        // Past retention the batch expires, its ids are forgotten (new again) and its number
        // is never reused.
        fixture.server.clock.advance(by: fixture.server.configuration.retentionSeconds + 86_400)
        let expired = try await fixture.publisher().publish()
        #expect(expired.expiredBatches == [1] && expired.liveBatches == 0)
        #expect(try await store.summary(now: fixture.server.clock.now()).storedIDs == 0)
        #expect(try await store.nextBatchNumber() == 2)

    }

    @Test func dailyKeysAreStoredOncePublishedWhenDueAndExpire() async throws {
        let fixture = try await PostgresFixture.make(stores: 2)
        defer { fixture.remove() }
        let now = fixture.server.clock.now()
        let today = UTCDay(containing: now).number
        let records = [today - 3, today - 2, today].map { DailyKeyRecord(day: UTCDay(number: $0), intervalSeconds: 900, key: DailyKey.random()) }
        let code = UploadCode.generate()
        try await fixture.store.recordIssuedCode(code, authority: "Health Authority B", issuedAt: now, expiresAt: now + 3_600)
        guard case .stored(let receipt) = try await fixture.store.appendKeyHistory(records, credential: .uploadCode(code), idempotencyKey: nil, now: now) else {
            Issue.record("not stored"); return
        }
        #expect(receipt.received == 3 && receipt.stored == 3)
        // The other instance sees the code used, and the keys already known.
        #expect(try await fixture.stores[1].appendKeyHistory(records, credential: .uploadCode(code), idempotencyKey: nil, now: now) == .refused(.usedCode))
        let yesterday = DailyKeyRecord(day: UTCDay(number: today - 1), intervalSeconds: 900, key: DailyKey.random())
        guard case .stored(let again) = try await fixture.stores[1].appendKeyHistory(records + [yesterday], credential: Self.authority, idempotencyKey: nil, now: now) else {
            Issue.record("not stored"); return
        }
        #expect(again.stored == 1)

        // 08:00 UTC: the keys of the three days before today are due, today's waits.
        let report = try await fixture.publisher(fixture.stores[1]).publish()
        #expect(report.newKeyBatch?.number == 1 && report.newKeyBatch?.keyCount == 3 && report.waitingKeys == 1, "\(report)")
        #expect(FileManager.default.fileExists(atPath: fixture.server.paths.published.keyBatchPath(number: 1)))
        var summary = try await fixture.store.summary(now: now)
        #expect(summary.storedKeys == 4 && summary.unpublishedKeys == 1 && summary.liveKeyBatches == 1)
        #expect(try await fixture.publisher().publish().newKeyBatch == nil)

        fixture.server.clock.advance(by: fixture.server.configuration.retentionSeconds + 2 * 86_400)
        let expired = try await fixture.publisher().publish()
        #expect(expired.expiredKeyBatches == [1] && expired.liveKeyBatches == 0)
        summary = try await fixture.store.summary(now: fixture.server.clock.now())
        #expect(summary.storedKeys == 0 && summary.liveKeyBatches == 0)
        #expect(try await fixture.store.nextKeyBatchNumber() == 2)
    }

    @Test func aNewerSchemaIsRefusedAndReopeningMigratesNothing() async throws {
        let fixture = try await PostgresFixture.make()
        defer { fixture.remove() }
        let settings = PostgresSettings(connection: fixture.url, password: nil)
        #expect(try await PostgresServerStore.schemaVersion(settings: settings) == PostgresServerStore.knownSchemaVersion)
        _ = try await PostgresServerStore.open(settings: settings)
        _ = try await fixture.store.run { connection in
            try connection.exec("INSERT INTO tracer_schema_migrations (version, name) VALUES (99, 'from the future')")
        }
        await #expect(throws: ServerStoreError.self) { _ = try await PostgresServerStore.open(settings: settings) }
        // A wrong port gives a connection error with its SQLSTATE class, not a crash.
        let nowhere = PostgresSettings(connection: "postgresql://postgres@127.0.0.1:\(try LoopbackPort.free())/tracer", password: nil)
        do {
            _ = try await PostgresServerStore.schemaVersion(settings: nowhere)
            Issue.record("connected to nothing")
        } catch {
            guard case .postgres(let failure) = error else { Issue.record("unexpected \(error)"); return }
            #expect(failure.isConnectionFailure)
        }
    }

    /// Two stores (two instances' pools) upload at once with the same codes and overlapping ids
    /// while a publisher runs: each code is used once, each accepted id counted new once and
    /// published exactly once.
    @Test func twoInstancesHammeringTheSameCodesUseEachOnceAndPublishEveryIdOnce() async throws {
        let fixture = try await PostgresFixture.make(stores: 2)
        defer { fixture.remove() }
        let now = fixture.server.clock.now()
        let codes = (0..<24).map { _ in UploadCode.generate() }
        for code in codes {
            try await fixture.store.recordIssuedCode(code, authority: "Health Authority B", issuedAt: now, expiresAt: now + 3_600)
        }
        // Attempt i of instance s: code i % 24 with its own ids, every third history also
        // repeating ids of a shared pool that both instances send.
        let shared = try fixture.entries(count: 40, seed: 999)
        struct Attempt: Sendable { let instance: Int; let code: Int?; let entries: [PositiveListEntry] }
        var attempts: [Attempt] = []
        for instance in 0..<2 {
            for number in 0..<48 {
                let own = try fixture.entries(count: 12, seed: UInt64(1_000 * (instance + 1) + number))
                let extra = number % 3 == 0 ? Array(shared[(number % 4) * 10..<(number % 4) * 10 + 10]) : []
                attempts.append(Attempt(instance: instance, code: number < 24 ? number : nil, entries: own + extra))
            }
        }
        let stores = fixture.stores
        let publisher = fixture.publisher(fixture.stores[1])
        let outcomes = try await withThrowingTaskGroup(of: (Attempt, SubmissionOutcome)?.self) { group in
            for attempt in attempts {
                group.addTask {
                    let credential = attempt.code.map { SubmissionCredential.uploadCode(codes[$0]) } ?? Self.authority
                    return (attempt, try await stores[attempt.instance].appendHistory(attempt.entries, credential: credential, idempotencyKey: nil, now: now))
                }
            }
            // Publications while the uploads run: ids committed meanwhile wait for the next.
            group.addTask {
                for _ in 0..<3 {
                    _ = try? await publisher.publish()
                    try await Task.sleep(for: .milliseconds(20))
                }
                return nil
            }
            var results: [(Attempt, SubmissionOutcome)] = []
            for try await result in group { if let result { results.append(result) } }
            return results
        }
        try await fixture.publisher(fixture.stores[0]).publish()

        var storedPerCode = [Int: Int]()
        var accepted = Set<UInt64>()
        var newCount = 0
        for (attempt, outcome) in outcomes {
            switch outcome {
            case .stored(let receipt):
                if let code = attempt.code { storedPerCode[code, default: 0] += 1 }
                accepted.formUnion(attempt.entries.map(\.id.rawValue))
                newCount += receipt.stored
            case .refused(.usedCode):
                #expect(attempt.code != nil)
            default:
                Issue.record("unexpected \(outcome)")
            }
        }
        #expect(storedPerCode.count == 24 && storedPerCode.values.allSatisfy { $0 == 1 }, "\(storedPerCode)")
        #expect(newCount == accepted.count, "an id was counted new twice or not at all")
        let published = try fixture.publishedIDs()
        #expect(published.count == Set(published).count, "an id was published twice")
        #expect(Set(published) == accepted)
        #expect(try await fixture.store.summary(now: now).unpublishedIDs == 0)
    }

    @Test func twoPublishersAtOnceOnlyOnePublishes() async throws {
        let fixture = try await PostgresFixture.make(stores: 2)
        defer { fixture.remove() }
        var expected = Set<UInt64>()
        for round in 0..<4 {
            let entries = try fixture.entries(count: 500, seed: UInt64(round + 1))
            expected.formUnion(entries.map(\.id.rawValue))
            _ = try await fixture.store.appendHistory(entries, credential: Self.authority, idempotencyKey: nil, now: fixture.server.clock.now())
            let publishers = [fixture.publisher(fixture.stores[0]), fixture.publisher(fixture.stores[1])]
            let results = await withTaskGroup(of: Result<PublishReport, PublishError>.self) { group in
                for publisher in publishers {
                    group.addTask {
                        do throws(PublishError) { return .success(try await publisher.publish()) } catch { return .failure(error) }
                    }
                }
                return await group.reduce(into: []) { $0.append($1) }
            }
            let batches = results.compactMap { try? $0.get().newBatch }
            #expect(batches.count == 1, "round \(round): \(results)")
            for case .failure(let error) in results {
                guard case .anotherInstancePublishing = error else { Issue.record("unexpected \(error)"); continue }
            }
        }
        let published = try fixture.publishedIDs()
        #expect(published.count == expected.count && Set(published) == expected)
        #expect(try fixture.server.verifiedIndex().batches.map(\.number) == [1, 2, 3, 4])
    }

    @Test(arguments: PublishStep.idSteps)
    func aPublisherFailingAtAnyStepLeavesAValidListThatTheNextCompletes(step: PublishStep) async throws {
        let fixture = try await PostgresFixture.make(stores: 2)
        defer { fixture.remove() }
        let now = fixture.server.clock.now()
        let first = try fixture.entries(count: 40, seed: 1)
        _ = try await fixture.store.appendHistory(first, credential: Self.authority, idempotencyKey: nil, now: now)
        try await fixture.publisher().publish()
        let previousIndex = try fixture.server.verifiedIndex()

        let second = try fixture.entries(count: 25, seed: 2)
        _ = try await fixture.store.appendHistory(second, credential: Self.authority, idempotencyKey: nil, now: now)
        let crashing = fixture.publisher(fixture.stores[0]) { current in
            if current == step { throw CancellationError() }
        }
        await #expect(throws: PublishError.self) { try await crashing.publish() }

        let index = try fixture.server.verifiedIndex()
        #expect(index == previousIndex || (step == .indexReplaced && index.batches.map(\.number) == [1, 2]))
        #expect(try fixture.server.verifiedBatches().count == index.batches.count)

        // The other instance takes over: the failed one released the lock with its session.
        try await fixture.publisher(fixture.stores[1]).publish()
        let batches = try fixture.server.verifiedBatches()
        #expect(batches.map(\.count) == [40, 25])
        let published = try fixture.publishedIDs()
        #expect(Set(published) == Set((first + second).map(\.id.rawValue)) && published.count == 65)
        #expect(fixture.server.paths.published.batchFileNumbers().sorted() == [1, 2])
    }

    /// A publisher process killed while holding the lock: PostgreSQL ends its session and with
    /// it the lock, so the next publisher is not locked out.
    @Test func aLockHeldByADeadSessionIsReleased() async throws {
        let fixture = try await PostgresFixture.make(stores: 2)
        defer { fixture.remove() }
        let lock = try await fixture.store.lockPublication(lockPath: "")
        await #expect(throws: PublishError.self) { _ = try await fixture.stores[1].lockPublication(lockPath: "") }
        // Ending the holder's backend as a crash would.
        _ = try await fixture.stores[1].run { connection in
            try connection.exec("SELECT pg_terminate_backend(pid) FROM pg_locks WHERE locktype = 'advisory' AND granted")
        }
        var second: (any PublicationLock)?
        for _ in 0..<50 where second == nil {
            second = try? await fixture.stores[1].lockPublication(lockPath: "")
            if second == nil { try await Task.sleep(for: .milliseconds(20)) }
        }
        #expect(second != nil)
        await second?.release()
        await lock.release()
    }
}
