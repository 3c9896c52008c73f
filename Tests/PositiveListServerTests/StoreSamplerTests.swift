import Foundation
@testable import PositiveListServer
import ServerStorage
import Synchronization
import Testing

/// The metrics' store reading (``StoreSampler``): a scrape never waits longer than the deadline
/// for a store that does not answer, scrapes at the same time share one query, and a reading is
/// reused for a while.
@Suite(.tags(.unit)) struct StoreSamplerTests {
    final class FakeStore: Sendable {
        let reads = Atomic<Int>(0)
        /// How long each read takes; nil: it throws at once (the store is down).
        let delay: Duration?
        init(delay: Duration?) { self.delay = delay }

        static let counts = UploadCodeCounts(open: 7, expiredUnused: 3)

        @Sendable func read() async throws -> UploadCodeCounts {
            reads.add(1, ordering: .relaxed)
            guard let delay else { throw ServerStoreError.busy(path: "test.db") }
            try? await Task.sleep(for: delay)
            return Self.counts
        }
    }

    @Test(.timeLimit(.minutes(1))) func aStoreThatHangsReadsAsDownWithinTheDeadlineAndIsAskedOnce() async {
        let store = FakeStore(delay: .seconds(30))
        let sampler = StoreSampler(deadline: .milliseconds(300), maxAge: .seconds(5), read: store.read)
        let started = ContinuousClock.now
        async let first = sampler.sample()
        async let second = sampler.sample()
        let readings = await [first, second]
        #expect(readings == [.down, .down])
        #expect(ContinuousClock.now - started < .seconds(10), "a scrape waited \(ContinuousClock.now - started)")
        // A third scrape while the query still runs waits for it again; it starts no other.
        #expect(await sampler.sample() == .down)
        #expect(store.reads.load(ordering: .relaxed) == 1)
    }

    @Test(.timeLimit(.minutes(1))) func concurrentScrapesShareOneQueryAndTheReadingIsReused() async {
        let store = FakeStore(delay: .milliseconds(200))
        let sampler = StoreSampler(deadline: .seconds(20), maxAge: .milliseconds(500), read: store.read)
        let readings = await withTaskGroup(of: StoreSampler.Reading.self) { group in
            for _ in 0..<5 { group.addTask { await sampler.sample() } }
            return await group.reduce(into: []) { $0.append($1) }
        }
        #expect(readings == Array(repeating: .up(FakeStore.counts), count: 5))
        #expect(await sampler.sample() == .up(FakeStore.counts))
        #expect(store.reads.load(ordering: .relaxed) == 1, "a fresh reading is reused")
        try? await Task.sleep(for: .milliseconds(600))
        #expect(await sampler.sample() == .up(FakeStore.counts))
        #expect(store.reads.load(ordering: .relaxed) == 2, "a stale one is read again")
    }

    @Test(.timeLimit(.minutes(1))) func aStoreThatFailsReadsAsDown() async {
        let sampler = StoreSampler(deadline: .seconds(20), maxAge: .zero, read: FakeStore(delay: nil).read)
        #expect(await sampler.sample() == .down)
    }
}
