import Crypto
import Foundation
import IDRotation
import PositiveListFormat
@testable import PositiveListServer
import Testing
import TestTiers
import TracerCore

@Suite(.tags(.unit)) struct PublicationTests {
    static let now = ServerFixture.start

    func append(_ fixture: ServerFixture, count: Int, seed: UInt64, endingAt end: UnixSeconds = now) async throws -> [PositiveListEntry] {
        let entries = try HistoryRules(fixture.configuration)
            .validate(SubmittedHistory(ids: Histories.entries(count: count, endingAt: end, seed: seed)), now: fixture.clock.now())
        let outcome = try await fixture.store.appendHistory(entries, credential: .authority(name: "Health Authority A"), idempotencyKey: nil, now: fixture.clock.now())
        guard case .stored = outcome else { Issue.record("not stored: \(outcome)"); return [] }
        return entries
    }

    @Test func aBatchHoldsTheNewIdsSortedAndTheIndexListsIt() async throws {
        let fixture = try ServerFixture()
        defer { fixture.remove() }
        let first = try await append(fixture, count: 300, seed: 1)
        let second = try await append(fixture, count: 200, seed: 2)
        let report = try await fixture.makePublisher().publish()
        #expect(report.newBatch?.number == 1)
        #expect(report.newBatch?.idCount == 500)

        let index = try fixture.verifiedIndex()
        #expect(index.generation == 1)
        #expect(index.batches.map(\.number) == [1])
        // The key index is published beside it, and the id index says so (issue 25, item 1).
        #expect(index.flags.contains(.keyIndexPublished))
        #expect(FileManager.default.fileExists(atPath: fixture.paths.published.keyIndexPath))
        let batch = try #require(try fixture.verifiedBatches().first)
        // Sorted by value, so the order says nothing about which upload an id came from.
        #expect(batch.entries == (first + second).sorted { $0.id < $1.id })
        #expect(batch.timeRange == PublishedTimeRange(covering: first + second))
        let mode = try FileManager.default.attributesOfItem(atPath: fixture.paths.published.batchPath(number: 1))[.posixPermissions] as? Int
        #expect(mode == 0o644)
    }

    @Test func laterBatchesHoldOnlyNewIdsAndAnIdleRunLeavesTheIndexAlone() async throws {
        let fixture = try ServerFixture()
        defer { fixture.remove() }
        let publisher = fixture.makePublisher()
        _ = try await append(fixture, count: 50, seed: 1)
        try await publisher.publish()
        let indexBefore = try Data(contentsOf: URL(fileURLWithPath: fixture.paths.published.indexPath))

        let idle = try await publisher.publish()
        #expect(idle.newBatch == nil)
        #expect(idle.indexGeneration == nil)
        #expect(try Data(contentsOf: URL(fileURLWithPath: fixture.paths.published.indexPath)) == indexBefore)

        fixture.clock.advance(by: 3_600)
        let later = try await append(fixture, count: 30, seed: 2, endingAt: Self.now + 3_600)
        let report = try await publisher.publish()
        #expect(report.newBatch?.number == 2)
        #expect(report.indexGeneration == 2)
        let batches = try fixture.verifiedBatches()
        #expect(batches.map(\.number) == [1, 2])
        #expect(batches[1].entries == later.sorted { $0.id < $1.id })
    }

    @Test func anIdleServerSignsANewIndexOnceADay() async throws {
        // So that a node can tell an idle list from one a frozen mirror keeps confirming.
        let fixture = try ServerFixture()
        defer { fixture.remove() }
        let publisher = fixture.makePublisher()
        _ = try await append(fixture, count: 20, seed: 1)
        try await publisher.publish()
        let first = try fixture.verifiedIndex()

        fixture.clock.advance(by: 86_399)
        #expect(try await publisher.publish().indexGeneration == nil)
        fixture.clock.advance(by: 1)
        let refreshed = try await publisher.publish()
        #expect(refreshed.newBatch == nil)
        #expect(refreshed.indexGeneration == first.generation + 1)
        let second = try fixture.verifiedIndex()
        #expect(second.publishedAt == Self.now + 86_400)
        #expect(second.batches == first.batches)
        #expect(try await publisher.publish().indexGeneration == nil)
    }

    @Test func batchesLeaveTheIndexAndTheDiskOnceAllTheirIdsPassedRetention() async throws {
        let fixture = try ServerFixture()
        defer { fixture.remove() }
        let publisher = fixture.makePublisher()
        // Batch 1: ids ending 10 days ago; batch 2: ids ending now.
        _ = try await append(fixture, count: 10, seed: 1, endingAt: Self.now - 10 * 86_400)
        try await publisher.publish()
        _ = try await append(fixture, count: 10, seed: 2)
        try await publisher.publish()
        #expect(try fixture.verifiedIndex().batches.map(\.number) == [1, 2])

        fixture.clock.advance(by: 18 * 86_400 + 1)
        let report = try await publisher.publish()
        #expect(report.expiredBatches == [1])
        #expect(try fixture.verifiedIndex().batches.map(\.number) == [2])
        #expect(!FileManager.default.fileExists(atPath: fixture.paths.published.batchPath(number: 1)))
        #expect(FileManager.default.fileExists(atPath: fixture.paths.published.batchPath(number: 2)))

        fixture.clock.advance(by: 10 * 86_400)
        try await publisher.publish()
        #expect(try fixture.verifiedIndex().batches.isEmpty)
        #expect(fixture.paths.published.batchFileNumbers().isEmpty)
        // Expired ids are purged from the database too, and batch numbers are never reused.
        #expect(try await fixture.store.summary(now: fixture.clock.now()).storedIDs == 0)
        #expect(try await fixture.store.nextBatchNumber() == 3)
    }

    @Test(.tags(.endToEnd)) func aKilledPublishProcessLeavesAValidIndex() async throws {
        // A real crash: the publisher process is killed with SIGKILL while it publishes a large
        // batch; the index it leaves must still verify, whichever step it died in.
        let fixture = try ServerFixture()
        defer { fixture.remove() }
        try fixture.writeConfiguration()
        // The process publishes by the real clock, and only ids expired 300 s ago or more: the
        // histories end before that, and the fixture's clock is moved to the real time.
        let realNow = UnixSeconds(Date().timeIntervalSince1970)
        fixture.clock.advance(by: realNow - fixture.clock.now())
        _ = try await append(fixture, count: 20, seed: 1, endingAt: realNow - 600)
        try await fixture.makePublisher().publish()
        for seed in 2..<40 {
            _ = try await append(fixture, count: 2_600, seed: UInt64(seed), endingAt: realNow - 600 - Int64(seed) * 60)
        }
        // Kills at several moments, so that at least one lands inside the publication (a
        // debug build takes about 200 ms for these 100,000 ids).
        var killed = 0
        for delay in [40, 80, 120, 160, 200, 260, 330] {
            let process = try ServerCLI.start(["publish"], fixture: fixture)
            try await Task.sleep(for: .milliseconds(delay))
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
            if process.terminationReason == .uncaughtSignal { killed += 1 }
            let index = try fixture.verifiedIndex()
            #expect(try fixture.verifiedBatches().count == index.batches.count, "killed after \(delay) ms")
        }
        #expect(killed > 0, "no kill landed before the publication finished")
        // And a later run completes the publication.
        let result = try ServerCLI.run(["publish"], fixture: fixture)
        #expect(result.exitCode == 0, "\(result)")
        #expect(try fixture.verifiedBatches().reduce(0) { $0 + $1.count } == 20 + 38 * 2_600)
    }
}
