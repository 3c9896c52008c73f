import Foundation
import IDRotation
import PositiveListFormat
@testable import PositiveListServer
import Testing
import TestTiers
import TracerCore
import TransparencyLog
import ServerTestSupport

/// The log's publication on both back ends: two instances on the same data (for SQLite a `serve`
/// and a `publish` beside it), one crashing after each step of the log, the other completing it.
@Suite(.tags(.integration), .serialized, .sharedPostgres) struct ListLogBackendTests {
    static func keys(_ fixture: ContractFixture, count: Int, seed: UInt64) -> [DailyKeyRecord] {
        var generator = SplitMix64(seed: seed)
        let yesterday = UTCDay(number: UTCDay(containing: fixture.now).number - 1)
        return (0..<count).map { _ in DailyKeyRecord(day: yesterday, intervalSeconds: 900, key: DailyKey.random(using: &generator)) }
    }

    @Test(arguments: StoreBackend.allCases, PublishStep.logSteps)
    func aCrashInTheLogIsCompletedByTheOtherInstance(backend: StoreBackend, step: PublishStep) async throws {
        try await ContractFixture.with(backend) { fixture in
            let identity = try ListLogIdentity(origin: nil, publicKey: fixture.server.signingKey.publicKey)
            try await fixture.append(fixture.entries(count: 40, seed: 1))
            try await fixture.appendKeys(Self.keys(fixture, count: 3, seed: 2))
            try await fixture.publisher().publish()
            let before = try PublishedListLog.open(fixture.server.paths.published, identity: identity)
            #expect(before.checkpoint.treeSize == 2)

            fixture.server.clock.advance(by: 3_600)
            try await fixture.append(fixture.entries(count: 25, seed: 3))
            try await fixture.appendKeys(Self.keys(fixture, count: 2, seed: 4))
            let crashing = fixture.publisher(0) { if $0 == step { throw CancellationError() } }
            await #expect(throws: PublishError.self) { try await crashing.publish() }
            let after = try PublishedListLog.open(fixture.server.paths.published, identity: identity)
            #expect(after.checkpoint.treeSize == (step == .logCheckpointReplaced ? 4 : 2))

            try await fixture.publisher(1).publish()
            let completed = try PublishedListLog.open(fixture.server.paths.published, identity: identity)
            #expect(completed.checkpoint.treeSize == 4)
            #expect(try completed.batches().order == ["ids 1", "keys 1", "ids 2", "keys 2"])
            try await ListLogPublicationTests.expectLogMatchesBatches(fixture.server, completed, store: fixture.store)
            try ListLogPublicationTests.consistencyHolds(fixture.server, from: before.checkpoint, to: completed.checkpoint)
        }
    }
}
