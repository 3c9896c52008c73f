import Crypto
import Foundation
import PositiveListFormat
@testable import PositiveListServer
import Testing
import TestTiers
import TracerCore
import ServerTestSupport
import TracerTestSupport
import TransparencyLog
import Waits

/// What the long poll (`GET /v1/generation`) announces and when, on a manual monotonic clock:
/// the verified checkpoint's tree size, at once to a node behind, at the deadline to one up to
/// date, to every waiter when a publication appends (and not when one appends nothing); polls
/// over the limit are refused, and stopping ends the held ones. PublishSoonTests runs the same
/// over HTTP in a real `serve`.
@Suite(.tags(.unit)) struct GenerationWatchTests {
    typealias Generations = GenerationWatch.Generations

    /// Stores a fresh history and publishes it: the log grows by one batch's entries.
    static func publishABatch(_ fixture: ServerFixture, _ publisher: Publisher, seed: UInt64) async throws -> UInt64 {
        try await fixture.appendIDs(Histories.entries(count: 8, endingAt: fixture.clock.now(), seed: seed))
        try await publisher.publish()
        return try fixture.logTreeSize()
    }

    static func deadline(_ clock: ManualMonotonicClock, in seconds: Int64) -> Deadline {
        Deadline(clock.now.advanced(by: .seconds(seconds)), on: clock)
    }

    @Test func aNodeBehindIsAnsweredAtOnceAndOneUpToDateAtTheDeadline() async throws {
        let fixture = try ServerFixture()
        defer { fixture.remove() }
        let publisher = fixture.makePublisher()
        let size = try await Self.publishABatch(fixture, publisher, seed: 1)
        #expect(size > 0)
        let watch = GenerationWatch(directory: fixture.paths.published, identity: publisher.logIdentity)
        #expect(await watch.generations == Generations(generation: size, keyGeneration: 0))
        let clock = ManualMonotonicClock()

        // Behind, or following the retired key index: at once, the clock never moving.
        let behind = Generations(generation: size - 1, keyGeneration: 0)
        #expect(await watch.wait(after: behind, until: Self.deadline(clock, in: 30)) == .newer(Generations(generation: size, keyGeneration: 0)))
        let retired = Generations(generation: size, keyGeneration: 4)
        #expect(await watch.wait(after: retired, until: Self.deadline(clock, in: 30)) == .newer(Generations(generation: size, keyGeneration: 0)))

        // Up to date: nothing new, and only at the deadline.
        let upToDate = Generations(generation: size, keyGeneration: 0)
        let held = Task { await watch.wait(after: upToDate, until: Self.deadline(clock, in: 30)) }
        await clock.expectWakes([.seconds(30)])
        clock.advance(by: .seconds(29))
        await clock.expectWakes([.seconds(30)])
        clock.advance(by: .seconds(1))
        #expect(await held.value == .nothingNew)
        #expect(await watch.heldPolls == 0)
    }

    @Test func aPublicationThatAppendsWakesEveryWaiterAndOneThatAppendsNothingNone() async throws {
        let fixture = try ServerFixture()
        defer { fixture.remove() }
        let publisher = fixture.makePublisher()
        let first = try await Self.publishABatch(fixture, publisher, seed: 1)
        let watch = GenerationWatch(directory: fixture.paths.published, identity: publisher.logIdentity)
        let clock = ManualMonotonicClock()
        let upToDate = Generations(generation: first, keyGeneration: 0)
        let polls = (0..<2).map { _ in Task { await watch.wait(after: upToDate, until: Self.deadline(clock, in: 60)) } }
        await clock.expectWakes([.seconds(60), .seconds(60)])

        // A publication with nothing new re-signs nothing that grows the tree: no one wakes.
        fixture.clock.advance(by: 600)
        try await publisher.publish()
        #expect(try fixture.logTreeSize() == first)
        await watch.publishedDirectoryChanged()
        #expect(await watch.heldPolls == 2)

        let second = try await Self.publishABatch(fixture, publisher, seed: 2)
        #expect(second > first)
        // Not before the scheduler says the directory changed (after its sync).
        #expect(await watch.heldPolls == 2)
        await watch.publishedDirectoryChanged()
        for poll in polls {
            #expect(await poll.value == .newer(Generations(generation: second, keyGeneration: 0)))
        }
        #expect(clock.pendingWakes.isEmpty, "a woken poll left its deadline waiting")
    }

    @Test func pollsOverTheLimitAreRefusedAndStoppingEndsTheHeldOnes() async throws {
        let fixture = try ServerFixture()
        defer { fixture.remove() }
        let publisher = fixture.makePublisher()
        let size = try await Self.publishABatch(fixture, publisher, seed: 1)
        let watch = GenerationWatch(directory: fixture.paths.published, identity: publisher.logIdentity, maxWaiters: 1)
        let clock = ManualMonotonicClock()
        let upToDate = Generations(generation: size, keyGeneration: 0)
        let first = Task { await watch.wait(after: upToDate, until: Self.deadline(clock, in: 60)) }
        await clock.expectWakes([.seconds(60)])
        #expect(await watch.wait(after: upToDate, until: Self.deadline(clock, in: 60)) == .full)
        await watch.stop()
        #expect(await first.value == .nothingNew)
        // A stopped watch holds no poll.
        #expect(await watch.wait(after: upToDate, until: Self.deadline(clock, in: 60)) == .nothingNew)
        #expect(clock.pendingWakes.isEmpty)
    }

    /// The size comes from the checkpoint verified with the log's key: one signed by another key
    /// (or no checkpoint) announces nothing a node could download.
    @Test func aCheckpointThatDoesNotVerifyAnnouncesNothing() async throws {
        let fixture = try ServerFixture()
        defer { fixture.remove() }
        let publisher = fixture.makePublisher()
        let before = GenerationWatch(directory: fixture.paths.published, identity: publisher.logIdentity)
        #expect(await before.generations == Generations(generation: 0, keyGeneration: 0))
        _ = try await Self.publishABatch(fixture, publisher, seed: 1)
        let stranger = try ListLogIdentity(origin: nil, publicKey: Curve25519.Signing.PrivateKey().publicKey)
        let watch = GenerationWatch(directory: fixture.paths.published, identity: stranger)
        #expect(await watch.generations == Generations(generation: 0, keyGeneration: 0))
    }
}
