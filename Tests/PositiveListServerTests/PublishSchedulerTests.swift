import Logging
import ObjectStore
import PositiveListFormat
@testable import PositiveListServer
import ServerStorage
import Testing
import TestTiers
import TracerCore
import ServerTestSupport

/// `PublishScheduler`'s timing on a manual monotonic clock, with a scripted publisher and sync:
/// when a demand publishes (at once, or at the spacing's end after a batch), when held material
/// does, how failed publications and syncs are retried. Each test reads the scheduler's next wake
/// from the clock's sleepers (an exact set, so a wrong time never matches) and the times at which
/// it published and synced; no test waits in real time for a schedule.
@Suite(.tags(.unit)) struct PublishSchedulerTests {
    static let interval: Duration = .seconds(3_600)
    static let spacing: Duration = .seconds(300)

    /// A scheduler running on `clock` with `publisher` and `sync`, ended (and awaited) after `body`.
    static func running(
        _ clock: ManualMonotonicClock, _ publisher: ScriptedPublisher, sync: ScriptedSync? = nil, demand: PublicationDemand? = nil,
        _ body: () async throws -> Void
    ) async throws {
        let scheduler = PublishScheduler(
            publisher: publisher, interval: interval, spacing: spacing, demand: demand, logger: Logger(label: "test"), sync: sync,
            retry: RetryBackoff(first: .seconds(1), longest: .seconds(8)), clock: clock)
        let run = Task { try await scheduler.run() }
        defer { run.cancel() }
        try await body()
        run.cancel()
        try await run.value
    }

    static func expectPublications(_ publisher: ScriptedPublisher, at times: [Duration], sourceLocation: SourceLocation = #_sourceLocation) async {
        let reached = await eventually(timeout: .seconds(10), every: .milliseconds(1)) { await publisher.times == times }
        let published = await publisher.times
        #expect(reached, "published at \(published), not \(times)", sourceLocation: sourceLocation)
    }

    @Test func aDemandWithinTheSpacingAfterABatchWaitsForItsEndAndOneAfterItPublishesAtOnce() async throws {
        let clock = ManualMonotonicClock()
        let publisher = ScriptedPublisher(clock: clock, cutsBatches: true)
        let demand = PublicationDemand()
        try await Self.running(clock, publisher, demand: demand) {
            // At start, then nothing until the interval.
            await Self.expectPublications(publisher, at: [.zero])
            await clock.expectWakes([Self.interval])
            clock.advance(by: .seconds(10))
            demand.request()
            await clock.expectWakes([Self.spacing])
            clock.advance(by: .seconds(289))
            #expect(await publisher.times == [.zero], "published before the spacing's end")
            clock.advance(by: .seconds(1))
            await Self.expectPublications(publisher, at: [.zero, Self.spacing])
            await clock.expectWakes([Self.spacing + Self.interval])
            // Long after the spacing: at once.
            clock.advance(by: .seconds(700))
            demand.request()
            await Self.expectPublications(publisher, at: [.zero, Self.spacing, .seconds(1_000)])
            await clock.expectWakes([.seconds(1_000) + Self.interval])
        }
    }

    @Test func withoutABatchCutADemandWaitsOnlyTheShortestGap() async throws {
        let clock = ManualMonotonicClock()
        let publisher = ScriptedPublisher(clock: clock, cutsBatches: false)
        let demand = PublicationDemand()
        try await Self.running(clock, publisher, demand: demand) {
            await Self.expectPublications(publisher, at: [.zero])
            await clock.expectWakes([Self.interval])
            // Uploads not due yet publish nothing: one a second at most, however many arrive.
            demand.request()
            demand.request()
            await clock.expectWakes([.seconds(1)])
            clock.advance(by: .seconds(1))
            await Self.expectPublications(publisher, at: [.zero, .seconds(1)])
            await clock.expectWakes([.seconds(1) + Self.interval])
        }
    }

    @Test func heldMaterialIsPublishedWhenDueButNotBeforeTheSpacing() async throws {
        let clock = ManualMonotonicClock()
        // Every publication holds material due 120 s later; the first cuts a batch, no other.
        let publisher = ScriptedPublisher(clock: clock, cutsBatches: false, firstCutsABatch: true, nextDueAfter: 120)
        try await Self.running(clock, publisher) {
            await Self.expectPublications(publisher, at: [.zero])
            // Due at 120 s, held to the spacing's end after the batch at 0.
            await clock.expectWakes([Self.spacing])
            clock.advance(by: Self.spacing)
            await Self.expectPublications(publisher, at: [.zero, Self.spacing])
            // No batch since: the due time alone.
            await clock.expectWakes([Self.spacing + .seconds(120)])
            clock.advance(by: .seconds(120))
            await Self.expectPublications(publisher, at: [.zero, Self.spacing, Self.spacing + .seconds(120)])
        }
    }

    @Test func aFailedPublicationIsRetriedAtTheBackOffThenTheIntervalResumes() async throws {
        let clock = ManualMonotonicClock()
        let publisher = ScriptedPublisher(clock: clock, cutsBatches: false, failures: 3)
        try await Self.running(clock, publisher) {
            await Self.expectPublications(publisher, at: [.zero])
            await clock.expectWakes([.seconds(1)])
            clock.advance(by: .seconds(1))
            await clock.expectWakes([.seconds(3)])
            clock.advance(by: .seconds(2))
            await clock.expectWakes([.seconds(7)])
            clock.advance(by: .seconds(4))
            // The fourth attempt succeeds: the next is the interval's, the back-off reset.
            await Self.expectPublications(publisher, at: [.zero, .seconds(1), .seconds(3), .seconds(7)])
            await clock.expectWakes([.seconds(7) + Self.interval])
        }
    }

    @Test func anotherInstancePublishingIsNoFailureToRetry() async throws {
        let clock = ManualMonotonicClock()
        let publisher = ScriptedPublisher(clock: clock, cutsBatches: false, failures: 1, failure: .anotherInstancePublishing)
        try await Self.running(clock, publisher) {
            await Self.expectPublications(publisher, at: [.zero])
            await clock.expectWakes([Self.interval])
        }
    }

    @Test func aFailedSyncAloneIsRetriedWithoutPublishingAndWithoutWaitingForTheSpacing() async throws {
        let clock = ManualMonotonicClock()
        let publisher = ScriptedPublisher(clock: clock, cutsBatches: true)
        let sync = ScriptedSync(clock: clock, failures: 2)
        let demand = PublicationDemand()
        try await Self.running(clock, publisher, sync: sync, demand: demand) {
            await Self.expectPublications(publisher, at: [.zero])
            await clock.expectWakes([.seconds(1)])
            // A demand meanwhile waits for the spacing; the sync retries go first.
            demand.request()
            clock.advance(by: .seconds(1))
            await clock.expectWakes([.seconds(3)])
            clock.advance(by: .seconds(2))
            let synced = await eventually(timeout: .seconds(10), every: .milliseconds(1)) { await sync.times.count == 3 }
            #expect(synced)
            #expect(await sync.times == [.zero, .seconds(1), .seconds(3)])
            #expect(await publisher.times == [.zero], "a sync retry published")
            // The demand taken meanwhile is published at the spacing's end, then synced.
            await clock.expectWakes([Self.spacing])
            clock.advance(by: Self.spacing - .seconds(3))
            await Self.expectPublications(publisher, at: [.zero, Self.spacing])
        }
    }
}

