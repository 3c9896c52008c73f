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
    /// Where the batch goes when the node stops with a store that refuses writes; nil: nowhere.
    private let spill: EncounterSpill?
    /// The spills whose sightings the batch holds too (taken back at start, or kept at a stop
    /// the process outlived): removed once they are in the store, so none is written twice.
    private var spillHeld: [StoreLocation] = []
    /// The place in force, read at each sighting; it must answer at once (the exchange waits).
    private let placeInForce: @Sendable () -> Place?
    /// Each change of whether the log can write: the error when writes start failing (the
    /// sightings stay in memory), nil when a write succeeds again. For the node's status.
    public nonisolated let writeFailures: AsyncStream<StoreError?>
    private let writeFailuresContinuation: AsyncStream<StoreError?>.Continuation

    public init(store: NodeStore, maxPendingRows: Int = EncounterLog.defaultMaxPendingRows,
                logger: Logger = Logger(label: "tracer.encounters"),
                spill: EncounterSpill? = nil,
                placeInForce: @escaping @Sendable () -> Place? = { nil }) {
        self.store = store
        self.spill = spill
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
            if !spillHeld.isEmpty { discardSpill() }
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

    /// Takes back what the spill kept when the node last stopped, then flushes every `interval`
    /// until cancelled, then flushes once more; what the store still refuses then goes to the
    /// spill.
    public func runPeriodicFlush(every interval: Duration = EncounterLog.defaultFlushInterval) async {
        takeBackSpill()
        try? flush()
        while !Task.isCancelled {
            try? await Task.sleep(for: interval)
            try? flush()
        }
        do {
            try flush()
        } catch {
            keepInSpill(refused: error)
        }
    }

    /// The sightings a spill kept, added to the batch: the next flush writes them.
    private func takeBackSpill() {
        guard let spill, let taken = spill.take() else { return }
        for (location, error) in taken.unreadable {
            // Left where it is, never overwritten: for a later version to read, or `tracer forget`.
            logger.error("cannot read the encounters kept when the node last stopped; they stay there", metadata: [
                "kept": "\(location.path)", "error": "\(error)",
            ])
        }
        guard !taken.from.isEmpty else { return }
        // The kept encounters are the older observations: what was recorded since folds into them.
        var merged = taken.batch
        for encounter in batch.pending.values { merged.add(encounter) }
        batch = merged
        spillHeld = taken.from
        logger.notice("writing the encounters kept when the node last stopped with a store that refused writes", metadata: [
            "sightings": "\(taken.batch.sightingCount)", "kept": "\(taken.from.map(\.path).joined(separator: ", "))",
        ])
    }

    private func keepInSpill(refused error: StoreError) {
        let sightings = "\(batch.sightingCount)"
        guard let spill else {
            logger.error("stopping with encounters that could not be written; they are lost", metadata: ["sightings": "\(sightings)", "error": "\(error)"])
            return
        }
        do throws(StoreError) {
            let kept = try spill.keep(batch, replacing: spillHeld)
            spillHeld = [kept]
            logger.error("stopping with encounters the store refused; kept in memory for the node's next start to write (lost if the machine restarts first)", metadata: [
                "sightings": "\(sightings)", "kept": "\(kept.path)", "error": "\(error)",
            ])
        } catch let spillError {
            logger.error("stopping with encounters that could not be written; they are lost", metadata: [
                "sightings": "\(sightings)", "error": "\(error)", "spill": "\(spillError)",
            ])
        }
    }

    private func discardSpill() {
        do throws(StoreError) {
            try spill?.discard(spillHeld)
            spillHeld = []
        } catch {
            logger.error("cannot remove the encounters kept at the last stop, now written; remove the file by hand or the next start writes them again", metadata: ["error": "\(error)"])
        }
    }
}
