import Foundation
import GRDB
import IDRotation
import PositiveListFormat
@testable import PositiveListServer
@testable import PostgresServerStore
import ServerStorage
@testable import SQLiteServerStore
import Testing
import TestTiers
import TracerCore
import ServerTestSupport
import TracerTestSupport

/// A scratch server (ServerFixture: data directory, signing key, clock) whose data lives in the
/// back end under test, opened twice: two instances on the same data (for SQLite a `serve` and a
/// `tracer-server append` or `publish` beside it; for PostgreSQL two `serve` instances).
struct ContractFixture {
    let backend: StoreBackend
    let server: ServerFixture
    let stores: [any SubmissionStore]

    var store: any SubmissionStore { stores[0] }
    var now: UnixSeconds { server.clock.now() }

    static func make(_ backend: StoreBackend) async throws -> ContractFixture {
        let server = try ServerFixture()
        do {
            switch backend {
            case .sqlite:
                let second = try ServerStore.open(path: server.paths.database, publishedDirectory: server.paths.published)
                return ContractFixture(backend: backend, server: server, stores: [server.store, second])
            case .postgres:
                let settings = PostgresSettings(connection: try SharedPostgres.createDatabase(), password: nil)
                var stores: [any SubmissionStore] = []
                for _ in 0..<2 { stores.append(try await PostgresServerStore.open(settings: settings, publishedDirectory: server.paths.published, poolSize: 3)) }
                return ContractFixture(backend: backend, server: server, stores: stores)
            }
        } catch {
            server.remove()
            throw error
        }
    }

    /// Runs `body` on a fresh fixture, removed after it whatever happens.
    static func with(_ backend: StoreBackend, _ body: (ContractFixture) async throws -> Void) async throws {
        let fixture = try await make(backend)
        defer { fixture.remove() }
        try await body(fixture)
    }

    /// The PostgreSQL stores' connections close with their pools when the stores are released;
    /// the database goes with the suite's server.
    func remove() {
        server.remove()
    }

    func publisher(
        _ instance: Int = 0, faultInjection: Publisher.FaultInjection? = nil, idPublicationDelaySeconds: Int64 = 0
    ) -> Publisher {
        Publisher(
            store: stores[instance], directory: server.paths.published, signingKey: server.signingKey,
            retentionSeconds: server.configuration.retentionSeconds, keySettings: KeyPublicationSettings(server.configuration),
            idPublicationDelaySeconds: idPublicationDelaySeconds, clock: server.clock, logger: server.logs.logger,
            faultInjection: faultInjection)
    }

    /// `count` ids with consecutive 15-minute windows, the newest ending at `end`, sorted by id.
    func entries(count: Int, seed: UInt64, endingAt end: UnixSeconds? = nil) -> [PositiveListEntry] {
        let end = end ?? now
        var generator = SplitMix64(seed: seed)
        return (0..<count).map { position in
            let until = end - UnixSeconds(position) * 900
            return PositiveListEntry(id: UserID.random(using: &generator), validFrom: until - 900, validUntil: until)
        }.sorted { $0.id < $1.id }
    }

    @discardableResult
    func append(
        _ entries: [PositiveListEntry], instance: Int = 0, credential: SubmissionCredential = StoreContractTests.authority,
        idempotencyKey: IdempotencyKey? = nil
    ) async throws -> SubmissionOutcome {
        try await stores[instance].appendHistory(entries, credential: credential, idempotencyKey: idempotencyKey, now: now)
    }

    @discardableResult
    func appendKeys(_ records: [DailyKeyRecord], instance: Int = 0) async throws -> SubmissionOutcome {
        try await stores[instance].appendKeyHistory(records, credential: StoreContractTests.authority, idempotencyKey: nil, now: now)
    }

    /// Every id of every batch the verified log holds, repeated ones included.
    func publishedIDs() throws -> [UInt64] {
        try server.verifiedBatches().flatMap { batch in batch.entries.map(\.id.rawValue) }
    }

    func batch(number: UInt64, of pending: PendingEntries) -> BatchRecord {
        BatchRecord(
            number: number, timeRange: PublishedTimeRange(covering: pending.entries) ?? PublishedTimeRange(start: now, end: now),
            idCount: pending.entries.count, lastSubmission: pending.lastSubmission,
            publishedAt: now)
    }

    /// `keys` as a key batch publishes them (the day and interval do not matter to the store).
    func published(_ keys: [DailyKey]) -> [DailyKeyRecord] {
        keys.map { DailyKeyRecord(day: UTCDay(containing: now - 86_400), intervalSeconds: 900, key: $0) }
    }

    func keyBatch(number: UInt64, keyCount: Int) -> KeyBatchRecord {
        KeyBatchRecord(
            number: number, timeRange: PublishedTimeRange(start: now - 86_400, end: now),
            keyCount: keyCount, fakeKeyCount: 0, publishedAt: now)
    }
}

