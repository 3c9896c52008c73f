import Foundation
import IDRotation
import PositiveListFormat
import Testing
import TestTiers
@testable import Matching
import TracerCore
import TransparencyLog

/// Matching the entries a node holds of a list log, read from their file a chunk at a time: the
/// same verdict as matching them in memory, whatever the chunk size, with a repeated part matched
/// once and an entry that does not decode never matched.
@Suite(.tags(.unit)) struct HeldLogMatchingTests {
    let day = UTCDay(containing: 1_795_305_600)  // 2026-11-22
    let dayStart: UnixSeconds = 1_795_305_600
    let derivation = try! IDDerivation(intervalSeconds: 900)

    /// A chunk small enough that the test's entries fall into many chunks (each holds at least
    /// one largest entry).
    static let smallChunk = 70_000

    func key(_ byte: UInt8) -> DailyKey { try! DailyKey(bytes: [UInt8](repeating: byte, count: 16)) }

    /// About `count` random sorted ids (`count` unless two collide), each valid for 15 minutes
    /// from `dayStart + offset`.
    func ids(_ count: Int, offset: UnixSeconds = 3_600) -> [PositiveListEntry] {
        Set((0..<count).map { _ in UInt64.random(in: 1 ..< .max) }).sorted().map {
            PositiveListEntry(id: UserID(rawValue: $0), validFrom: dayStart + offset, validUntil: dayStart + offset + 900)
        }
    }

    func met(_ id: UserID, at second: UnixSeconds) -> EncounterTimes {
        EncounterTimes(peer: id, ownWindowStart: second - second % 900, firstSeen: second, lastSeen: second + 60)
    }

    /// Saves `entries` as a followed log and returns what the store holds.
    func held(_ entries: [Data]) throws -> (store: FollowedLogStore, entries: HeldLogEntries) {
        let store = FollowedLogStore(directory: NSTemporaryDirectory() + "tracer-held-matching-" + UUID().uuidString + "/log")
        let appended = try LogAppender.append(entries, to: .empty)
        let signer = try NoteSigner.generate(name: LogFollowerTests.origin)
        let note = try Checkpoint(origin: LogFollowerTests.origin, treeSize: appended.rightEdge.treeSize, rootHash: appended.rootHash)
            .signed(by: [signer], timestamp: 1_764_000_000).encoded
        try store.save(FollowedLogState(checkpointNote: note, edge: appended.rightEdge), appending: entries)
        return (store, try #require(try store.load()).entries)
    }

    @Test func aLogReadInChunksMatchesAsInMemory() throws {
        // Three id batches of two parts each (4,095 ids fill a part) and key batches between them.
        var entries: [Data] = []
        var encounters: [EncounterTimes] = []
        for batch in 1...3 {
            let listed = ids(6_000)
            for entry in try ListLogEntry.entries(idBatch: UInt64(batch), entries: listed) { entries.append(Data(try entry.encode())) }
            encounters.append(met(listed[batch * 1_000].id, at: dayStart + 3_700))
            let records = [DailyKeyRecord(day: day, intervalSeconds: 900, key: key(UInt8(batch)))]
            for entry in try ListLogEntry.entries(keyBatch: UInt64(batch), records: records) { entries.append(Data(try entry.encode())) }
            let window = derivation.windowIndices(of: day).lowerBound + 10
            let start = derivation.nominalStart(ofWindowIndex: window)
            encounters.append(EncounterTimes(peer: derivation.id(key: key(UInt8(batch)), windowIndex: window), ownWindowStart: start, firstSeen: start + 10, lastSeen: start + 20))
        }
        let (store, held) = try held(entries)
        defer { try? FileManager.default.removeItem(atPath: store.directory) }
        let matcher = PositiveListMatcher(encounters: encounters)
        let inMemory = matcher.match(logEntries: entries)
        for chunk in [Self.smallChunk, HeldLogEntries.defaultChunkByteCount] {
            let read = try matcher.match(heldEntries: held, chunkByteCount: chunk)
            #expect(read.outcome.matches.count == 6 && Set(read.outcome.matches.map(\.times)) == Set(encounters), "chunk \(chunk)")
            #expect(read.outcome.matches.map(\.times) == inMemory.outcome.matches.map(\.times))
            #expect(read.outcome.idsChecked == 3 * 6_000 + 3 * 96 && read.outcome.keysChecked == 3)
            #expect(read.idBatches == 3 && read.keyBatches == 3 && read.unreadableEntries == 0)
        }
    }

    @Test func aPartRepeatedInALaterChunkIsMatchedOnceAndADifferentOneUnderItsNumbersToo() throws {
        let listed = ids(4_000)
        let part = Data(try ListLogEntry(batchNumber: 1, part: 0, partCount: 1, payload: .ids(listed)).encode())
        // Another entry under the same numbers, holding one more id: a server's bug, matched too.
        let extra = PositiveListEntry(id: UserID(rawValue: 0xFFFF_FFFF_FFFF_FFFF), validFrom: dayStart + 3_600, validUntil: dayStart + 4_500)
        let different = Data(try ListLogEntry(batchNumber: 1, part: 0, partCount: 1, payload: .ids(listed + [extra])).encode())
        let filler = Data(try ListLogEntry(batchNumber: 2, part: 0, partCount: 1, payload: .ids(ids(4_000))).encode())
        // The repeat lands in a later chunk than the first: telling it apart reads the first again.
        let (store, held) = try held([part, filler, filler, part, different])
        defer { try? FileManager.default.removeItem(atPath: store.directory) }
        let encounters = [met(listed[5].id, at: dayStart + 3_700), met(extra.id, at: dayStart + 3_800)]
        let matched = try PositiveListMatcher(encounters: encounters).match(heldEntries: held, chunkByteCount: Self.smallChunk)
        #expect(matched.outcome.matches.filter { $0.times.peer == listed[5].id }.count == 2, "once for the part, once for the different entry")
        #expect(matched.outcome.matches.filter { $0.times.peer == extra.id }.count == 1)
        #expect(matched.outcome.idsChecked == 4_000 + 4_000 + 4_001)
    }

    @Test func aMalformedFirstCopyIsNotWhatALaterRepeatIsComparedWith() throws {
        // A malformed entry under batch 1 part 0, then a valid one under the same numbers and its
        // exact repeat: the valid one counts once, the malformed one is unreadable.
        let listed = ids(50)
        var malformed = try ListLogEntry(batchNumber: 1, part: 0, partCount: 1, payload: .ids(ids(50))).encode()
        malformed.replaceSubrange((malformed.count - 8)..<malformed.count, with: [0, 0, 0, 9, 0, 0, 0, 1])
        let valid = Data(try ListLogEntry(batchNumber: 1, part: 0, partCount: 1, payload: .ids(listed)).encode())
        let filler = Data(try ListLogEntry(batchNumber: 2, part: 0, partCount: 1, payload: .ids(ids(4_000))).encode())
        let encounters = [met(listed[3].id, at: dayStart + 3_700)]
        // In one chunk, and with the repeat in a later chunk than the valid copy.
        for (entries, chunk) in [([Data(malformed), valid, valid], HeldLogEntries.defaultChunkByteCount),
                                 ([Data(malformed), valid, filler, filler, valid], Self.smallChunk)] {
            let (store, held) = try held(entries)
            defer { try? FileManager.default.removeItem(atPath: store.directory) }
            let matched = try PositiveListMatcher(encounters: encounters).match(heldEntries: held, chunkByteCount: chunk)
            #expect(matched.outcome.matches.count == 1 && matched.unreadableEntries == 1, "chunk \(chunk)")
            #expect(matched.outcome.idsChecked == 50 + (entries.count == 5 ? 4_000 : 0))
        }
    }

    @Test func anIDsEntryThatDoesNotDecodeIsCountedAndNoneOfItsIDsMatch() throws {
        let listed = ids(100)
        var bytes = try ListLogEntry(batchNumber: 4, part: 0, partCount: 1, payload: .ids(listed)).encode()
        // The last record's window ends before it starts: the entry is malformed as a whole,
        // although its first ids (one of them met) are well formed.
        let last = bytes.count - 16
        bytes.replaceSubrange((last + 8)..<(last + 16), with: [0, 0, 0, 9, 0, 0, 0, 1])
        let good = Data(try ListLogEntry(batchNumber: 5, part: 0, partCount: 1, payload: .ids(ids(10))).encode())
        let (store, held) = try held([Data(bytes), good, Data([9, 9, 9])])
        defer { try? FileManager.default.removeItem(atPath: store.directory) }
        let matched = try PositiveListMatcher(encounters: [met(listed[0].id, at: dayStart + 3_700)]).match(heldEntries: held)
        #expect(matched.outcome.matches.isEmpty)
        #expect(matched.unreadableEntries == 2 && matched.idBatches == 1 && matched.outcome.idsChecked == 10)
    }

    @Test func anEntriesFileCutUnderTheReaderIsDamagedNotAShortList() throws {
        let entries = (0..<6).map { batch in Data(try! ListLogEntry(batchNumber: UInt64(batch), part: 0, partCount: 1, payload: .ids(ids(3_000))).encode()) }
        let (store, held) = try held(entries)
        defer { try? FileManager.default.removeItem(atPath: store.directory) }
        // Another program cuts the file after it was loaded (the node holds the cache's lock).
        #expect(truncate(held.path, off_t(100_000)) == 0)
        #expect(throws: FollowedLogStoreError.self) {
            try PositiveListMatcher(encounters: []).match(heldEntries: held, chunkByteCount: Self.smallChunk)
        }
        #expect(throws: FollowedLogStoreError.self) { try store.load() }
    }

    @Test func manySmallEntriesLoadAndReadBackWhole() throws {
        // More entries than a frame window holds, and than the partial bundle: the frames are
        // read window by window, the partial bundle's entries from where the frames say.
        let entries = (0..<3_000).map { Data("entry \($0) ".utf8) + Data(repeating: UInt8($0 % 251), count: $0 % 40) }
        let (store, held) = try held(entries)
        defer { try? FileManager.default.removeItem(atPath: store.directory) }
        #expect(held.count == 3_000 && held.firstIndex == 0)
        #expect(try held.read() == entries)
        #expect(try held.firstPosition { $0.count > 40 && $0.first == UInt8(ascii: "e") } != nil)
        #expect(try held.firstPosition { _ in false } == nil)
        // A copy a crash interrupted is removed by the next one.
        let unfinished = store.directory + "/" + AtomicFile.temporaryPrefix + "entries-crashed"
        #expect(FileManager.default.createFile(atPath: unfinished, contents: Data(count: 100)))
        try store.keepEntries(from: 1_000)
        #expect(!FileManager.default.fileExists(atPath: unfinished))
        let kept = try #require(try store.load())
        #expect(try kept.firstIndex == 1_000 && kept.entries.count == 2_000 && kept.entries.read() == Array(entries[1_000...]))
    }
}
