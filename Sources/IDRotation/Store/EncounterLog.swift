import Logging

/// Collects sightings in memory and writes them to the store at most `flushInterval` apart.
///
/// Batching is what lets one core log tens of thousands of sightings a second; the price, a
/// crash losing at most the last unflushed batch, is bounded by the flush interval (1 s).
public actor EncounterLog {
    public static let defaultFlushInterval: Duration = .seconds(1)
    /// A crowd large enough to fill this many pending rows is flushed early to bound memory.
    public static let defaultMaxPendingRows = 10_000

    private let store: NodeStore
    private let maxPendingRows: Int
    private let logger: Logger
    private var batch = SightingBatch()
    private var lastFailure: StoreError?
    /// The place in force, read at each sighting; it must answer at once (the exchange waits).
    private let placeInForce: @Sendable () -> Place?
    /// Each change of whether the log can write: the error when writes start failing (the
    /// sightings stay in memory), nil when a write succeeds again. For the node's status.
    public nonisolated let writeFailures: AsyncStream<StoreError?>
    private let writeFailuresContinuation: AsyncStream<StoreError?>.Continuation

    public init(store: NodeStore, maxPendingRows: Int = EncounterLog.defaultMaxPendingRows,
                logger: Logger = Logger(label: "tracer.encounters"),
                placeInForce: @escaping @Sendable () -> Place? = { nil }) {
        self.store = store
        self.placeInForce = placeInForce
        self.maxPendingRows = maxPendingRows
        self.logger = logger
        (writeFailures, writeFailuresContinuation) = AsyncStream.makeStream(of: StoreError?.self, bufferingPolicy: .bufferingNewest(8))
    }

    deinit { writeFailuresContinuation.finish() }

    public func record(_ sighting: Sighting) {
        var sighting = sighting
        if sighting.place == nil { sighting.place = placeInForce() }
        batch.add(sighting)
        if batch.rowCount >= maxPendingRows { try? flush() }
    }

    /// Writes everything pending. On failure the batch is kept and retried on the next flush,
    /// so a full disk or a lock delays data rather than losing it.
    public func flush() throws(StoreError) {
        guard !batch.isEmpty else { return }
        do {
            try store.write(batch)
            batch = SightingBatch()
            if lastFailure != nil {
                logger.info("encounter log writes again")
                lastFailure = nil
                writeFailuresContinuation.yield(nil)
            }
        } catch {
            if lastFailure == nil {
                logger.error("cannot write encounters; keeping them in memory", metadata: ["error": "\(error)"])
            }
            if lastFailure != error { writeFailuresContinuation.yield(error) }
            lastFailure = error
            throw error
        }
    }

    public var pendingSightings: Int { batch.sightingCount }

    /// Flushes every `interval` until cancelled, then flushes once more.
    public func runPeriodicFlush(every interval: Duration = EncounterLog.defaultFlushInterval) async {
        while !Task.isCancelled {
            try? await Task.sleep(for: interval)
            try? flush()
        }
        do {
            try flush()
        } catch {
            // Said once more at the end: these sightings go with the process.
            logger.error("stopping with encounters that could not be written; they are lost", metadata: [
                "sightings": "\(batch.sightingCount)", "error": "\(error)",
            ])
        }
    }
}
