import Foundation
import Logging
import ServerStorage
import ServiceLifecycle
import Waits

/// The one owner of publication in a running server. Publishes once at start (which also
/// repairs whatever a crash interrupted), then every interval, soon after a ``demand``
/// (an accepted upload), and when held material becomes due (each publication reports when the
/// next held id or key may be published): at once when the last publication that cut a batch
/// is at least `spacing` ago, else when it will be. The spacing bounds how many batches a flood of uploads
/// can cut and how often nodes fetch a new checkpoint and entries. A publication in progress
/// finishes before graceful shutdown. With `sync`, mirrors the directory to the object store
/// after each publication; with `watch`, tells long-polling nodes of each new log size.
///
/// A publication or sync that fails (a full disk, the database restarting, the object store
/// down) is tried again after ``retry``'s back-off rather than at the next interval, hours away:
/// an upload accepted meanwhile must reach nodes minutes after the cause goes, and the bucket
/// must catch up as soon as it answers again.
///
/// Its time is the monotonic `clock`'s (the continuous clock in `serve`, a manual one in tests):
/// spacing, interval and back-off are durations, never wall times, so a stepped wall clock moves
/// none of them. It drives its two seams, ``ScheduledPublishing`` and ``ScheduledSyncing``, in
/// order, one at a time.
public struct PublishScheduler<C: Clock>: Service where C.Duration == Duration {
    let publisher: any ScheduledPublishing
    let interval: Duration
    let spacing: Duration
    let demand: PublicationDemand?
    let watch: GenerationWatch?
    let logger: Logger
    let sync: (any ScheduledSyncing)?
    let retry: RetryBackoff
    let clock: C
    /// Records each publication's report and each sync's outcome (the metrics listener's).
    package var metrics: ServerMetrics?

    public init(
        publisher: any ScheduledPublishing, interval: Duration,
        spacing: Duration = .seconds(ServerConfiguration.shortestPublishIntervalSeconds),
        demand: PublicationDemand? = nil, watch: GenerationWatch? = nil, logger: Logger, sync: (any ScheduledSyncing)? = nil,
        retry: RetryBackoff = RetryBackoff(), clock: C
    ) {
        self.retry = retry
        self.publisher = publisher
        self.interval = interval
        self.spacing = spacing
        self.demand = demand
        self.watch = watch
        self.logger = logger
        self.sync = sync
        self.clock = clock
    }

    static var shortestGap: Duration { .seconds(1) }

    public func run() async throws {
        var lastBatchCut: C.Instant?
        var backoff = retry
        var started = clock.now
        var nextDue: C.Instant?
        var publishing = true
        var requestTaken = false
        while !Task.isShuttingDownGracefully && !Task.isCancelled {
            var publicationFailed = false
            if publishing {
                started = clock.now
                nextDue = nil
                do {
                    let report = try await publisher.publish()
                    metrics?.publicationSucceeded(report, took: started.duration(to: clock.now))
                    if sync != nil { metrics?.publishedForSync(at: report.publishedAt) }
                    if report.newBatch != nil || report.newKeyBatch != nil { lastBatchCut = started }
                    // Measured from after the publication, whose wall time `publishedAt` was read
                    // before it: the wake-up can only come late by the publication's length, never
                    // early (an early one would publish nothing and wait again).
                    nextDue = report.nextDueAt.map { clock.now.advanced(by: .seconds(max($0 - report.publishedAt, 0))) }
                } catch {
                    // Logged by the publisher; the published directory still holds the previous,
                    // valid checkpoint, and the retry below publishes what this one could not.
                    // Another instance publishing is no failure: it publishes what is due.
                    if case PublishError.anotherInstancePublishing = error {} else {
                        publicationFailed = true
                        metrics?.publicationFailed(took: started.duration(to: clock.now))
                    }
                }
            }
            var syncFailed = false
            if let sync {
                // Also after a failed publication: the directory is valid either way, and this
                // retries a sync that failed before. Its failures are logged by it.
                do {
                    let report = try await sync.sync()
                    if !report.anotherInstanceBusy { metrics?.syncSucceeded(at: Int64(Date().timeIntervalSince1970)) }
                } catch {
                    syncFailed = true
                    metrics?.syncFailed()
                }
            }
            var retryAt: C.Instant?
            if publicationFailed || syncFailed {
                let wait = backoff.next()
                logger.notice("\(publicationFailed ? "publication" : "object store sync") failed; trying again", metadata: [
                    "inSeconds": "\(wait.components.seconds)",
                ])
                retryAt = clock.now.advanced(by: wait)
            } else {
                backoff.reset()
            }
            // After the sync: a node told of a generation must find it wherever it downloads.
            await watch?.publishedDirectoryChanged()
            // A failed publication is retried as a publication, a due time like any other (the
            // spacing still bounds the batches it cuts). A failed sync alone is retried as a sync
            // only: it cuts nothing, so the spacing must not hold it back.
            if publicationFailed, let retryAt { nextDue = min(nextDue ?? retryAt, retryAt) }
            guard let wake = await waitForNextPublication(
                after: started, lastBatchCut: lastBatchCut, nextDue: nextDue, syncRetryAt: publicationFailed ? nil : retryAt,
                requestTaken: requestTaken)
            else { break }
            publishing = wake == .publication
            if case .syncRetry(let taken) = wake { requestTaken = taken } else { requestTaken = false }
        }
        await watch?.stop()
    }

