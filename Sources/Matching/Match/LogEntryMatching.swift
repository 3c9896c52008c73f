import Dispatch
import Foundation
import PositiveListFormat
import Synchronization
import TracerCore

/// What matching a list log's entries found, with what the report says about the list.
public struct LogMatchOutcome: Sendable {
    public var outcome: MatchOutcome
    /// Distinct id batches and key batches the entries came from.
    public var idBatches: Int
    public var keyBatches: Int
    /// Entries the log's signature covers but that do not parse as list entries (a server
    /// writing a newer format, or a bug on the authority's side); they are skipped and counted.
    public var unreadableEntries: Int
}

extension PositiveListMatcher {
    /// Keys expanded per round: four chunks of `keysPerChunk`, enough for every processor of a
    /// small node to take several, few enough that the decoded records (a heap-allocated key
    /// each, about 100 bytes with its record) stay near 1.6 MB whatever the log's size.
    static let keysPerLogRound = 4 * keysPerChunk

    /// Matches the entries a node holds of a list log (ListLogEntry bytes, checked against the
    /// signed tree when they were downloaded), read from their file a chunk at a time: memory is
    /// the encounter table and one chunk, whatever the list's size. The id entries of a chunk are
    /// checked and probed on every processor; keys are expanded in rounds of `keysPerLogRound`.
    /// A part of a batch seen twice with the same bytes (the log is append-only, and a server
    /// recovering from a crash appends a batch only once, but a node must not count one
    /// encounter twice because of it) is matched once.
    public func match(
        heldEntries held: HeldLogEntries, windowRule: DerivedWindowRule = DerivedWindowRule(),
        chunkByteCount: Int = HeldLogEntries.defaultChunkByteCount
    ) throws(FollowedLogStoreError) -> LogMatchOutcome {
        var matching = LogEntryMatching(matcher: self, windowRule: windowRule)
        var failure: FollowedLogStoreError?
        try held.forEachChunk(chunkByteCount: chunkByteCount) { chunk in
            do throws(FollowedLogStoreError) {
                try matching.add(chunk) { (offset, length) throws(FollowedLogStoreError) in try held.entry(atFileOffset: offset, length: length) }
                return true
            } catch {
                failure = error
                return false
            }
        }
        if let failure { throw failure }
        return matching.finish()
    }

    /// The same for entries in memory (a small log, tests).
    public func match(logEntries entries: [Data], windowRule: DerivedWindowRule = DerivedWindowRule()) -> LogMatchOutcome {
        var bytes: [UInt8] = []
        var ranges: [Range<Int>] = []
        for entry in entries {
            ranges.append(bytes.count..<(bytes.count + entry.count))
            bytes += entry
        }
        var matching = LogEntryMatching(matcher: self, windowRule: windowRule)
        bytes.withUnsafeBytes { buffer in
            let chunk = LogEntryChunk(bytes: buffer, ranges: ranges, fileOffset: 0, firstPosition: 0)
            // Every entry is in the one chunk, so no entry is read again from elsewhere.
            try? matching.add(chunk) { (offset, length) throws(FollowedLogStoreError) in Array(buffer[offset..<(offset + length)]) }
        }
        return matching.finish()
    }
}

/// One pass of matching over a log's entries, fed chunk by chunk in log order.
struct LogEntryMatching {
    let matcher: PositiveListMatcher
    let windowRule: DerivedWindowRule
    let table: PeerIDTable

    private struct Part: Hashable {
        var kind: ListLogEntry.Kind
        var batch: UInt64
        var part: UInt16
    }

    /// Where each part's first bytes are in the file, to tell a repeat from a different entry
    /// under the same numbers without keeping every entry's bytes.
    private var firstSeen: [Part: (offset: Int, length: Int)] = [:]
    private var keys: [DailyKeyRecord] = []
    private var idBatches = Set<UInt64>()
    private var keyBatches = Set<UInt64>()
    private var unreadable = 0
    private var total = MatchOutcome(matches: [], idsChecked: 0, idsSeenOutsideTheirWindow: 0)

    init(matcher: PositiveListMatcher, windowRule: DerivedWindowRule) {
        self.matcher = matcher
        self.windowRule = windowRule
        table = matcher.makeTable()
    }

    /// Matches the entries of `chunk`; `reread(offset, length)` reads an earlier entry again.
    /// The id entries are checked and probed on every processor first; which of them count is
    /// then decided in log order, as for the keys, so that only an entry that decodes can be the
    /// first copy a later repeat is compared with.
    mutating func add(
        _ chunk: LogEntryChunk, reread: (Int, Int) throws(FollowedLogStoreError) -> [UInt8]
    ) throws(FollowedLogStoreError) {
        var headers: [ListLogEntry.Header?] = []
        var idIndices: [Int] = []
        for index in chunk.ranges.indices {
            let header = try? ListLogEntry.header(of: chunk[index])
            headers.append(header)
            if header?.kind == .ids { idIndices.append(index) }
        }
        var idOutcomes = Dictionary(uniqueKeysWithValues: zip(idIndices, matchIDEntries(idIndices, of: chunk)))
        for index in chunk.ranges.indices {
            guard let header = headers[index] else {
                unreadable += 1
                continue
            }
            let bytes = chunk[index]
            switch header.kind {
            case .ids:
                guard let outcome = idOutcomes.removeValue(forKey: index) ?? nil else {
                    unreadable += 1
                    continue
                }
                guard try isFirstCopy(header, at: index, of: chunk, reread: reread) else { continue }
                idBatches.insert(header.batchNumber)
                add(outcome)
            case .keys:
                guard let entry = try? ListLogEntry(decoding: Array(bytes)), case .keys(let records) = entry.payload else {
                    unreadable += 1
                    continue
                }
                guard try isFirstCopy(header, at: index, of: chunk, reread: reread) else { continue }
                keyBatches.insert(header.batchNumber)
                keys += records
                // Within the chunk: a chunk of hourly key batches holds about 250,000 keys, 25 MB
                // decoded.
                if keys.count >= PositiveListMatcher.keysPerLogRound { matchKeys() }
            }
        }
    }

