import Foundation
import IDRotation
import PositiveListFormat
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

/// Matches the list's published ids and keys against the node's logged encounters, locally.
///
/// The encounters go into a `PeerIDTable` that every listed id is probed against, so memory
/// stays bounded by the encounters. A listed id counts only if the encounter's time overlaps
/// the id's validity window widened by `clockSkewTolerance` on each side: an id captured and
/// replayed later by someone else does not match.
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

    /// Matches entries already in memory (a log's id entries, tests).
    public func match(_ entries: [PositiveListEntry]) -> MatchOutcome {
        match(entries, table: makeTable())
    }

    /// `entries` against a table made once for many calls (one per log entry).
    func match(_ entries: [PositiveListEntry], table: PeerIDTable) -> MatchOutcome {
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
