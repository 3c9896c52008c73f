import Dispatch
import Foundation
import IDRotation
import PositiveListFormat
import Synchronization
import TracerCore

/// A listed id that this node met while the id was valid.
public struct ExposureMatch: Sendable, Hashable {
    public let encounter: Encounter
    public let listed: PositiveListEntry

    public init(encounter: Encounter, listed: PositiveListEntry) {
        self.encounter = encounter
        self.listed = listed
    }
}

/// An encounter whose times fit a listed id's window; the caller reads the rest of its row.
public struct TimedMatch: Sendable, Hashable {
    public let times: EncounterTimes
    public let listed: PositiveListEntry
}

public struct MatchOutcome: Sendable {
    public var matches: [TimedMatch]
    /// Listed ids probed against the node's encounters.
    public var idsChecked: Int
    /// Listed ids that the node met, but outside their validity window (replays, or clocks far
    /// apart); never counted as exposure.
    public var idsSeenOutsideTheirWindow: Int
    /// Published daily keys expanded into ids (those ids are counted in `idsChecked` too).
    public var keysChecked: Int = 0
}

/// Matches published batches against the node's logged encounters, locally.
///
/// The encounters go into a `PeerIDTable`; the batches are streamed through it, so memory stays
/// bounded by the encounters, not by the list. A listed id counts only if the encounter's time
/// overlaps the id's validity window widened by `clockSkewTolerance` on each side: an id
/// captured and replayed later by someone else does not match.
public struct PositiveListMatcher: Sendable {
    public static let defaultClockSkewTolerance: UnixSeconds = 300

    /// Encounter times sorted by peer id, so that one table value (the first index) reaches every
    /// encounter with that id.
    let encounters: [EncounterTimes]
    let clockSkewTolerance: UnixSeconds

    public init(encounters: [EncounterTimes], clockSkewTolerance: UnixSeconds = Self.defaultClockSkewTolerance) {
        self.encounters = encounters.sorted { ($0.peer, $0.firstSeen) < ($1.peer, $1.firstSeen) }
        self.clockSkewTolerance = clockSkewTolerance
    }

    public var encounterCount: Int { encounters.count }

    /// Streams each batch file (verified when it entered the cache) through the table, one batch
    /// per processor at a time: batches are independent and the table is only read.
    public func match(_ batches: [CachedBatch]) throws(MatchingError) -> MatchOutcome {
        let table = makeTable()
        let workers = max(1, min(batches.count, ProcessInfo.processInfo.activeProcessorCount))
        let nextBatch = Atomic<Int>(0)
        let results = Mutex<[Result<MatchOutcome, MatchingError>]>([])
        DispatchQueue.concurrentPerform(iterations: workers) { _ in
            var outcome = MatchOutcome(matches: [], idsChecked: 0, idsSeenOutsideTheirWindow: 0)
            while true {
                let index = nextBatch.add(1, ordering: .relaxed).oldValue
                guard index < batches.count else { break }
                let batch = batches[index]
                do throws(MatchingError) {
                    try BatchFileReader(path: batch.path, expectedNumber: batch.number).forEachChunk { chunk in
                        outcome.idsChecked += chunk.count / PositiveListBatch.entryByteCount
                        probe(chunk, in: table, into: &outcome)
                    }
                } catch {
                    // Stop the other workers too: a partial result must not be mistaken for a whole one.
                    nextBatch.store(batches.count, ordering: .relaxed)
                    results.withLock { $0.append(.failure(error)) }
                    return
                }
            }
            results.withLock { $0.append(.success(outcome)) }
        }
        var total = MatchOutcome(matches: [], idsChecked: 0, idsSeenOutsideTheirWindow: 0)
        for result in results.withLock({ $0 }) {
            let outcome = try result.get()
            total.matches += outcome.matches
            total.idsChecked += outcome.idsChecked
            total.idsSeenOutsideTheirWindow += outcome.idsSeenOutsideTheirWindow
        }
        return total
    }

    /// Matches entries already in memory (a downloaded batch, tests).
    public func match(_ entries: [PositiveListEntry]) -> MatchOutcome {
        let table = makeTable()
        var outcome = MatchOutcome(matches: [], idsChecked: entries.count, idsSeenOutsideTheirWindow: 0)
        for entry in entries {
            if let first = table.value(for: entry.id.rawValue) {
                record(entry, firstEncounter: Int(first), into: &outcome)
            }
        }
        return outcome
    }

    func makeTable() -> PeerIDTable {
        var pairs: [(id: UInt64, value: UInt32)] = []
        pairs.reserveCapacity(encounters.count)
        for (index, encounter) in encounters.enumerated() where index == 0 || encounters[index - 1].peer != encounter.peer {
            pairs.append((encounter.peer.rawValue, UInt32(index)))
        }
        return PeerIDTable(pairs)
    }

    /// The hot loop: one filter load per listed id we never met, which is nearly all of them.
    private func probe(_ chunk: UnsafeRawBufferPointer, in table: PeerIDTable, into outcome: inout MatchOutcome) {
        let stride = PositiveListBatch.entryByteCount
        var offset = 0
        while offset + stride <= chunk.count {
            let id = UInt64(bigEndian: chunk.loadUnaligned(fromByteOffset: offset, as: UInt64.self))
            if let first = table.value(for: id) {
                let entry = PositiveListEntry(
                    id: UserID(rawValue: id),
                    validFrom: UnixSeconds(UInt32(bigEndian: chunk.loadUnaligned(fromByteOffset: offset + 8, as: UInt32.self))),
                    validUntil: UnixSeconds(UInt32(bigEndian: chunk.loadUnaligned(fromByteOffset: offset + 12, as: UInt32.self))))
                record(entry, firstEncounter: Int(first), into: &outcome)
            }
            offset += stride
        }
    }

    func record(_ entry: PositiveListEntry, firstEncounter: Int, into outcome: inout MatchOutcome) {
        var index = firstEncounter
        var matchedAny = false
        while index < encounters.count, encounters[index].peer == entry.id {
            let encounter = encounters[index]
            if encounter.lastSeen >= entry.validFrom - clockSkewTolerance
                && encounter.firstSeen <= entry.validUntil + clockSkewTolerance
            {
                outcome.matches.append(TimedMatch(times: encounter, listed: entry))
                matchedAny = true
            }
            index += 1
        }
        if !matchedAny { outcome.idsSeenOutsideTheirWindow += 1 }
    }
}

/// A batch file in the node's cache, verified when it was downloaded.
public struct CachedBatch: Sendable, Hashable {
    public let number: UInt64
    public let path: String

    public init(number: UInt64, path: String) {
        self.number = number
        self.path = path
    }
}