/// Every promise ``SubmissionStore``'s documentation makes, run on both back ends: the same test
/// for SQLite and PostgreSQL, so that neither can drift from the contract the publisher and the
/// HTTP API build on. Back-end mechanics (SQLite's batch files and lock file, PostgreSQL's
/// advisory lock and schema) stay in their own suites.
@Suite(.tags(.integration), .serialized, .sharedPostgres) struct StoreContractTests {
    static let authority = SubmissionCredential.authority(name: "Health Authority A")
    static let backends = StoreBackend.allCases

    static func key(_ byte: UInt8) -> DailyKey { try! DailyKey(bytes: [byte] + Array(repeating: 0x22, count: 15)) }

    // MARK: Codes and uploads

    @Test(arguments: backends) func anUploadCodeIsUnknownValidExpiredOrUsed(backend: StoreBackend) async throws {
        try await ContractFixture.with(backend) { fixture in
            let now = fixture.now
            let code = UploadCode.generate()
            try await fixture.store.recordIssuedCode(code, authority: "Health Authority B", issuedAt: now, expiresAt: now + 3_600)
            #expect(try await fixture.store.status(of: code, now: now) == .valid(authority: "Health Authority B", expiresAt: now + 3_600))
            #expect(try await fixture.stores[1].status(of: code, now: now + 3_600) == .expired)
            #expect(try await fixture.store.status(of: UploadCode.generate(), now: now) == .unknown)
            // The metrics' counts: open until its expiry, then expired unused, on every instance.
            #expect(try await fixture.stores[1].uploadCodeCounts(now: now) == UploadCodeCounts(open: 1, expiredUnused: 0))
            #expect(try await fixture.store.uploadCodeCounts(now: now + 3_600) == UploadCodeCounts(open: 0, expiredUnused: 1))
            let expired = try await fixture.store.appendHistory(
                fixture.entries(count: 2, seed: 1), credential: .uploadCode(code), idempotencyKey: nil, now: now + 3_600)
            #expect(expired == .refused(.expiredCode))
            guard case .stored = try await fixture.append(fixture.entries(count: 2, seed: 1), credential: .uploadCode(code)) else {
                Issue.record("a valid code was refused"); return
            }
            #expect(try await fixture.stores[1].status(of: code, now: now) == .alreadyUsed)
            #expect(try await fixture.store.uploadCodeCounts(now: now) == UploadCodeCounts(open: 0, expiredUnused: 0), "a used code is not open")
            #expect(try await fixture.store.uploadCodeCounts(now: now + 3_600) == UploadCodeCounts(open: 0, expiredUnused: 0), "nor expired unused")
            // Only PostgreSQL has a pool (the fixture's: 3 connections, none busy now).
            let pool = fixture.store.connectionPoolUsage
            #expect(backend == .sqlite ? pool == nil : pool?.size == 3 && pool?.waiting == 0, "\(String(describing: pool))")
            #expect(try await fixture.append(fixture.entries(count: 2, seed: 2), credential: .uploadCode(code)) == .refused(.usedCode))
            #expect(try await fixture.append(fixture.entries(count: 2, seed: 2), credential: .uploadCode(UploadCode.generate())) == .refused(.unknownCode))
            // A refused upload stores nothing.
            #expect(try await fixture.store.summary(now: now).submissions == 1)
        }
    }

    /// "An upload code is used at most once however many instances see it at the same time."
    @Test(arguments: backends) func anUploadCodeIsUsedOnceByInstancesRacingForIt(backend: StoreBackend) async throws {
        try await ContractFixture.with(backend) { fixture in
            let now = fixture.now
            let code = UploadCode.generate()
            try await fixture.store.recordIssuedCode(code, authority: "Health Authority B", issuedAt: now, expiresAt: now + 3_600)
            let stores = fixture.stores
            let histories = (0..<8).map { fixture.entries(count: 5, seed: UInt64(100 + $0)) }
            let outcomes = try await withThrowingTaskGroup(of: SubmissionOutcome.self) { group in
                for (number, history) in histories.enumerated() {
                    group.addTask {
                        try await stores[number % 2].appendHistory(history, credential: .uploadCode(code), idempotencyKey: nil, now: now)
                    }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            let stored = outcomes.filter { if case .stored = $0 { true } else { false } }
            #expect(stored.count == 1, "\(outcomes)")
            #expect(outcomes.filter { $0 == .refused(.usedCode) }.count == 7, "\(outcomes)")
            let summary = try await fixture.store.summary(now: now)
            #expect(summary.submissions == 1 && summary.storedIDs == 5)
        }
    }

    @Test(arguments: backends) func anIdempotencyKeyReplaysTheFirstAnswerAndRefusesAnotherBody(backend: StoreBackend) async throws {
        try await ContractFixture.with(backend) { fixture in
            let code = UploadCode.generate()
            try await fixture.store.recordIssuedCode(code, authority: "Health Authority B", issuedAt: fixture.now, expiresAt: fixture.now + 3_600)
            let history = fixture.entries(count: 30, seed: 1)
            let key = IdempotencyKey(key: "request-1", requestDigest: Array(repeating: 7, count: 32))
            let first = try await fixture.append(history, credential: .uploadCode(code), idempotencyKey: key)
            guard case .stored(let receipt) = first else { Issue.record("not stored: \(first)"); return }
            #expect(receipt.received == 30 && receipt.stored == 30)
            // Sent again (here to the other instance): the same answer, nothing stored twice.
            #expect(try await fixture.append(history, instance: 1, credential: .uploadCode(code), idempotencyKey: key) == .replayed(receipt))
            let otherBody = IdempotencyKey(key: "request-1", requestDigest: Array(repeating: 8, count: 32))
            #expect(try await fixture.append(history, credential: .uploadCode(code), idempotencyKey: otherBody) == .refused(.idempotencyKeyReused))
            // Keys are scoped per credential: an authority's "request-1" is its own.
            guard case .stored(let authorityReceipt) = try await fixture.append(history, idempotencyKey: key) else {
                Issue.record("another credential's key was taken for this one's"); return
            }
            #expect(authorityReceipt.stored == 0 && authorityReceipt.submission != receipt.submission)
            let summary = try await fixture.store.summary(now: fixture.now)
            #expect(summary.submissions == 2 && summary.storedIDs == 30)
        }
    }

    /// "An accepted id is not accepted again while it is pending or in a live batch" (and is new
    /// again once its batch expired); repeated ids in one history count once.
    @Test(arguments: backends) func anIdIsStoredOnceWhilePendingOrLive(backend: StoreBackend) async throws {
        try await ContractFixture.with(backend) { fixture in
            let first = fixture.entries(count: 30, seed: 1)
            let second = fixture.entries(count: 10, seed: 2)
            guard case .stored(let receipt) = try await fixture.append(first) else { Issue.record("not stored"); return }
            #expect(receipt.stored == 30)
            let mixed = Array(first.prefix(5)) + second + [second[0]]
            guard case .stored(let mixedReceipt) = try await fixture.append(mixed, instance: 1) else { Issue.record("not stored"); return }
            #expect(mixedReceipt.received == 16 && mixedReceipt.stored == 10)
            var summary = try await fixture.store.summary(now: fixture.now)
            #expect(summary.submissions == 2 && summary.storedIDs == 40 && summary.unpublishedIDs == 40)

            let report = try await fixture.publisher().publish()
            #expect(report.newBatch?.number == 1 && report.newBatch?.idCount == 40)
            summary = try await fixture.store.summary(now: fixture.now)
            #expect(summary.unpublishedIDs == 0 && summary.storedIDs == 40 && summary.liveBatches == 1 && summary.lastPublishedAt == fixture.now)
            for instance in 0..<2 {
                guard case .stored(let again) = try await fixture.append(first, instance: instance) else { Issue.record("not stored"); return }
                #expect(again.stored == 0, "instance \(instance) took a published id as new")
            }
            #expect(try await fixture.publisher(1).publish().newBatch == nil, "an idle publication cut a batch")

            // Past retention the batch expires, its ids are new again, its number is never reused.
            fixture.server.clock.advance(by: fixture.server.configuration.retentionSeconds + 86_400)
            let expired = try await fixture.publisher().publish()
            #expect(expired.expiredBatches == [1] && expired.liveBatches == 0)
            #expect(try await fixture.store.liveBatches().isEmpty)
            #expect(try await fixture.store.summary(now: fixture.now).storedIDs == 0)
            #expect(try await fixture.store.nextBatchNumber() == 2)
            let renewed = fixture.entries(count: 3, seed: 1)
            guard case .stored(let late) = try await fixture.append(renewed) else { Issue.record("not stored"); return }
            #expect(late.stored == 3)
        }
    }

    // MARK: Publication

    /// ``SubmissionStore/pendingEntries(endingAfter:dueBy:)``: no id valid after `dueBy` is handed
    /// over, every id is once `dueBy` passed its window, and `nextDueBy` says when.
    @Test(arguments: backends) func idsStillValidWaitUntilDue(backend: StoreBackend) async throws {
        try await ContractFixture.with(backend) { fixture in
            let now = fixture.now
            let past = fixture.entries(count: 3, seed: 31, endingAt: now - 900)
            let current = fixture.entries(count: 3, seed: 32, endingAt: now + 600)
            try await fixture.append(past)
            try await fixture.append(current)
            let cutoff = now - fixture.server.configuration.retentionSeconds
            let early = try await fixture.store.pendingEntries(endingAfter: cutoff, dueBy: now)
            #expect(early.entries.allSatisfy { $0.validUntil <= now })
            #expect(Set(past.map(\.id)).isSubset(of: early.entries.map(\.id)))
            #expect(early.entries.count + early.waitingIDs == 6)
            let nextDueBy = try #require(early.nextDueBy)
            #expect(nextDueBy > now && nextDueBy <= now + 600)
            #expect(zip(early.entries, early.entries.dropFirst()).allSatisfy { $0.id < $1.id }, "not sorted by id")

            let late = try await fixture.store.pendingEntries(endingAfter: cutoff, dueBy: now + 600)
            #expect(Set(late.entries.map(\.id)) == Set((past + current).map(\.id)))
            #expect(late.waitingIDs == 0 && late.nextDueBy == nil)

            // Through the publisher, with the clock-skew allowance as the delay.
            let skew = fixture.server.configuration.clockSkewSeconds
            let publisher = fixture.publisher(idPublicationDelaySeconds: skew)
            let first = try await publisher.publish()
            #expect(first.waitingIDs > 0 && first.nextDueAt.map { $0 <= now + 600 + skew } == true)
            fixture.server.clock.advance(by: 600 + skew)
            try await publisher.publish()
            let published = try fixture.publishedIDs()
            #expect(published.count == 6 && Set(published) == Set((past + current).map(\.id.rawValue)))
        }
    }

    /// Ids whose windows ended by the retention cutoff before they could be published are never
    /// published, and do not stay pending.
    @Test(arguments: backends) func idsThatExpiredUnpublishedAreDropped(backend: StoreBackend) async throws {
        try await ContractFixture.with(backend) { fixture in
            let retention = fixture.server.configuration.retentionSeconds
            let old = fixture.entries(count: 4, seed: 41, endingAt: fixture.now - retention - 3_600)
            let fresh = fixture.entries(count: 4, seed: 42)
            try await fixture.append(old)
            try await fixture.append(fresh)
            let pending = try await fixture.store.pendingEntries(endingAfter: fixture.now - retention, dueBy: fixture.now)
            #expect(Set(pending.entries.map(\.id)) == Set(fresh.map(\.id)))
            let report = try await fixture.publisher().publish()
            #expect(report.newBatch?.idCount == 4)
            #expect(try await fixture.store.summary(now: fixture.now).unpublishedIDs == 0)
            #expect(try await fixture.publisher(1).publish().newBatch == nil)
            #expect(Set(try fixture.publishedIDs()) == Set(fresh.map(\.id.rawValue)))
        }
    }

    /// "Pending ids whose windows ended by `cutoff` before they were published are forgotten"
    /// by ``SubmissionStore/expireBatches(endingBy:now:)`` itself, on both back ends (no step of
    /// the publisher's that one of them skips); ids still inside retention stay pending.
    @Test(arguments: backends) func expiringBatchesForgetsPendingIdsPastRetention(backend: StoreBackend) async throws {
        try await ContractFixture.with(backend) { fixture in
            let cutoff = fixture.now - fixture.server.configuration.retentionSeconds
            try await fixture.append(fixture.entries(count: 3, seed: 43, endingAt: cutoff - 3_600))
            try await fixture.append(fixture.entries(count: 2, seed: 44, endingAt: cutoff - 60))
            let fresh = fixture.entries(count: 4, seed: 45)
            try await fixture.append(fresh)
            #expect(try await fixture.store.summary(now: fixture.now).unpublishedIDs == 9)
            #expect(try await fixture.store.expireBatches(endingBy: cutoff, now: fixture.now).isEmpty)
            #expect(try await fixture.store.summary(now: fixture.now).unpublishedIDs == 4)
            let pending = try await fixture.store.pendingEntries(endingAfter: 0, dueBy: fixture.now)
            #expect(pending.entries.map(\.id) == fresh.map(\.id))
        }
    }

    /// "`recordBatch` refuses (false) when another publisher recorded meanwhile, and a batch
    /// number is never recorded twice."
    @Test(arguments: backends) func aBatchIsRecordedOnceAndAStaleCutIsRefused(backend: StoreBackend) async throws {
        try await ContractFixture.with(backend) { fixture in
            let cutoff = fixture.now - fixture.server.configuration.retentionSeconds
            try await fixture.append(fixture.entries(count: 10, seed: 1))
            let stale = try await fixture.stores[1].pendingEntries(endingAfter: cutoff, dueBy: fixture.now)
            let pending = try await fixture.store.pendingEntries(endingAfter: cutoff, dueBy: fixture.now)
            #expect(pending.entries.count == 10)
            // Accepted during the publication: not in this cut, left for the next. (Uploaded
            // before the batch is recorded: the SQLite store checks uploads against batch files,
            // which this test does not write.)
            try await fixture.append(fixture.entries(count: 5, seed: 2), instance: 1)
            #expect(try await fixture.store.nextBatchNumber() == 1)
            #expect(try await fixture.store.recordBatch(fixture.batch(number: 1, of: pending), publishing: pending))
            // The other instance cut the same ids before: under the same number or the next.
            #expect(try await fixture.stores[1].recordBatch(fixture.batch(number: 1, of: stale), publishing: stale) == false)
            #expect(try await fixture.stores[1].recordBatch(fixture.batch(number: 2, of: stale), publishing: stale) == false)
            #expect(try await fixture.stores[1].nextBatchNumber() == 2)
            #expect(try await fixture.store.liveBatches().map(\.number) == [1])
            #expect(try await fixture.store.summary(now: fixture.now).unpublishedIDs == 5)

            // The ids accepted meanwhile, cut after the recorded batch: under the next number only.
            let next = try await fixture.stores[1].pendingEntries(endingAfter: cutoff, dueBy: fixture.now)
            #expect(next.entries.count == 5)
            #expect(try await fixture.stores[1].recordBatch(fixture.batch(number: 1, of: next), publishing: next) == false)
            #expect(try await fixture.stores[1].recordBatch(fixture.batch(number: 2, of: next), publishing: next))
            #expect(try await fixture.store.liveBatches().map(\.number) == [1, 2])
        }
    }

    /// Two instances publishing at once: one cuts the batch, the other waits (SQLite) or stands
    /// aside (PostgreSQL); every id published exactly once.
    @Test(arguments: backends) func twoPublishersAtOncePublishEachIdOnce(backend: StoreBackend) async throws {
        try await ContractFixture.with(backend) { fixture in
            var expected = Set<UInt64>()
            for round in 0..<3 {
                let entries = fixture.entries(count: 200, seed: UInt64(round + 1))
                expected.formUnion(entries.map(\.id.rawValue))
                try await fixture.append(entries, instance: round % 2)
                let publishers = [fixture.publisher(0), fixture.publisher(1)]
                let results = await withTaskGroup(of: Result<PublishReport, PublishError>.self) { group in
                    for publisher in publishers {
                        group.addTask {
                            do throws(PublishError) { return .success(try await publisher.publish()) } catch { return .failure(error) }
                        }
                    }
                    return await group.reduce(into: []) { $0.append($1) }
                }
                #expect(results.compactMap { try? $0.get().newBatch }.count == 1, "round \(round): \(results)")
                for case .failure(let error) in results {
                    guard case .anotherInstancePublishing = error else { Issue.record("unexpected \(error)"); continue }
                }
            }
            let published = try fixture.publishedIDs()
            #expect(published.count == expected.count && Set(published) == expected)
            #expect(try fixture.server.verifiedBatches().map(\.number) == [1, 2, 3])
        }
    }

    /// The publisher's crash safety, which the promises above exist for: a publisher failing
    /// after any step leaves a list that verifies, and the next (the other instance, or the
    /// restarted server) completes it with every id published exactly once.
    @Test(arguments: backends, PublishStep.idSteps + PublishStep.logSteps)
    func aPublisherFailingAtAnyStepLeavesAValidListThatTheNextCompletes(backend: StoreBackend, step: PublishStep) async throws {
        try await ContractFixture.with(backend) { fixture in
            let first = fixture.entries(count: 40, seed: 1)
            try await fixture.append(first)
            try await fixture.publisher().publish()
            let previous = try fixture.server.verifiedLog().checkpoint

            let second = fixture.entries(count: 25, seed: 2)
            try await fixture.append(second)
            let crashing = fixture.publisher(0) { current in
                if current == step { throw CancellationError() }
            }
            await #expect(throws: PublishError.self) { try await crashing.publish() }

            // Whatever a client fetches now verifies: the checkpoint (old or, after its rename,
            // new) and every tile and bundle it needs.
            let checkpoint = try fixture.server.verifiedLog().checkpoint
            #expect(step == .logCheckpointReplaced ? checkpoint.treeSize > previous.treeSize : checkpoint == previous)
            #expect(try fixture.server.verifiedBatches().map(\.number) == (step == .logCheckpointReplaced ? [1, 2] : [1]))

            try await fixture.publisher(1).publish()
            #expect(try fixture.server.verifiedBatches().map(\.count) == [40, 25])
            let published = try fixture.publishedIDs()
            #expect(published.count == 65 && Set(published) == Set((first + second).map(\.id.rawValue)))
            let names = try FileManager.default.subpathsOfDirectory(atPath: fixture.server.paths.published.path)
            #expect(!names.contains { ($0 as NSString).lastPathComponent.hasPrefix(".tmp-") }, "stale temporary files: \(names)")
            #expect(fixture.server.paths.published.retiredFilesPresent().isEmpty)
        }
    }

    // The index generation counters are gone with the indexes (issue 39 item 6 step 4): the
    // long poll announces the log's tree size (GenerationWatchTests).

    /// ``SubmissionStore/purge(endingBefore:now:)``: codes that ended by the cutoff and
    /// idempotency keys older than a week are forgotten; live ones stay.
    @Test(arguments: backends) func purgeForgetsEndedCodesAndWeekOldIdempotencyKeys(backend: StoreBackend) async throws {
        try await ContractFixture.with(backend) { fixture in
            let now = fixture.now
            let (ended, used, open) = (UploadCode.generate(), UploadCode.generate(), UploadCode.generate())
            try await fixture.store.recordIssuedCode(ended, authority: "Health Authority B", issuedAt: now - 7_200, expiresAt: now - 3_600)
            try await fixture.store.recordIssuedCode(used, authority: "Health Authority B", issuedAt: now - 7_200, expiresAt: now + 3_600)
            try await fixture.store.recordIssuedCode(open, authority: "Health Authority B", issuedAt: now, expiresAt: now + 3_600)
            let key = IdempotencyKey(key: "old-request", requestDigest: Array(repeating: 1, count: 32))
            try await fixture.append(fixture.entries(count: 2, seed: 1), credential: .uploadCode(used), idempotencyKey: key)
            let later = now + 8 * 86_400
            try await fixture.stores[1].purge(endingBefore: now, now: later)
            #expect(try await fixture.store.status(of: ended, now: now) == .unknown)
            #expect(try await fixture.store.status(of: used, now: now) == .unknown)
            #expect(try await fixture.store.status(of: open, now: now) == .valid(authority: "Health Authority B", expiresAt: now + 3_600))
            // The key is forgotten: the same request is a new submission now (its ids known).
            let again = try await fixture.store.appendHistory(
                fixture.entries(count: 2, seed: 1), credential: Self.authority, idempotencyKey: key, now: later)
            guard case .stored(let receipt) = again else { Issue.record("not stored: \(again)"); return }
            #expect(receipt.stored == 0 && receipt.submission != 1)
        }
    }

    /// What a batch published is kept with its record (there is no batch file): the log appends
    /// exactly what it published, and an upload of a published id or key is still no new one,
    /// on this instance and on the other (a fresh read of the database).
    @Test(arguments: backends) func theLogAndUploadsReadWhatTheStoreRecorded(backend: StoreBackend) async throws {
        try await ContractFixture.with(backend) { fixture in
            let ids = fixture.entries(count: 40, seed: 31)
            let yesterday = UTCDay(number: UTCDay(containing: fixture.now).number - 1)
            let keys = (1...5).map { DailyKeyRecord(day: yesterday, intervalSeconds: 900, key: Self.key($0)) }
            try await fixture.append(ids)
            try await fixture.appendKeys(keys)
            let directory = fixture.server.paths.published
            let report = try await fixture.publisher().publish()
            #expect(report.newBatch?.number == 1 && report.newKeyBatch?.number == 1)
            #expect(report.log?.appendedIDBatches == [1])
            #expect(report.log?.appendedKeyBatches == [1])
            let log = try PublishedListLog.open(directory, identity: try ListLogIdentity(origin: nil, publicKey: fixture.server.signingKey.publicKey))
            let (loggedIDs, loggedKeys, _) = try log.batches()
            #expect(loggedIDs[1] == ids)
            let published = try #require(loggedKeys[1])
            #expect(Set(keys).isSubset(of: Set(published)))
            #expect(published.count == (report.newKeyBatch.map { $0.keyCount + $0.fakeKeyCount } ?? -1))
            #expect(try await fixture.store.liveBatchContents(idBatchesAfter: 0, keyBatchesAfter: 0)
                == LiveBatchContents(idBatches: [PublishedIDBatch(number: 1, entries: ids)], keyBatches: [PublishedKeyBatch(number: 1, records: published.sorted { $0.key.bytes.lexicographicallyPrecedes($1.key.bytes) })]))
            #expect(try await fixture.store.liveBatchContents(idBatchesAfter: 1, keyBatchesAfter: 1) == LiveBatchContents())
            // A number beyond what the database can hold is after every batch, not a trap.
            #expect(try await fixture.store.liveBatchContents(idBatchesAfter: .max, keyBatchesAfter: .max) == LiveBatchContents())

            for instance in fixture.stores.indices {
                guard case .stored(let receipt) = try await fixture.append(Array(ids.prefix(3)), instance: instance) else {
                    Issue.record("instance \(instance) did not answer with a receipt")
                    continue
                }
                #expect(receipt.stored == 0, "instance \(instance) took a published id as new")
                guard case .stored(let keyReceipt) = try await fixture.appendKeys(Array(keys.prefix(2)), instance: instance) else {
                    Issue.record("instance \(instance) did not answer with a receipt")
                    continue
                }
                #expect(keyReceipt.stored == 0, "instance \(instance) took a published key as new")
            }
            #expect(try await fixture.publisher(1).publish().log?.appendedEntries == 0, "nothing is appended twice")
        }
    }

    /// An expired batch forgets what it published with its ids and keys (retention).
    @Test(arguments: backends) func anExpiredBatchForgetsWhatItPublished(backend: StoreBackend) async throws {
        try await ContractFixture.with(backend) { fixture in
            try await fixture.append(fixture.entries(count: 4, seed: 32))
            let pending = try await fixture.store.pendingEntries(endingAfter: fixture.now - 86_400, dueBy: fixture.now)
            #expect(try await fixture.store.recordBatch(fixture.batch(number: 1, of: pending), publishing: pending))
            let yesterday = UTCDay(number: UTCDay(containing: fixture.now).number - 1)
            try await fixture.appendKeys([DailyKeyRecord(day: yesterday, intervalSeconds: 900, key: Self.key(7))])
            #expect(try await fixture.store.recordKeyBatch(fixture.keyBatch(number: 1, keyCount: 1), keys: [Self.key(7)], published: fixture.published([Self.key(7)])))
            #expect(try await fixture.store.liveBatchContents(idBatchesAfter: 0, keyBatchesAfter: 0).idBatches.map(\.entries) == [pending.entries])
            let later = fixture.now + 30 * 86_400
            #expect(try await fixture.stores[1].expireBatches(endingBy: later, now: later) == [1])
            #expect(try await fixture.stores[1].expireKeyBatches(endingBy: later, now: later) == [1])
            #expect(try await fixture.store.liveBatchContents(idBatchesAfter: 0, keyBatchesAfter: 0) == LiveBatchContents())
            let kept = try await Self.storedContentCount(fixture)
            #expect(kept == 0, "an expired batch row still holds what it published")
        }
    }

    /// Batch rows (live or expired) still holding their content.
    static func storedContentCount(_ fixture: ContractFixture) async throws -> Int {
        let query = "SELECT (SELECT count(*) FROM batches WHERE entries IS NOT NULL) + (SELECT count(*) FROM key_batches WHERE records IS NOT NULL)"
        switch fixture.store {
        case let sqlite as ServerStore: return try await sqlite.read { db in try Int.fetchOne(db, sql: query) ?? -1 }
        case let postgres as PostgresServerStore: return Int(try await postgres.run { connection in try connection.exec(query).first!.int(0) })
        default: throw HarnessFailure(description: "unknown store \(type(of: fixture.store))")
        }
    }

    // MARK: Daily keys

    /// A key accepted before (pending or in a live batch) is not stored again, on either
    /// instance; a key batch's expiry forgets its keys.
    @Test(arguments: backends) func aKeyIsStoredOnceWhilePendingOrLive(backend: StoreBackend) async throws {
        try await ContractFixture.with(backend) { fixture in
            let today = UTCDay(containing: fixture.now).number
            let records = [today - 3, today - 2, today].enumerated().map {
                DailyKeyRecord(day: UTCDay(number: $1), intervalSeconds: 900, key: Self.key(UInt8($0 + 1)))
            }
            guard case .stored(let receipt) = try await fixture.appendKeys(records) else { Issue.record("not stored"); return }
            #expect(receipt.received == 3 && receipt.stored == 3)
            let yesterday = DailyKeyRecord(day: UTCDay(number: today - 1), intervalSeconds: 900, key: Self.key(9))
            guard case .stored(let again) = try await fixture.appendKeys(records + [yesterday, yesterday], instance: 1) else {
                Issue.record("not stored"); return
            }
            #expect(again.stored == 1)
            #expect(try await fixture.store.pendingKeyCount() == 4)

            // 08:00 UTC: the keys of the three days before today are due, today's waits.
            let report = try await fixture.publisher(1).publish()
            #expect(report.newKeyBatch?.number == 1 && report.newKeyBatch?.keyCount == 3 && report.waitingKeys == 1, "\(report)")
            var summary = try await fixture.store.summary(now: fixture.now)
            #expect(summary.storedKeys == 4 && summary.unpublishedKeys == 1 && summary.liveKeyBatches == 1)
            guard case .stored(let published) = try await fixture.appendKeys(records) else { Issue.record("not stored"); return }
            #expect(published.stored == 0, "a published key was taken as new")
            #expect(try await fixture.publisher().publish().newKeyBatch == nil)

            fixture.server.clock.advance(by: fixture.server.configuration.retentionSeconds + 2 * 86_400)
            let expired = try await fixture.publisher().publish()
            #expect(expired.expiredKeyBatches == [1] && expired.liveKeyBatches == 0)
            #expect(try await fixture.store.liveKeyBatches().isEmpty)
            summary = try await fixture.store.summary(now: fixture.now)
            #expect(summary.storedKeys == 0 && summary.unpublishedKeys == 0)
            #expect(try await fixture.store.nextKeyBatchNumber() == 2)
        }
    }

    /// ``SubmissionStore/dueKeys(before:)`` and ``SubmissionStore/heldKeyDays()``: unpublished keys
    /// of days before the first undue one, in key order; each held day and interval once.
    @Test(arguments: backends) func dueKeysAndHeldDays(backend: StoreBackend) async throws {
        try await ContractFixture.with(backend) { fixture in
            let today = UTCDay(containing: fixture.now)
            let yesterday = UTCDay(number: today.number - 1)
            let records = [
                DailyKeyRecord(day: yesterday, intervalSeconds: 900, key: Self.key(3)),
                DailyKeyRecord(day: yesterday, intervalSeconds: 900, key: Self.key(1)),
                DailyKeyRecord(day: yesterday, intervalSeconds: 600, key: Self.key(2)),
                DailyKeyRecord(day: today, intervalSeconds: 900, key: Self.key(4)),
            ]
            try await fixture.appendKeys(records)
            #expect(try await fixture.store.dueKeys(before: yesterday).isEmpty)
            #expect(try await fixture.stores[1].dueKeys(before: today).map(\.key) == [Self.key(1), Self.key(2), Self.key(3)])
            #expect(try await fixture.store.dueKeys(before: UTCDay(number: today.number + 1)).count == 4)
            #expect(Set(try await fixture.store.heldKeyDays()) == [
                HeldKeyDay(day: yesterday, intervalSeconds: 900), HeldKeyDay(day: yesterday, intervalSeconds: 600),
                HeldKeyDay(day: today, intervalSeconds: 900),
            ])
            #expect(try await fixture.store.heldKeyDays().count == 3)
            #expect(try await fixture.store.recordKeyBatch(fixture.keyBatch(number: 1, keyCount: 3), keys: [Self.key(1), Self.key(2), Self.key(3)], published: fixture.published([Self.key(1), Self.key(2), Self.key(3)])))
            #expect(try await fixture.store.dueKeys(before: today).isEmpty)
            #expect(try await fixture.store.heldKeyDays() == [HeldKeyDay(day: today, intervalSeconds: 900)])
            #expect(try await fixture.store.pendingKeyCount() == 1)
        }
    }

    /// `recordKeyBatch` refuses when another publisher took the number or any of the keys
    /// meanwhile, so that no key is published twice; a refused batch marks nothing.
    @Test(arguments: backends) func aKeyBatchIsRecordedOnceAndAKeyTakenMeanwhileRefusesIt(backend: StoreBackend) async throws {
        try await ContractFixture.with(backend) { fixture in
            let yesterday = UTCDay(number: UTCDay(containing: fixture.now).number - 1)
            try await fixture.appendKeys((1...4).map { DailyKeyRecord(day: yesterday, intervalSeconds: 900, key: Self.key($0)) })
            #expect(try await fixture.store.nextKeyBatchNumber() == 1)
            #expect(try await fixture.store.recordKeyBatch(fixture.keyBatch(number: 1, keyCount: 2), keys: [Self.key(1), Self.key(2)], published: fixture.published([Self.key(1), Self.key(2)])))
            #expect(try await fixture.stores[1].recordKeyBatch(fixture.keyBatch(number: 1, keyCount: 2), keys: [Self.key(3), Self.key(4)], published: fixture.published([Self.key(3), Self.key(4)])) == false)
            #expect(try await fixture.stores[1].recordKeyBatch(fixture.keyBatch(number: 2, keyCount: 2), keys: [Self.key(2), Self.key(3)], published: fixture.published([Self.key(2), Self.key(3)])) == false)
            #expect(try await fixture.store.pendingKeyCount() == 2, "a refused key batch marked keys")
            #expect(try await fixture.stores[1].nextKeyBatchNumber() == 2)
            #expect(try await fixture.stores[1].recordKeyBatch(fixture.keyBatch(number: 2, keyCount: 2), keys: [Self.key(3), Self.key(4)], published: fixture.published([Self.key(3), Self.key(4)])))
            #expect(try await fixture.store.liveKeyBatches().map(\.number) == [1, 2])
            #expect(try await fixture.store.pendingKeyCount() == 0)
        }
    }

    /// Pending keys whose day left the retention period unpublished are dropped at expiry.
    @Test(arguments: backends) func pendingKeysPastRetentionAreDropped(backend: StoreBackend) async throws {
        try await ContractFixture.with(backend) { fixture in
            let today = UTCDay(containing: fixture.now)
            try await fixture.appendKeys([
                DailyKeyRecord(day: UTCDay(number: today.number - 20), intervalSeconds: 900, key: Self.key(1)),
                DailyKeyRecord(day: today, intervalSeconds: 900, key: Self.key(2)),
            ])
            let cutoff = (today.number - 10) * 86_400
            #expect(try await fixture.stores[1].expireKeyBatches(endingBy: cutoff, now: fixture.now).isEmpty)
            #expect(try await fixture.store.dueKeys(before: UTCDay(number: today.number + 1)).map(\.key) == [Self.key(2)])
        }
    }

    @Test(arguments: backends, PublishStep.keySteps + PublishStep.logSteps)
    func aCrashDuringKeyPublicationLeavesTheLogValid(backend: StoreBackend, step: PublishStep) async throws {
        try await ContractFixture.with(backend) { fixture in
            let today = UTCDay(containing: fixture.now).number
            let first = (1...3).map { DailyKeyRecord(day: UTCDay(number: today - Int64($0)), intervalSeconds: 900, key: DailyKey.random()) }
            let second = (4...5).map { DailyKeyRecord(day: UTCDay(number: today - Int64($0)), intervalSeconds: 900, key: DailyKey.random()) }
            try await fixture.appendKeys(first)
            try await fixture.publisher().publish()
            let previous = try fixture.server.verifiedLog().checkpoint

            try await fixture.appendKeys(second, instance: 1)
            fixture.server.clock.advance(by: 3_600)
            let crashing = fixture.publisher(0) { current in
                if current == step { throw CancellationError() }
            }
            await #expect(throws: PublishError.self) { try await crashing.publish() }
            let checkpoint = try fixture.server.verifiedLog().checkpoint
            #expect(step == .logCheckpointReplaced ? checkpoint.treeSize > previous.treeSize : checkpoint == previous)
            #expect(try verifiedKeyBatches(fixture).map(\.number) == (step == .logCheckpointReplaced ? [1, 2] : [1]))

            // The next run finishes: every key published exactly once, no stray files.
            try await fixture.publisher(1).publish()
            #expect(Set(try verifiedKeyBatches(fixture).flatMap(\.records)) == Set(first + second))
            #expect(try verifiedKeyBatches(fixture).map(\.records.count) == [3, 2])
            let names = try FileManager.default.contentsOfDirectory(atPath: fixture.server.paths.published.path)
            #expect(names == ["log"], "\(names)")
        }
    }

    /// The key batches the published log holds, in number order.
    func verifiedKeyBatches(_ fixture: ContractFixture) throws -> [(number: UInt64, records: [DailyKeyRecord])] {
        try fixture.server.verifiedLog().batches().keys.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }
    }
}
