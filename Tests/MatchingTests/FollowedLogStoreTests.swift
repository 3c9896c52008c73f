import Foundation
import Matching
import Testing
import TestTiers
import TransparencyLog

/// What a node keeps of a followed log on disk: state and entries that survive a restart, a
/// crash between the two writes, retention, and evidence of a refused history.
@Suite(.tags(.unit)) struct FollowedLogStoreTests {
    typealias PublishedLog = LogFollowerTests.PublishedLog

    static func scratch() -> FollowedLogStore {
        FollowedLogStore(directory: NSTemporaryDirectory() + "tracer-log-store-" + UUID().uuidString + "/log")
    }

    /// Follows `log` from `held`, saves the step, and returns what was loaded back.
    static func followAndReload(_ log: PublishedLog, held: FollowedLogState?, store: FollowedLogStore) async throws
        -> (state: FollowedLogState, firstIndex: UInt64, entries: [Data]) {
        let advance = try await LogFollower.advance(held, source: LogFollowerTests.source(log.signer), fetcher: log.served)
        try store.save(advance.state, appending: advance.newEntries)
        let held = try #require(try store.load())
        return (held.state, held.firstIndex, try held.entries.read())
    }

    @Test func stateAndEntriesSurviveARestartAcrossUpdates() async throws {
        let store = Self.scratch()
        defer { try? FileManager.default.removeItem(atPath: store.directory) }
        #expect(try store.load() == nil)
        var log = PublishedLog(signer: try NoteSigner.generate(name: LogFollowerTests.origin))
        try log.append(LogFollowerTests.entries(0..<300))
        let first = try await Self.followAndReload(log, held: nil, store: store)
        #expect(first.entries == log.entries && first.firstIndex == 0 && first.state.treeSize == 300)
        try log.append(LogFollowerTests.entries(300..<310))
        let second = try await Self.followAndReload(log, held: first.state, store: store)
        #expect(second.entries == log.entries)
        #expect(second.state.rootHash == MerkleTree.rootHash(ofEntries: log.entries))
    }

    @Test func entriesAnUnfinishedUpdateAppendedAreDroppedAtTheNextLoad() async throws {
        let store = Self.scratch()
        defer { try? FileManager.default.removeItem(atPath: store.directory) }
        var log = PublishedLog(signer: try NoteSigner.generate(name: LogFollowerTests.origin))
        try log.append(LogFollowerTests.entries(0..<5))
        let held = try await Self.followAndReload(log, held: nil, store: store)
        let sizeBefore = try FileManager.default.attributesOfItem(atPath: store.directory + "/entries")[.size] as! Int
        // A crash after the entries were appended and before the state was replaced: the tail
        // (here a whole entry and half of one) is not counted, and is cut off.
        let handle = try #require(FileHandle(forWritingAtPath: store.directory + "/entries"))
        handle.seekToEndOfFile()
        handle.write(Data([0, 3, 1, 2, 3, 0, 9, 1]))
        handle.closeFile()
        let reloaded = try #require(try store.load())
        #expect(try reloaded.entries.read() == held.entries && reloaded.state == held.state)
        #expect(try FileManager.default.attributesOfItem(atPath: store.directory + "/entries")[.size] as! Int == sizeBefore)
        // Following on from the reloaded state appends after the cut.
        try log.append(LogFollowerTests.entries(5..<7))
        #expect(try await Self.followAndReload(log, held: reloaded.state, store: store).entries == log.entries)
    }

    @Test func entriesAFirstSaveLeftWithoutItsStateAreNotCountedAgain() async throws {
        let store = Self.scratch()
        defer { try? FileManager.default.removeItem(atPath: store.directory) }
        var log = PublishedLog(signer: try NoteSigner.generate(name: LogFollowerTests.origin))
        try log.append(LogFollowerTests.entries(0..<5))
        _ = try await Self.followAndReload(log, held: nil, store: store)
        // The first save's state is lost (a crash before it was written): the node starts over
        // from nothing (here on a list whose entries differ), and its entries must not follow
        // the five left in the file.
        try FileManager.default.removeItem(atPath: store.directory + "/state")
        #expect(try store.load() == nil)
        var other = PublishedLog(signer: log.signer)
        try other.append(LogFollowerTests.entries(0..<7, tag: "'"))
        let again = try await Self.followAndReload(other, held: nil, store: store)
        #expect(again.entries == other.entries && again.firstIndex == 0)
    }

    @Test func aStateWithoutItsEntriesIsDamagedAndSaysSo() async throws {
        let store = Self.scratch()
        defer { try? FileManager.default.removeItem(atPath: store.directory) }
        var log = PublishedLog(signer: try NoteSigner.generate(name: LogFollowerTests.origin))
        try log.append(LogFollowerTests.entries(0..<5))
        _ = try await Self.followAndReload(log, held: nil, store: store)
        // Entries lost (a truncated file): fewer than the state counts.
        let bytes = try Data(contentsOf: URL(fileURLWithPath: store.directory + "/entries"))
        try bytes.prefix(bytes.count - 4).write(to: URL(fileURLWithPath: store.directory + "/entries"))
        #expect(throws: FollowedLogStoreError.self) { try store.load() }
        try FileManager.default.removeItem(atPath: store.directory + "/entries")
        #expect(throws: FollowedLogStoreError.damaged(path: store.directory + "/entries", reason: "it is missing")) { try store.load() }
        try Data("not a state".utf8).write(to: URL(fileURLWithPath: store.directory + "/state"))
        #expect(throws: FollowedLogStoreError.self) { try store.load() }
    }

    @Test func retentionKeepsOnlyTheNewerEntriesAndTheStateStillExtends() async throws {
        let store = Self.scratch()
        defer { try? FileManager.default.removeItem(atPath: store.directory) }
        var log = PublishedLog(signer: try NoteSigner.generate(name: LogFollowerTests.origin))
        try log.append(LogFollowerTests.entries(0..<300))
        let held = try await Self.followAndReload(log, held: nil, store: store)
        try store.keepEntries(from: 100)
        let kept = try #require(try store.load())
        #expect(try kept.firstIndex == 100 && kept.entries.read() == Array(log.entries[100...]) && kept.state == held.state)
        // The partial bundle's entries are the edge: never dropped.
        try store.keepEntries(from: 290)
        #expect(try store.load()?.firstIndex == 256)
        try log.append(LogFollowerTests.entries(300..<305))
        let next = try await Self.followAndReload(log, held: try #require(try store.load()).state, store: store)
        #expect(next.firstIndex == 256 && next.entries == Array(log.entries[256...]))
    }

    @Test func aForkIsKeptOnceAsTwoSignedCheckpointsAndWhy() async throws {
        let store = Self.scratch()
        defer { try? FileManager.default.removeItem(atPath: store.directory) }
        let signer = try NoteSigner.generate(name: LogFollowerTests.origin)
        var honest = PublishedLog(signer: signer)
        try honest.append(LogFollowerTests.entries(0..<4))
        let held = try await LogFollower.advance(nil, source: LogFollowerTests.source(signer), fetcher: honest.served).state
        var split = PublishedLog(signer: signer)
        try split.append(LogFollowerTests.entries(0..<4, tag: "'"))
        do {
            _ = try await LogFollower.advance(held, source: LogFollowerTests.source(signer), fetcher: split.served)
            Issue.record("a split view was accepted")
        } catch {
            let path = try #require(try store.keepEvidence(of: error, at: 1_800_000_000))
            #expect(path.hasPrefix(store.directory + "/evidence/1800000000-fork-"))
            // Both notes verify with the log's key: the evidence is checkable by anyone.
            for (file, note) in [("held-checkpoint", held.checkpointNote), ("offered-checkpoint", split.checkpoint)] {
                let kept = try Data(contentsOf: URL(fileURLWithPath: path + "/" + file))
                #expect(kept == note)
                #expect(try Checkpoint.open(kept, origin: LogFollowerTests.origin, logKey: signer.verifierKey).checkpoint.treeSize == 4)
            }
            #expect(try String(contentsOfFile: path + "/why", encoding: .utf8).contains("two different logs"))
            // The same fork refused again later is not kept twice.
            #expect(try store.keepEvidence(of: error, at: 1_800_000_300) == path)
            #expect(store.evidence() == [path])
        }
        // Other refusals are no evidence.
        #expect(try store.keepEvidence(of: .olderTree(held: 9, offered: 5), at: 1_800_000_001) == nil)
        #expect(try store.keepEvidence(of: .unreachable("timeout"), at: 1_800_000_001) == nil)
    }

    @Test func aSaveAfterOneThatFailedBeforeItsStateAppendsAfterTheCountedEntries() async throws {
        let store = Self.scratch()
        defer { try? FileManager.default.removeItem(atPath: store.directory) }
        var log = PublishedLog(signer: try NoteSigner.generate(name: LogFollowerTests.origin))
        try log.append(LogFollowerTests.entries(0..<5))
        let first = try await Self.followAndReload(log, held: nil, store: store)
        // A save whose state write failed (a full disk) left its entries appended, uncounted; the
        // node retries in the same process, without a load in between.
        let handle = try #require(FileHandle(forWritingAtPath: store.directory + "/entries"))
        handle.seekToEndOfFile()
        handle.write(Data([0, 3, 9, 9, 9]))
        handle.closeFile()
        try log.append(LogFollowerTests.entries(5..<8))
        let advance = try await LogFollower.advance(first.state, source: LogFollowerTests.source(log.signer), fetcher: log.served)
        try store.save(advance.state, appending: advance.newEntries)
        #expect(try #require(try store.load()).entries.read() == log.entries)
    }

    @Test func aResetForgetsTheLogButNotTheEvidence() async throws {
        let store = Self.scratch()
        defer { try? FileManager.default.removeItem(atPath: store.directory) }
        var log = PublishedLog(signer: try NoteSigner.generate(name: LogFollowerTests.origin))
        try log.append(LogFollowerTests.entries(0..<3))
        _ = try await Self.followAndReload(log, held: nil, store: store)
        try FileManager.default.createDirectory(atPath: store.directory + "/evidence/1-fork-00", withIntermediateDirectories: true)
        try store.reset()
        #expect(try store.load() == nil)
        #expect(store.evidence().count == 1)
        let again = try await Self.followAndReload(log, held: nil, store: store)
        #expect(again.entries == log.entries)
    }
}
