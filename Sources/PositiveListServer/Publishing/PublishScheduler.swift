import Logging
import ServiceLifecycle

/// The one owner of publication in a running server. Publishes once at start (which also
/// repairs whatever a crash interrupted), then every interval, soon after a ``demand``
/// (an accepted upload), and when held material becomes due (each publication reports when the
/// next held id or key may be published): at once when the last publication that cut a batch
/// is at least `spacing` ago, else when it will be. The spacing bounds how many batches a flood of uploads
/// can cut (nodes accept at most 29 days of batches cut every 5 minutes) and how often nodes
/// fetch a new index. A publication in progress finishes before graceful shutdown. With
/// `sync`, mirrors the directory to the object store after each publication; with `watch`,
/// tells long-polling nodes of each new index generation.
public struct PublishScheduler: Service {
    let publisher: Publisher
    let interval: Duration
    let spacing: Duration
    let demand: PublicationDemand?
    let watch: GenerationWatch?
    let logger: Logger
    let sync: ObjectStoreSync?

    public init(
        publisher: Publisher, interval: Duration, spacing: Duration = .seconds(ServerConfiguration.shortestPublishIntervalSeconds),
        demand: PublicationDemand? = nil, watch: GenerationWatch? = nil, logger: Logger, sync: ObjectStoreSync? = nil
    ) {
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
        while !Task.isShuttingDownGracefully && !Task.isCancelled {
            let started = ContinuousClock.now
            var nextDue: ContinuousClock.Instant?
            do {
                let report = try await publisher.publish()
                if report.newBatch != nil || report.newKeyBatch != nil { lastBatchCut = started }
                // Measured from after the publication, whose wall time `publishedAt` was read
                // before it: the wake-up can only come late by the publication's length, never
                // early (an early one would publish nothing and wait again).
                nextDue = report.nextDueAt.map { .now + .seconds(max($0 - report.publishedAt, 0)) }
            } catch {
                // Logged by the publisher; the next tick retries, and the published directory
                // still holds the previous, valid index.
            }
            if let sync {
                // Also after a failed publication: the directory is valid either way, and this
                // retries a sync that failed on the previous tick. Its failures are logged by it.
                _ = try? await sync.sync()
            }
            // After the sync: a node told of a generation must find it wherever it downloads.
            await watch?.publishedDirectoryChanged()
            guard await waitForNextPublication(after: started, lastBatchCut: lastBatchCut, nextDue: nextDue) else { break }
        }
        await watch?.stop()
    }

    /// Waits until the interval has passed since `started`, until a demand is due, or until
    /// `nextDue` (held material becoming publishable) is, within the spacing; false when the
    /// server is stopping.
    private func waitForNextPublication(
        after started: ContinuousClock.Instant, lastBatchCut: ContinuousClock.Instant?, nextDue: ContinuousClock.Instant?
    ) async -> Bool {
        let scheduled = started + interval
        // Uploads whose ids are not due yet publish nothing new; the second still keeps a
        // stream of them from running publications back to back.
        let earliest = max(lastBatchCut.map { $0 + spacing } ?? .now, started + Self.shortestGap)
        let wakeForDue = nextDue.map { min(max($0, earliest), scheduled) } ?? scheduled
        do {
            try await cancelWhenGracefulShutdown {
                guard let demand else { return try await Task.sleep(until: wakeForDue, clock: .continuous) }
                await demand.wait(until: wakeForDue)
                try Task.checkCancellation()
                guard await demand.takeRequest() else { return }
                if earliest > .now {
                    logger.debug("publication requested; waiting for the spacing", metadata: [
                        "seconds": "\((earliest - .now).components.seconds)",
                    ])
                    try await Task.sleep(until: min(earliest, scheduled), clock: .continuous)
                }
            }
        } catch {
            return false
        }
        return !Task.isShuttingDownGracefully && !Task.isCancelled
    }
}