    /// False for a repeat of the same bytes as the first decodable entry under the same numbers,
    /// which is skipped; true (and remembered, when it is the first) otherwise: a different entry
    /// under the same numbers (a server's bug) is matched too, since skipping it could hide an
    /// exposure.
    private mutating func isFirstCopy(
        _ header: ListLogEntry.Header, at index: Int, of chunk: LogEntryChunk, reread: (Int, Int) throws(FollowedLogStoreError) -> [UInt8]
    ) throws(FollowedLogStoreError) -> Bool {
        let part = Part(kind: header.kind, batch: header.batchNumber, part: header.part)
        let bytes = chunk[index]
        guard let first = firstSeen[part] else {
            firstSeen[part] = (chunk.fileOffset(of: index), bytes.count)
            return true
        }
        guard first.length == bytes.count else { return true }
        let start = first.offset - chunk.fileOffset
        let firstBytes = start >= 0 ? Array(chunk.bytes[start..<(start + first.length)]) : try reread(first.offset, first.length)
        return !firstBytes.elementsEqual(bytes)
    }

    func finish() -> LogMatchOutcome {
        var finished = self
        finished.matchKeys()
        return LogMatchOutcome(outcome: finished.total, idBatches: idBatches.count, keyBatches: keyBatches.count, unreadableEntries: unreadable)
    }

    /// Checks and probes the id entries at `indices` of `chunk`, an entry per processor at a
    /// time; nil for an entry that does not decode (none of its ids count then).
    private func matchIDEntries(_ indices: [Int], of chunk: LogEntryChunk) -> [MatchOutcome?] {
        guard !indices.isEmpty else { return [] }
        let workers = max(1, min(indices.count, ProcessInfo.processInfo.activeProcessorCount))
        let next = Atomic<Int>(0)
        let results = Mutex<[MatchOutcome?]>(Array(repeating: nil, count: indices.count))
        // Read-only for the workers and valid until this returns: concurrentPerform waits for
        // them, and the buffer's owner (`HeldLogEntries.forEachChunk`) refills it only after the
        // chunk's `body` has returned.
        nonisolated(unsafe) let bytes = chunk.bytes
        let ranges = chunk.ranges
        DispatchQueue.concurrentPerform(iterations: workers) { _ in
            while true {
                let position = next.add(1, ordering: .relaxed).oldValue
                guard position < indices.count else { break }
                let entry = UnsafeRawBufferPointer(rebasing: bytes[ranges[indices[position]]])
                guard let records = try? ListLogEntry.idRecords(of: entry) else { continue }
                let outcome = probe(records)
                results.withLock { $0[position] = outcome }
            }
        }
        return results.withLock { $0 }
    }

    /// The hot loop: one table probe per listed id, nearly all of them ids the node never met.
    private func probe(_ records: UnsafeRawBufferPointer) -> MatchOutcome {
        let stride = 16
        var outcome = MatchOutcome(matches: [], idsChecked: records.count / stride, idsSeenOutsideTheirWindow: 0)
        var offset = 0
        while offset + stride <= records.count {
            let id = UInt64(bigEndian: records.loadUnaligned(fromByteOffset: offset, as: UInt64.self))
            if let first = table.value(for: id) {
                let entry = PositiveListEntry(
                    id: UserID(rawValue: id),
                    validFrom: UnixSeconds(UInt32(bigEndian: records.loadUnaligned(fromByteOffset: offset + 8, as: UInt32.self))),
                    validUntil: UnixSeconds(UInt32(bigEndian: records.loadUnaligned(fromByteOffset: offset + 12, as: UInt32.self))))
                matcher.record(entry, firstEncounter: Int(first), into: &outcome)
            }
            offset += stride
        }
        return outcome
    }

    private mutating func matchKeys() {
        guard !keys.isEmpty else { return }
        add(matcher.match(keys: keys, table: table, windowRule: windowRule))
        keys.removeAll(keepingCapacity: true)
    }

    private mutating func add(_ outcome: MatchOutcome) {
        total.matches += outcome.matches
        total.idsChecked += outcome.idsChecked
        total.idsSeenOutsideTheirWindow += outcome.idsSeenOutsideTheirWindow
        total.keysChecked += outcome.keysChecked
    }
}
