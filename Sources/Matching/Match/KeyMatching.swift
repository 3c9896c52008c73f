import Dispatch
import Foundation
import PositiveListFormat
import Synchronization
import TracerCore

/// How far past its nominal end a derived id's window may reach, from the largest rotation
/// jitter the authority accepts (docs/daily-keys.md, "Validity"): with jitter `j > 0` a window
/// `n` can last until `(n + 2) × I + j`; with no jitter it ends at `(n + 1) × I` exactly.
public struct DerivedWindowRule: Sendable, Hashable {
    public let maximumJitterSeconds: Int64

    public init(maximumJitterSeconds: Int64 = 0) {
        self.maximumJitterSeconds = max(0, maximumJitterSeconds)
    }

    /// The validity window of window `index` at `derivation`'s interval, before the matcher's
    /// clock-skew tolerance widens it on each side (the same tolerance id batches get).
    func window(of index: UInt32, derivation: IDDerivation) -> (from: UnixSeconds, until: UnixSeconds) {
        let start = derivation.nominalStart(ofWindowIndex: index)
        let interval = derivation.intervalSeconds
        let until = maximumJitterSeconds == 0
            ? start + interval
            : start + 2 * interval + maximumJitterSeconds
        return (start, until)
    }
}

extension PositiveListMatcher {
    /// The most keys per unit of work: large enough that handing out chunks costs nothing next to
    /// the AES work (4,096 keys × 96 ids), small enough that 2 workers stay balanced on a short list.
    public static let keysPerChunk = 4_096
    /// The fewest keys per unit of work (16 keys are still about 1,500 AES blocks).
    static let minimumKeysPerChunk = 16

    /// Keys per chunk for a batch of `keyCount` keys on `processors` processors: several chunks
    /// per worker even for a small batch. The server cuts a key batch an hour, so a node's list is
    /// hundreds of batches of a few hundred to a few thousand keys each; with a fixed 4,096-key
    /// chunk every one of them was one chunk, matched on one core.
    static func keysPerChunk(keyCount: Int, processors: Int) -> Int {
        max(minimumKeysPerChunk, min(keysPerChunk, keyCount / (max(1, processors) * 8)))
    }

    /// Matches published daily keys: for each key, derives the ids of its day's windows at its
    /// interval (`IDDerivation`, one AES-CTR pass per key) and probes each against the encounter
    /// table. A derived id counts only for an encounter inside that id's window (the replay rule
    /// of published ids, with the window computed from the key's day and interval), so a key's
    /// id replayed on another day, or an id of another interval's windows, never matches.
    ///
    /// The keys are split into chunks that the processors take in turn; each worker reuses one
    /// buffer of at most a day's ids (17,280 at 5-second windows), so memory is bounded by the
    /// encounters and the keys, never by the derived ids.
    public func match(keys: [DailyKeyRecord], windowRule: DerivedWindowRule = DerivedWindowRule()) -> MatchOutcome {
        guard !keys.isEmpty else { return MatchOutcome(matches: [], idsChecked: 0, idsSeenOutsideTheirWindow: 0) }
        return match(keys: keys, table: makeTable(), windowRule: windowRule)
    }

    func match(keys: [DailyKeyRecord], table: PeerIDTable, windowRule: DerivedWindowRule) -> MatchOutcome {
        match(keyCount: keys.count, record: { keys[$0] }, table: table, windowRule: windowRule)
    }

    /// The chunked, parallel loop: `record(position)` for positions `0..<keyCount`, each key's
    /// day of ids derived into a per-worker buffer and probed.
    private func match(
        keyCount: Int, record: @Sendable (Int) -> DailyKeyRecord, table: PeerIDTable, windowRule: DerivedWindowRule
    ) -> MatchOutcome {
        let processors = ProcessInfo.processInfo.activeProcessorCount
        let keysPerChunk = Self.keysPerChunk(keyCount: keyCount, processors: processors)
        let chunkCount = (keyCount + keysPerChunk - 1) / keysPerChunk
        let workers = max(1, min(chunkCount, processors))
        let nextChunk = Atomic<Int>(0)
        let results = Mutex<[MatchOutcome]>([])
        DispatchQueue.concurrentPerform(iterations: workers) { _ in
            var outcome = MatchOutcome(matches: [], idsChecked: 0, idsSeenOutsideTheirWindow: 0)
            // The most windows a day can have: 86,400 s at the shortest interval a
            // RotationSchedule accepts (5 s), plus one for a slot straddling midnight.
            let capacity = Int(UnixSeconds.secondsPerDay / 5) + 1
            let buffer = UnsafeMutableBufferPointer<UserID>.allocate(capacity: capacity)
            buffer.initialize(repeating: UserID(rawValue: 0))
            defer { buffer.deallocate() }
            while true {
                let chunk = nextChunk.add(1, ordering: .relaxed).oldValue
                guard chunk < chunkCount else { break }
                for position in (chunk * keysPerChunk)..<min(keyCount, (chunk + 1) * keysPerChunk) {
                    probe(record(position), buffer: buffer, table: table, windowRule: windowRule, into: &outcome)
                }
            }
            results.withLock { $0.append(outcome) }
        }
        var total = MatchOutcome(matches: [], idsChecked: 0, idsSeenOutsideTheirWindow: 0)
        for outcome in results.withLock({ $0 }) {
            total.matches += outcome.matches
            total.idsChecked += outcome.idsChecked
            total.idsSeenOutsideTheirWindow += outcome.idsSeenOutsideTheirWindow
            total.keysChecked += outcome.keysChecked
        }
        return total
    }

    /// The hot loop of key matching: derive a day's ids into `buffer`, one table probe each.
    private func probe(
        _ record: DailyKeyRecord, buffer: UnsafeMutableBufferPointer<UserID>, table: PeerIDTable,
        windowRule: DerivedWindowRule, into outcome: inout MatchOutcome
    ) {
        // A log entry is verified on download, intervals included; an interval the node cannot
        // derive for is skipped rather than trusted.
        guard let derivation = try? IDDerivation(intervalSeconds: record.intervalSeconds) else { return }
        let indices = derivation.windowIndices(of: record.day)
        guard !indices.isEmpty, indices.count <= buffer.count else { return }
        derivation.ids(key: record.key, windowIndices: indices, into: buffer)
        outcome.keysChecked += 1
        outcome.idsChecked += indices.count
        for offset in 0..<indices.count {
            let id = buffer[offset]
            guard let first = table.value(for: id.rawValue) else { continue }
            let index = indices.lowerBound + UInt32(offset)
            let window = windowRule.window(of: index, derivation: derivation)
            let entry = PositiveListEntry(id: id, validFrom: window.from, validUntil: window.until)
            self.record(entry, firstEncounter: Int(first), into: &outcome)
        }
    }
}
