import Foundation
import PositiveListFormat
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

    /// Matches the entries of a list log (ListLogEntry bytes, checked against the signed tree
    /// when they were downloaded). The ids of every entry are matched as an id batch's are; the
    /// keys are expanded in rounds of `keysPerLogRound`, with one encounter table for all.
    /// A part of a batch seen twice with the same bytes (the log is append-only, and a server
    /// recovering from a crash appends a batch only once, but a node must not count one
    /// encounter twice because of it) is matched once.
    public func match(logEntries entries: [Data], windowRule: DerivedWindowRule = DerivedWindowRule()) -> LogMatchOutcome {
        struct Part: Hashable {
            var kind: ListLogEntry.Kind
            var batch: UInt64
            var part: UInt16
        }
        var seen: [Part: Data] = [:]
        var keys: [DailyKeyRecord] = []
        var idBatches = Set<UInt64>()
        var keyBatches = Set<UInt64>()
        var unreadable = 0
        var total = MatchOutcome(matches: [], idsChecked: 0, idsSeenOutsideTheirWindow: 0)
        let table = makeTable()
        func add(_ outcome: MatchOutcome) {
            total.matches += outcome.matches
            total.idsChecked += outcome.idsChecked
            total.idsSeenOutsideTheirWindow += outcome.idsSeenOutsideTheirWindow
            total.keysChecked += outcome.keysChecked
        }
        for bytes in entries {
            guard let entry = try? ListLogEntry(decoding: [UInt8](bytes)) else {
                unreadable += 1
                continue
            }
            // A repeat of the same bytes is skipped; a different entry under the same numbers (a
            // server's bug) is matched too, since skipping it could hide an exposure.
            let part = Part(kind: entry.kind, batch: entry.batchNumber, part: entry.part)
            if let first = seen[part], first == bytes { continue }
            if seen[part] == nil { seen[part] = bytes }
            switch entry.payload {
            case .ids(let listed):
                // Matched entry by entry: gathered first, the ids of a national list would take
                // hundreds of megabytes.
                idBatches.insert(entry.batchNumber)
                add(match(listed, table: table))
            case .keys(let records):
                keyBatches.insert(entry.batchNumber)
                keys += records
                if keys.count >= Self.keysPerLogRound {
                    add(match(keys: keys, table: table, windowRule: windowRule))
                    keys.removeAll(keepingCapacity: true)
                }
            }
        }
        if !keys.isEmpty { add(match(keys: keys, table: table, windowRule: windowRule)) }
        return LogMatchOutcome(outcome: total, idBatches: idBatches.count, keyBatches: keyBatches.count, unreadableEntries: unreadable)
    }
}