    /// Waits until the interval has passed since `started`, until a demand is due, or until
    /// `nextDue` (held material becoming publishable, or a failed publication's retry) is, within
    /// the spacing; or, when `syncRetryAt` comes first, until then, for a sync alone. Nil when
    /// the server is stopping.
    private func waitForNextPublication(
        after started: C.Instant, lastBatchCut: C.Instant?, nextDue: C.Instant?,
        syncRetryAt: C.Instant?, requestTaken: Bool
    ) async -> ScheduledWake? {
        let scheduled = started.advanced(by: interval)
        // Uploads whose ids are not due yet publish nothing new; the second still keeps a
        // stream of them from running publications back to back.
        let earliest = max(lastBatchCut.map { $0.advanced(by: spacing) } ?? clock.now, started.advanced(by: Self.shortestGap))
        let wakeForDue = nextDue.map { min(max($0, earliest), scheduled) } ?? scheduled
        let syncOnly = syncRetryAt.map { $0 < wakeForDue } ?? false
        let wakeAt = syncOnly ? syncRetryAt! : wakeForDue
        let clock = clock
        let wake: ScheduledWake
        do {
            wake = try await cancelWhenGracefulShutdown { () async throws -> ScheduledWake in
                var requested = requestTaken
                if !requested {
                    if let demand {
                        await demand.wait(until: Deadline(wakeAt, on: clock))
                        try Task.checkCancellation()
                        requested = await demand.takeRequest()
                    } else {
                        try await clock.sleep(until: wakeAt, tolerance: nil)
                    }
                    guard requested else { return syncOnly ? .syncRetry(requestTaken: false) : .publication }
                }
                if earliest > clock.now {
                    // A sync retry due meanwhile goes first, keeping the request for after it.
                    if let syncRetryAt, syncRetryAt < min(earliest, scheduled) {
                        try await clock.sleep(until: syncRetryAt, tolerance: nil)
                        return .syncRetry(requestTaken: true)
                    }
                    logger.debug("publication requested; waiting for the spacing", metadata: [
                        "seconds": "\(clock.now.duration(to: earliest).components.seconds)",
                    ])
                    try await clock.sleep(until: min(earliest, scheduled), tolerance: nil)
                }
                return .publication
            }
        } catch {
            return nil
        }
        return Task.isShuttingDownGracefully || Task.isCancelled ? nil : wake
    }
}

extension PublishScheduler where C == ContinuousClock {
    /// The scheduler of `serve`, on the continuous clock.
    public init(
        publisher: any ScheduledPublishing, interval: Duration,
        spacing: Duration = .seconds(ServerConfiguration.shortestPublishIntervalSeconds),
        demand: PublicationDemand? = nil, watch: GenerationWatch? = nil, logger: Logger, sync: (any ScheduledSyncing)? = nil,
        retry: RetryBackoff = RetryBackoff()
    ) {
        self.init(
            publisher: publisher, interval: interval, spacing: spacing, demand: demand, watch: watch, logger: logger, sync: sync,
            retry: retry, clock: ContinuousClock())
    }
}

/// What a wait of the scheduler ends in.
enum ScheduledWake: Equatable {
    case publication
    /// Only a sync is due; `requestTaken` carries a publication request taken from the
    /// demand meanwhile, which the next wait honours at the spacing's end.
    case syncRetry(requestTaken: Bool)
}

/// One publication, as ``PublishScheduler`` runs it: ``Publisher`` in a server, a script in the
/// scheduler's tests. `PublishError.anotherInstancePublishing` is no failure.
public protocol ScheduledPublishing: Sendable {
    func publish() async throws -> PublishReport
}

extension Publisher: ScheduledPublishing {}

/// One mirroring of the published directory after a publication: ``ObjectStoreSync`` in a server.
public protocol ScheduledSyncing: Sendable {
    func sync() async throws -> SyncReport
}

extension ObjectStoreSync: ScheduledSyncing {}
