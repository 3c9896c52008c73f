import Crypto
import Foundation
import GRDB
import IDRotation
import PositiveListFormat
import RetiredFormatWriters
@testable import PositiveListServer
import ServerStorage
@testable import SQLiteServerStore
import Testing
import TestTiers
import TracerCore
import ServerTestSupport

/// Appending into the pending table and publishing from it: "stored once" across the pending ids
/// and the live batches, the receipts' counts, other processes, crashes between the steps, and
/// databases from earlier releases.
@Suite(.tags(.unit)) struct PendingIDsTests {
    static let now = ServerFixture.start

    func entries(_ fixture: ServerFixture, _ submitted: [SubmittedEntry]) throws -> [PositiveListEntry] {
        try HistoryRules(fixture.configuration).validate(SubmittedHistory(ids: submitted), now: fixture.clock.now())
    }

    /// Appends and returns the receipt's `stored` count.
    func append(_ submitted: [SubmittedEntry], to store: ServerStore, _ fixture: ServerFixture) async throws -> Int {
        let outcome = try await store.appendHistory(
            try entries(fixture, submitted), credential: .authority(name: "Health Authority A"), idempotencyKey: nil, now: fixture.clock.now())
        guard case .stored(let receipt) = outcome else {
            Issue.record("not stored: \(outcome)")
            return -1
        }
        #expect(receipt.received == submitted.count)
        return receipt.stored
    }

    /// Every id of every live batch, in batch order.
    func publishedIDs(_ fixture: ServerFixture) throws -> [[String]] {
        try fixture.verifiedBatches().map { $0.entries.map(\.id.hex) }
    }

    func pendingRowCount(_ store: ServerStore) async throws -> Int {
        try await store.read { db in try Int.fetchOne(db, sql: "SELECT coalesce(sum(id_count), 0) FROM pending_histories") ?? 0 }
    }

    @Test func idsAlreadyPendingOrPublishedAreNotStoredAgain() async throws {
        let fixture = try ServerFixture()
        defer { fixture.remove() }
        let first = Histories.entries(count: 100, endingAt: Self.now, seed: 1)
        let second = Histories.entries(count: 20, endingAt: Self.now, seed: 2)
        let third = Histories.entries(count: 5, endingAt: Self.now, seed: 3)

        #expect(try await append(first, to: fixture.store, fixture) == 100)
        // 50 ids still pending, 20 new, and one of the new ones twice in the same upload.
        #expect(try await append(Array(first.prefix(50)) + second + [second[7]], to: fixture.store, fixture) == 20)
        try await fixture.makePublisher().publish()

        // Now those 120 are published: 30 of the first, 10 of the second, 5 new.
        #expect(try await append(Array(first.suffix(30)) + Array(second.prefix(10)) + third, to: fixture.store, fixture) == 5)
        let summary = try await fixture.store.summary(now: Self.now)
        #expect(summary.storedIDs == 125)
        #expect(summary.unpublishedIDs == 5)
        try await fixture.makePublisher().publish()

        // Each id in exactly one batch.
        let batches = try publishedIDs(fixture)
        #expect(batches.map(\.count) == [120, 5])
        #expect(Set(batches.joined()) == Set((first + second + third).map(\.id)))
        #expect(batches.joined().count == 125)
        // And nothing is left pending once published.
        #expect(try await pendingRowCount(fixture.store) == 0)
        #expect(try await append(first + second + third, to: fixture.store, fixture) == 0)
        #expect(try await fixture.makePublisher().publish().newBatch == nil)
    }

    @Test func aRepeatedIdKeepsItsFirstWindowInTheUpload() async throws {
        let fixture = try ServerFixture()
        defer { fixture.remove() }
        var history = Histories.entries(count: 3, endingAt: Self.now)
        var later = history[1]
        later.validFrom += 60
        later.validUntil += 60
        history.append(later)
        #expect(try await append(history, to: fixture.store, fixture) == 3)
        try await fixture.makePublisher().publish()
        let batch = try #require(try fixture.verifiedBatches().first)
        let entry = try #require(batch.entries.first { $0.id.hex == history[1].id })
        #expect(entry.validFrom == history[1].validFrom)
    }

    @Test func uploadsArrivingBetweenPublicationsEachPublishOnce() async throws {
        let fixture = try ServerFixture()
        defer { fixture.remove() }
        let publisher = fixture.makePublisher()
        var accepted: Set<String> = []
        for round in 0..<6 {
            // Each round overlaps the previous one by half.
            let history = Histories.entries(count: 200, endingAt: Self.now, seed: UInt64(round / 2))
                + Histories.entries(count: 100, endingAt: Self.now, seed: UInt64(100 + round))
            let expectedNew = Set(history.map(\.id)).subtracting(accepted).count
            #expect(try await append(history, to: fixture.store, fixture) == expectedNew)
            accepted.formUnion(history.map(\.id))
            if round % 2 == 1 { try await publisher.publish() }
        }
        let published = try publishedIDs(fixture).joined()
        #expect(published.count == accepted.count)
        #expect(Set(published) == accepted)
        #expect(try await fixture.store.summary(now: Self.now).storedIDs == accepted.count)
    }

    @Test func aCrashAfterRecordingABatchIsSafe() async throws {
        let fixture = try ServerFixture()
        defer { fixture.remove() }
        let first = Histories.entries(count: 40, endingAt: Self.now, seed: 1)
        #expect(try await append(first, to: fixture.store, fixture) == 40)
        let crashing = fixture.makePublisher { step in
            if step == .batchRecorded { throw CancellationError() }
        }
        await #expect(throws: PublishError.self) { try await crashing.publish() }

        // Batch 1 owns the 40 ids; no index names it yet, and they are no longer pending.
        #expect(try await pendingRowCount(fixture.store) == 0)
        var summary = try await fixture.store.summary(now: Self.now)
        #expect(summary.storedIDs == 40)
        #expect(summary.unpublishedIDs == 0)

        // An upload meanwhile still finds them in the batch file, here through a restarted
        // server's store.
        let restarted = try ServerStore.open(path: fixture.paths.database, publishedDirectory: fixture.paths.published)
        let second = Histories.entries(count: 10, endingAt: Self.now, seed: 2)
        #expect(try await append(Array(first.prefix(20)) + second, to: restarted, fixture) == 10)

        // The next publication lists batch 1 and publishes only the 10 new ids.
        let report = try await fixture.makePublisher().publish()
        #expect(report.newBatch?.number == 2)
        #expect(report.newBatch?.idCount == 10)
        #expect(try publishedIDs(fixture).map(\.count) == [40, 10])
        summary = try await restarted.summary(now: Self.now)
        #expect(summary.storedIDs == 50)
        #expect(summary.unpublishedIDs == 0)
        #expect(try await append(first + second, to: restarted, fixture) == 0)
        #expect(try await append(first + second, to: fixture.store, fixture) == 0)
    }

    @Test func recordingABatchRemovesOnlyTheIdsItPublishes() async throws {
        // An upload that commits while a publication runs stays pending for the next batch.
        let fixture = try ServerFixture()
        defer { fixture.remove() }
        let published = Histories.entries(count: 20, endingAt: Self.now, seed: 1)
        let arrivedMeanwhile = Histories.entries(count: 8, endingAt: Self.now, seed: 2)
        #expect(try await append(published, to: fixture.store, fixture) == 20)
        let pending = try await fixture.store.pendingEntries(endingAfter: Self.now - fixture.configuration.retentionSeconds, dueBy: Self.now)
        #expect(try await append(arrivedMeanwhile, to: fixture.store, fixture) == 8)
        // The publisher's step by hand: the record, with what it publishes.
        let record = BatchRecord(
            number: 1, timeRange: PublishedTimeRange(covering: pending.entries)!, idCount: pending.entries.count,
            lastSubmission: pending.lastSubmission, publishedAt: Self.now)
        #expect(try await fixture.store.recordBatch(record, publishing: pending))
        // A second publisher that read the same pending ids is refused.
        #expect(try await !fixture.store.recordBatch(record, publishing: pending))

        #expect(try await pendingRowCount(fixture.store) == 8)
        let summary = try await fixture.store.summary(now: Self.now)
        #expect(summary.storedIDs == 28)
        #expect(summary.unpublishedIDs == 8)
        #expect(try await append(published + arrivedMeanwhile, to: fixture.store, fixture) == 0)
        let next = try await fixture.store.pendingEntries(endingAfter: Self.now - fixture.configuration.retentionSeconds, dueBy: Self.now)
        #expect(next.entries.map(\.id.hex).sorted() == arrivedMeanwhile.map(\.id).sorted())
    }

    /// Pending entries recorded by a store that did not read them (here: another database's) are
    /// refused with their own error, changing nothing, rather than read as "another publisher was
    /// first" or recorded against this database's watermark.
    @Test func aStoreRefusesPendingEntriesItDidNotRead() async throws {
        let fixture = try ServerFixture()
        defer { fixture.remove() }
        let other = try ServerFixture()
        defer { other.remove() }
        #expect(try await append(Histories.entries(count: 5, endingAt: Self.now, seed: 3), to: other.store, other) == 5)
        let foreign = try await other.store.pendingEntries(endingAfter: Self.now - other.configuration.retentionSeconds, dueBy: Self.now)
        let record = BatchRecord(
            number: 1, timeRange: PublishedTimeRange(covering: foreign.entries)!, idCount: foreign.entries.count,
            lastSubmission: foreign.lastSubmission, publishedAt: Self.now)
        await #expect {
            _ = try await fixture.store.recordBatch(record, publishing: foreign)
        } throws: { error in
            guard case .pendingEntriesReadElsewhere = error as? ServerStoreError else { return false }
            return true
        }
        #expect(try await fixture.store.liveBatches().isEmpty)
        #expect(try await other.store.liveBatches().isEmpty)
        #expect(try await other.store.recordBatch(record, publishing: foreign))
    }

    /// A live batch's recorded `entries` damaged (a content-less row is the upgrade suite's):
    /// uploads cannot be checked against its ids, so they are refused, storing nothing, never
    /// taking a published id as new; with the record repaired they go in again.
    @Test func aDamagedBatchRecordStopsUploadsWithoutStoringAnything() async throws {
        let fixture = try ServerFixture()
        defer { fixture.remove() }
        let first = Histories.entries(count: 30, endingAt: Self.now, seed: 1)
        #expect(try await append(first, to: fixture.store, fixture) == 30)
        try await fixture.makePublisher().publish()
        let original = try await fixture.store.read { db in try Data.fetchOne(db, sql: "SELECT entries FROM batches WHERE number = 1") }
        let second = Histories.entries(count: 5, endingAt: Self.now, seed: 2)
        // Cut short, or a count so large that its size overflows: neither may trap.
        for damage in ["UPDATE batches SET entries = substr(entries, 1, 100)", "UPDATE batches SET id_count = 9223372036854775807"] {
            _ = try await fixture.store.write { db in try db.execute(sql: damage) }
            // A fresh store, as a restarted server reads the live batches' ids.
            let store = try ServerStore.open(path: fixture.paths.database, publishedDirectory: fixture.paths.published)
            let error = await #expect(throws: ServerStoreError.self) {
                _ = try await store.appendHistory(
                    try entries(fixture, first + second), credential: .authority(name: "Health Authority A"), idempotencyKey: nil,
                    now: Self.now)
            }
            guard case .batchContentMissing(batch: "batch 1") = error else { Issue.record("\(damage): \(String(describing: error))"); return }
            #expect(try await pendingRowCount(store) == 0)
            #expect(try await store.summary(now: Self.now).submissions == 1)
            _ = try await store.write { db in
                try db.execute(sql: "UPDATE batches SET entries = ?, id_count = 30 WHERE number = 1", arguments: [original])
            }
        }
        let store = try ServerStore.open(path: fixture.paths.database, publishedDirectory: fixture.paths.published)
        #expect(try await append(first + second, to: store, fixture) == 5)
        #expect(try await store.summary(now: Self.now).submissions == 2)
    }

    @Test func anotherProcessAppendingOrPublishingIsSeen() async throws {
        // The server and a `tracer-server append` or `publish` process: two connections, each
        // with its own pending-id set.
        let fixture = try ServerFixture()
        defer { fixture.remove() }
        let other = try ServerStore.open(path: fixture.paths.database, publishedDirectory: fixture.paths.published)
        let history = Histories.entries(count: 50, endingAt: Self.now)
        // Load this connection's set first, so that it must notice the other's commit.
        #expect(try await append(Histories.entries(count: 1, endingAt: Self.now, seed: 9), to: fixture.store, fixture) == 1)
        #expect(try await append(history, to: other, fixture) == 50)
        #expect(try await append(history, to: fixture.store, fixture) == 0)

        // The other process publishes; this one finds the ids in the new batch file.
        let otherPublisher = Publisher(
            store: other, directory: fixture.paths.published, signingKey: fixture.signingKey,
            retentionSeconds: fixture.configuration.retentionSeconds, idPublicationDelaySeconds: 0, clock: fixture.clock,
            logger: fixture.logs.logger)
        try await otherPublisher.publish()
        #expect(try await pendingRowCount(fixture.store) == 0)
        let more = Histories.entries(count: 5, endingAt: Self.now, seed: 5)
        #expect(try await append(history + more, to: fixture.store, fixture) == 5)
        #expect(try await append(more, to: other, fixture) == 0)
    }

    @Test func idsPurgedAfterRetentionMayBeStoredAgain() async throws {
        // Ids are forgotten with their expired batch; the pending set must not
        // keep refusing them.
        let fixture = try ServerFixture()
        defer { fixture.remove() }
        let old = Histories.entries(count: 10, endingAt: Self.now - 27 * 86_400)
        #expect(try await append(old, to: fixture.store, fixture) == 10)
        try await fixture.makePublisher().publish()
        fixture.clock.advance(by: 2 * 86_400)
        try await fixture.makePublisher().publish()
        #expect(try await fixture.store.summary(now: fixture.clock.now()).storedIDs == 0)
        // The same ids with current windows (a client replaying its ids) are new again.
        let replayed = old.map { SubmittedEntry(id: $0.id, validFrom: fixture.clock.now() - 900, validUntil: fixture.clock.now()) }
        #expect(try await append(replayed, to: fixture.store, fixture) == 10)
    }

    @Test func aFailedUploadLeavesNothingBehindInMemoryEither() async throws {
        let fixture = try ServerFixture()
        defer { fixture.remove() }
        let history = Histories.entries(count: 25, endingAt: Self.now)
        // Make the upload fail after its ids were inserted: the idempotency key is the last
        // row the transaction writes.
        try await fixture.store.write { db in
            try db.execute(sql: """
                CREATE TEMPORARY TRIGGER refuse_idempotency_keys BEFORE INSERT ON idempotency_keys
                BEGIN SELECT RAISE(ABORT, 'injected failure'); END
                """)
        }
        await #expect(throws: ServerStoreError.self) {
            _ = try await fixture.store.appendHistory(
                try entries(fixture, history), credential: .authority(name: "Health Authority A"),
                idempotencyKey: IdempotencyKey(key: "k1", requestDigest: [1, 2, 3]), now: Self.now)
        }
        try await fixture.store.write { db in try db.execute(sql: "DROP TRIGGER temp.refuse_idempotency_keys") }
        #expect(try await pendingRowCount(fixture.store) == 0)
        #expect(try await append(history, to: fixture.store, fixture) == 25)
    }

    @Test func aDamagedPendingHistoryIsSetAsideWithoutStoppingPublication() async throws {
        let fixture = try ServerFixture()
        defer { fixture.remove() }
        let good = Histories.entries(count: 40, endingAt: Self.now, seed: 1)
        let truncated = Histories.entries(count: 30, endingAt: Self.now, seed: 2)
        let badWindow = Histories.entries(count: 20, endingAt: Self.now, seed: 3)
        for history in [truncated, good, badWindow] { _ = try await append(history, to: fixture.store, fixture) }
        // Submission 1 loses its tail; submission 3's first valid_until becomes 0.
        try await fixture.store.write { db in
            try db.execute(sql: "UPDATE pending_histories SET entries = substr(entries, 1, 100) WHERE submission = 1")
            try db.execute(sql: "UPDATE pending_histories SET entries = zeroblob(24) || substr(entries, 25) WHERE submission = 3")
        }
        // Uploads still work; the damaged histories' ids are not pending any more.
        let restarted = try ServerStore.open(path: fixture.paths.database, publishedDirectory: fixture.paths.published)
        #expect(try await append(Array(good.prefix(5)) + Array(truncated.prefix(5)), to: restarted, fixture) == 5)

        let report = try await fixture.makePublisher().publish()
        #expect(report.quarantinedSubmissions == [1, 3])
        #expect(report.newBatch?.idCount == 45)
        #expect(Set(try publishedIDs(fixture).joined()) == Set(good.map(\.id) + truncated.prefix(5).map(\.id)))
        #expect(fixture.logs.all.contains { $0.contains("pending ids damaged") && $0.contains("1,3") })
        let kept = try await fixture.store.read { db in
            try Int64.fetchAll(db, sql: "SELECT submission FROM damaged_pending_histories ORDER BY submission")
        }
        #expect(kept == [1, 3])
        #expect(try await pendingRowCount(fixture.store) == 0)
        // Sent again, the damaged histories' ids are new.
        #expect(try await append(badWindow, to: fixture.store, fixture) == 20)
        #expect(try await fixture.makePublisher().publish().quarantinedSubmissions.isEmpty)
    }

    /// With nothing else to publish, a damaged history is still set aside (by expireBatches,
    /// which moves the watermark past it), and no batch is cut.
    @Test func aDamagedPendingHistoryAloneIsSetAsideWithoutABatch() async throws {
        let fixture = try ServerFixture()
        defer { fixture.remove() }
        _ = try await append(Histories.entries(count: 10, endingAt: Self.now, seed: 4), to: fixture.store, fixture)
        try await fixture.store.write { db in
            try db.execute(sql: "UPDATE pending_histories SET entries = substr(entries, 1, 100) WHERE submission = 1")
        }
        let report = try await fixture.makePublisher().publish()
        #expect(report.quarantinedSubmissions == [1])
        #expect(report.newBatch == nil)
        let kept = try await fixture.store.read { db in
            try Int64.fetchAll(db, sql: "SELECT submission FROM damaged_pending_histories ORDER BY submission")
        }
        #expect(kept == [1])
        #expect(try await pendingRowCount(fixture.store) == 0)
        #expect(try await fixture.makePublisher().publish().quarantinedSubmissions.isEmpty)
    }

    enum EarlierRelease: String, CaseIterable, Sendable {
        /// Every id in one table; rows after the batches' watermark were the unpublished ones.
        case v1 = "v1: submissions, upload codes, batches"
        /// A pending table in arrival order and an id-keyed table of published ids.
        case v2 = "v2: pending ids in arrival order, published ids keyed by value"
    }

    /// A database as an earlier release left it: submissions 1 and 2 published in batch 1,
    /// submission 3 not yet. It keeps its pending ids and finds its published ones in batch 1.
    @Test(arguments: EarlierRelease.allCases)
    func aDatabaseOfAnEarlierReleaseKeepsItsPendingAndPublishedIds(_ release: EarlierRelease) async throws {
        let fixture = try ServerFixture()
        defer { fixture.remove() }
        let path = fixture.paths.dataDirectory + "/\(release).sqlite"
        let published = Histories.entries(count: 30, endingAt: Self.now, seed: 1)
        let unpublished = Histories.entries(count: 7, endingAt: Self.now, seed: 2)
        do {
            let queue = try DatabaseQueue(path: path)
            try ServerSchema.migrator.migrate(queue, upTo: release.rawValue)
            try await queue.write { db in
                func insert(_ entries: [SubmittedEntry], submission: Int, into table: String) throws {
                    for entry in entries {
                        let id = try UserID(hex: entry.id).databaseValue
                        switch table {
                        case "published_ids":
                            try db.execute(sql: "INSERT INTO published_ids (id, valid_until) VALUES (?, ?)", arguments: [id, entry.validUntil])
                        default:
                            try db.execute(
                                sql: "INSERT INTO \(table) (submission, id, valid_from, valid_until) VALUES (?, ?, ?, ?)",
                                arguments: [submission, id, entry.validFrom, entry.validUntil])
                        }
                    }
                }
                for _ in 1...3 {
                    try db.execute(
                        sql: "INSERT INTO submissions (authority, via_upload_code, received_at, id_count, new_id_count) VALUES ('A', 0, ?, 0, 0)",
                        arguments: [Self.now])
                }
                switch release {
                case .v1:
                    try insert(Array(published.prefix(15)), submission: 1, into: "submitted_ids")
                    try insert(Array(published.suffix(15)), submission: 2, into: "submitted_ids")
                    try insert(unpublished, submission: 3, into: "submitted_ids")
                case .v2:
                    // Submission 2's ids were not merged into published_ids yet (a crash
                    // between the steps); submission 3's wait, not in id order.
                    try insert(Array(published.prefix(15)), submission: 1, into: "published_ids")
                    try insert(Array(published.suffix(15)), submission: 2, into: "pending_ids")
                    try insert(unpublished, submission: 3, into: "pending_ids")
                }
                try Self.publishByHand(published, number: 1, lastSubmission: 2, fixture, db)
            }
            try queue.close()
        }

        let store = try ServerStore.open(path: path, publishedDirectory: fixture.paths.published)
        let summary = try await store.summary(now: Self.now)
        #expect(summary.storedIDs == 37)
        #expect(summary.unpublishedIDs == 7)
        let pending = try await store.pendingEntries(endingAfter: Self.now - fixture.configuration.retentionSeconds, dueBy: Self.now)
        #expect(pending.entries.map(\.id.hex) == unpublished.map(\.id).sorted())
        #expect(pending.entries.map(\.validUntil).sorted() == unpublished.map(\.validUntil).sorted())
        #expect(pending.lastSubmission == 3)
        #expect(try await append(published + unpublished, to: store, fixture) == 0)
        let oldTables = try await store.read { db in
            try ["submitted_ids", "pending_ids", "published_ids"].filter { try db.tableExists($0) }
        }
        #expect(oldTables.isEmpty)
    }

    /// Writes batch `number` of `entries` into the fixture's published directory and records it,
    /// as an earlier release's publisher would have.
    static func publishByHand(_ entries: [SubmittedEntry], number: UInt64, lastSubmission: Int64, _ fixture: ServerFixture, _ db: Database) throws {
        let sorted = try entries.map { PositiveListEntry(id: try UserID(hex: $0.id), validFrom: $0.validFrom, validUntil: $0.validUntil) }
            .sorted { $0.id < $1.id }
        let file = try PositiveListBatch.encode(number: number, entries: sorted, signingKey: fixture.signingKey)
        try FileManager.default.createDirectory(atPath: fixture.paths.published.path + "/batches", withIntermediateDirectories: true)
        try AtomicFile.write(file, to: fixture.paths.published.retiredBatchPath(number: number))
        let range = PublishedTimeRange(covering: sorted)!
        try db.execute(
            sql: """
                INSERT INTO batches (number, range_start, range_end, byte_count, sha256, id_count, last_submission, published_at)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?)
                """,
            arguments: [Int64(number), range.start, range.end, file.count, Data(SHA256.hash(data: file)), sorted.count, lastSubmission, Self.now])
    }
}