/// Publications that take no time: each answers at once, cutting a batch or not, holding
/// material due `nextDueAfter` seconds later or not, the first `failures` failing.
actor ScriptedPublisher: ScheduledPublishing {
    let clock: ManualMonotonicClock
    let cutsBatches: Bool
    let firstCutsABatch: Bool
    let nextDueAfter: UnixSeconds?
    var failures: Int
    let failure: PublishError
    /// When each publication ran, as offsets of the clock.
    private(set) var times: [Duration] = []

    init(
        clock: ManualMonotonicClock, cutsBatches: Bool, firstCutsABatch: Bool = false, nextDueAfter: UnixSeconds? = nil,
        failures: Int = 0, failure: PublishError = .log("scripted: no space left on device")
    ) {
        self.clock = clock
        self.cutsBatches = cutsBatches
        self.firstCutsABatch = firstCutsABatch
        self.nextDueAfter = nextDueAfter
        self.failures = failures
        self.failure = failure
    }

    func publish() async throws -> PublishReport {
        times.append(clock.now.offset)
        if failures > 0 {
            failures -= 1
            throw failure
        }
        // The wall time the report carries only counts relative to `nextDueAt`.
        let publishedAt: UnixSeconds = 1_800_000_000
        var report = PublishReport(publishedAt: publishedAt)
        if cutsBatches || (firstCutsABatch && times.count == 1) {
            report.newBatch = BatchRecord(
                number: UInt64(times.count), timeRange: PublishedTimeRange(start: 0, end: 1), idCount: 1, lastSubmission: 1,
                publishedAt: publishedAt)
        }
        report.nextDueAt = nextDueAfter.map { publishedAt + $0 }
        return report
    }
}

/// Syncs that take no time, the first `failures` failing.
actor ScriptedSync: ScheduledSyncing {
    let clock: ManualMonotonicClock
    var failures: Int
    private(set) var times: [Duration] = []

    init(clock: ManualMonotonicClock, failures: Int) {
        self.clock = clock
        self.failures = failures
    }

    func sync() async throws -> SyncReport {
        times.append(clock.now.offset)
        if failures > 0 {
            failures -= 1
            throw ObjectStoreError.transport(operation: "upload", url: "http://scripted/log/checkpoint", reason: "connection reset")
        }
        return SyncReport()
    }
}
