import Crypto
import Foundation
import IDRotation
import PositiveListFormat
@testable import PositiveListServer
import Testing
import TestTiers
import TracerCore
import ServerTestSupport

@Suite(.tags(.unit)) struct PublicationTests {
    static let now = ServerFixture.start

    func append(_ fixture: ServerFixture, count: Int, seed: UInt64, endingAt end: UnixSeconds = now) async throws -> [PositiveListEntry] {
        try await fixture.appendIDs(Histories.entries(count: count, endingAt: end, seed: seed))
    }

    @Test func aBatchHoldsTheNewIdsSortedAndTheLogHoldsIt() async throws {
        let fixture = try ServerFixture()
        defer { fixture.remove() }
        let first = try await append(fixture, count: 300, seed: 1)
        let second = try await append(fixture, count: 200, seed: 2)
        let report = try await fixture.makePublisher().publish()
        #expect(report.newBatch?.number == 1)
        #expect(report.newBatch?.idCount == 500)
        #expect(report.newBatch?.timeRange == PublishedTimeRange(covering: first + second))

        let batch = try #require(try fixture.verifiedBatches().first)
        #expect(batch.number == 1)
        // Sorted by value, so the order says nothing about which upload an id came from.
        #expect(batch.entries == (first + second).sorted { $0.id < $1.id })
        #expect(try await fixture.store.liveBatches().map(\.number) == [1])
        let mode = try FileManager.default.attributesOfItem(atPath: fixture.paths.published.logCheckpointPath)[.posixPermissions] as? Int
        #expect(mode == 0o644)
    }

    /// Issue 39 item 6 step 4: the log is all a publication writes; the retired files of
    /// formats 1 and 2 (`index.tpli`, `batches/`, `keys/index.tpki`, `keys/N.tpkb`) never appear,
    /// with ids, keys, an expiry and an idle day's re-signed checkpoint.
    @Test func aPublicationWritesNoIndexBatchOrKeyFiles() async throws {
        let fixture = try ServerFixture()
        defer { fixture.remove() }
        let publisher = fixture.makePublisher()
        _ = try await append(fixture, count: 40, seed: 1, endingAt: Self.now - 10 * 86_400)
        try await ListLogPublicationTests.addKeys(fixture, count: 5, seed: 2)
        try await publisher.publish()
        fixture.clock.advance(by: 18 * 86_400 + 1)
        _ = try await append(fixture, count: 40, seed: 3, endingAt: fixture.clock.now())
        let report = try await publisher.publish()
        #expect(report.expiredBatches == [1])
        fixture.clock.advance(by: 86_400)
        try await publisher.publish()

        #expect(try fixture.verifiedLog().batches().order == ["ids 1", "keys 1", "ids 2"], "what was published is in the log")
        #expect(fixture.paths.published.retiredFilesPresent().isEmpty)
        let everything = try FileManager.default.subpathsOfDirectory(atPath: fixture.paths.published.path)
        #expect(everything.filter { !$0.hasPrefix("log") }.isEmpty, "only the log: \(everything.filter { !$0.hasPrefix("log") })")
        #expect(!everything.contains { $0.hasSuffix(".tpli") || $0.hasSuffix(".tplb") || $0.hasSuffix(".tpki") || $0.hasSuffix(".tpkb") })
    }

    @Test func laterBatchesHoldOnlyNewIdsAndAnIdleRunLeavesTheCheckpointAlone() async throws {
        let fixture = try ServerFixture()
        defer { fixture.remove() }
        let publisher = fixture.makePublisher()
        _ = try await append(fixture, count: 50, seed: 1)
        try await publisher.publish()
        let checkpointBefore = try Data(contentsOf: URL(fileURLWithPath: fixture.paths.published.logCheckpointPath))

        let idle = try await publisher.publish()
        #expect(idle.newBatch == nil)
        #expect(idle.log?.appendedEntries == 0)
        #expect(try Data(contentsOf: URL(fileURLWithPath: fixture.paths.published.logCheckpointPath)) == checkpointBefore)

        fixture.clock.advance(by: 3_600)
        let later = try await append(fixture, count: 30, seed: 2, endingAt: Self.now + 3_600)
        let report = try await publisher.publish()
        #expect(report.newBatch?.number == 2)
        #expect(report.log?.appendedIDBatches == [2])
        let batches = try fixture.verifiedBatches()
        #expect(batches.map(\.number) == [1, 2])
        #expect(batches[1].entries == later.sorted { $0.id < $1.id })
    }

    // That an idle server signs its list again once a day (so that a node can tell an idle list
    // from one a frozen mirror keeps confirming) is ListLogPublicationTests'
    // anIdleLogIsSignedAgainOnceItsCheckpointIsOld.

    @Test func batchesStopBeingLiveOnceAllTheirIdsPassedRetention() async throws {
        let fixture = try ServerFixture()
        defer { fixture.remove() }
        let publisher = fixture.makePublisher()
        // Batch 1: ids ending 10 days ago; batch 2: ids ending now.
        _ = try await append(fixture, count: 10, seed: 1, endingAt: Self.now - 10 * 86_400)
        try await publisher.publish()
        _ = try await append(fixture, count: 10, seed: 2)
        try await publisher.publish()
        #expect(try await fixture.store.liveBatches().map(\.number) == [1, 2])

        fixture.clock.advance(by: 18 * 86_400 + 1)
        let report = try await publisher.publish()
        #expect(report.expiredBatches == [1])
        #expect(report.liveBatches == 1)
        #expect(try await fixture.store.liveBatches().map(\.number) == [2])

        fixture.clock.advance(by: 10 * 86_400)
        try await publisher.publish()
        #expect(try await fixture.store.liveBatches().isEmpty)
        // Expired ids are purged from the database too, and batch numbers are never reused.
        #expect(try await fixture.store.summary(now: fixture.clock.now()).storedIDs == 0)
        #expect(try await fixture.store.nextBatchNumber() == 3)
    }

    @Test(.tags(.endToEnd)) func aKilledPublishProcessLeavesAValidLog() async throws {
        // A real crash: the publisher process is killed with SIGKILL while it publishes a large
        // batch; the log it leaves must still verify, whichever step it died in.
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
            // The log opens and verifies from its files, and holds only batches the store recorded.
            let logged = try fixture.verifiedBatches().map(\.number)
            let recorded = try await fixture.store.liveBatches().map(\.number)
            #expect(Array(recorded.prefix(logged.count)) == logged, "killed after \(delay) ms")
        }
        #expect(killed > 0, "no kill landed before the publication finished")
        // And a later run completes the publication.
        let result = try ServerCLI.run(["publish"], fixture: fixture)
        #expect(result.exitCode == 0, "\(result)")
        #expect(try fixture.verifiedBatches().reduce(0) { $0 + $1.count } == 20 + 38 * 2_600)
    }
}
