import Foundation
import Logging
import ServerStorage
import ServiceLifecycle

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
public struct PublishScheduler: Service {
    let publisher: Publisher
    let interval: Duration
    let spacing: Duration
    let demand: PublicationDemand?
    let watch: GenerationWatch?
    let logger: Logger
    let sync: ObjectStoreSync?
    let retry: RetryBackoff
    /// Records each publication's report and each sync's outcome (the metrics listener's).
    var metrics: ServerMetrics?

    public init(
        publisher: Publisher, interval: Duration, spacing: Duration = .seconds(ServerConfiguration.shortestPublishIntervalSeconds),
        demand: PublicationDemand? = nil, watch: GenerationWatch? = nil, logger: Logger, sync: ObjectStoreSync? = nil,
        retry: RetryBackoff = RetryBackoff()
    ) {
        self.retry = retry
        self.publisher = publisher
        self.interval = interval
        self.spacing = spacing
        self.demand = demand
        self.watch = watch
        self.logger = logger
        self.sync = sync
    }

    static let shortestGap: Duration = .seconds(1)

    public func run() async throws {
        var lastBatchCut: ContinuousClock.Instant?
        var backoff = retry
        var started = ContinuousClock.now
        var nextDue: ContinuousClock.Instant?
        var publishing = true
        var requestTaken = false
        while !Task.isShuttingDownGracefully && !Task.isCancelled {
            var publicationFailed = false
            if publishing {
                started = .now
                nextDue = nil
                do {
                    let report = try await publisher.publish()
                    metrics?.publicationSucceeded(report, took: .now - started)
                    if sync != nil { metrics?.publishedForSync(at: report.publishedAt) }
                    if report.newBatch != nil || report.newKeyBatch != nil { lastBatchCut = started }
                    // Measured from after the publication, whose wall time `publishedAt` was read
                    // before it: the wake-up can only come late by the publication's length, never
                    // early (an early one would publish nothing and wait again).
                    nextDue = report.nextDueAt.map { .now + .seconds(max($0 - report.publishedAt, 0)) }
                } catch {
                    // Logged by the publisher; the published directory still holds the previous,
                    // valid index, and the retry below publishes what this one could not. Another
                    // instance publishing is no failure: it publishes what is due.
                    if case PublishError.anotherInstancePublishing = error {} else {
                        publicationFailed = true
                        metrics?.publicationFailed(took: .now - started)
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
            var retryAt: ContinuousClock.Instant?
            if publicationFailed || syncFailed {
                let wait = backoff.next()
                logger.notice("\(publicationFailed ? "publication" : "object store sync") failed; trying again", metadata: [
                    "inSeconds": "\(wait.components.seconds)",
                ])
                retryAt = .now + wait
            } else {
                backoff.reset()
            }
            // After the sync: a node told of a generation must find it wherever it downloads.
            await watch?.publishedDirectoryChanged()
            // A failed publication is retried as a publication, a due time like any other (the
            // spacing still bounds the batches it cuts). A failed sync alone is retried as a sync
            // only: it cuts nothing, so the spacing, up to 30 minutes, must not hold it back.
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

    enum Wake: Equatable {
        case publication
        /// Only a sync is due; `requestTaken` carries a publication request taken from the
        /// demand meanwhile, which the next wait honours at the spacing's end.
        case syncRetry(requestTaken: Bool)
    }

    /// Waits until the interval has passed since `started`, until a demand is due, or until
    /// `nextDue` (held material becoming publishable, or a failed publication's retry) is, within
    /// the spacing; or, when `syncRetryAt` comes first, until then, for a sync alone. Nil when
    /// the server is stopping.
    private func waitForNextPublication(
        after started: ContinuousClock.Instant, lastBatchCut: ContinuousClock.Instant?, nextDue: ContinuousClock.Instant?,
        syncRetryAt: ContinuousClock.Instant?, requestTaken: Bool
    ) async -> Wake? {
        let scheduled = started + interval
        // Uploads whose ids are not due yet publish nothing new; the second still keeps a
        // stream of them from running publications back to back.
        let earliest = max(lastBatchCut.map { $0 + spacing } ?? .now, started + Self.shortestGap)
        let wakeForDue = nextDue.map { min(max($0, earliest), scheduled) } ?? scheduled
        let syncOnly = syncRetryAt.map { $0 < wakeForDue } ?? false
        let wakeAt = syncOnly ? syncRetryAt! : wakeForDue
        let wake: Wake
        do {
            wake = try await cancelWhenGracefulShutdown { () async throws -> Wake in
                var requested = requestTaken
                if !requested {
                    if let demand {
                        await demand.wait(until: wakeAt)
                        try Task.checkCancellation()
                        requested = await demand.takeRequest()
                    } else {
                        try await Task.sleep(until: wakeAt, clock: .continuous)
                    }
                    guard requested else { return syncOnly ? .syncRetry(requestTaken: false) : .publication }
                }
                if earliest > .now {
                    // A sync retry due meanwhile goes first, keeping the request for after it.
                    if let syncRetryAt, syncRetryAt < min(earliest, scheduled) {
                        try await Task.sleep(until: syncRetryAt, clock: .continuous)
                        return .syncRetry(requestTaken: true)
                    }
                    logger.debug("publication requested; waiting for the spacing", metadata: [
                        "seconds": "\((earliest - .now).components.seconds)",
                    ])
                    try await Task.sleep(until: min(earliest, scheduled), clock: .continuous)
                }
                return .publication
            }
        } catch {
            return nil
        }
        return Task.isShuttingDownGracefully || Task.isCancelled ? nil : wake
    }
}
