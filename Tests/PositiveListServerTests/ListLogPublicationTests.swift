import Crypto
import Foundation
import HTTPTypes
import IDRotation
import PositiveListFormat
@testable import PositiveListServer
import ServerStorage
import Testing
import TestTiers
import TracerCore
import ServerTestSupport
import TracerTestSupport
import TransparencyLog

/// Publication appends every live batch to the log (format version 3), and the log verifies
/// from the published files alone: end to end on the SQLite store.
@Suite(.tags(.unit)) struct ListLogPublicationTests {
    static func addIDs(_ fixture: ServerFixture, count: Int, seed: UInt64) async throws {
        // Histories of at most 2,500 ids (maxIDsPerHistory is 3,000).
        for chunk in 0..<(count + 2_499) / 2_500 {
            let size = min(2_500, count - chunk * 2_500)
            let submitted = Histories.entries(count: size, endingAt: fixture.clock.now(), seed: seed * 1_000 + UInt64(chunk))
            try await fixture.appendIDs(submitted)
        }
    }

    static func addKeys(_ fixture: ServerFixture, count: Int, seed: UInt64) async throws {
        var generator = SplitMix64(seed: seed)
        let yesterday = UTCDay(number: UTCDay(containing: fixture.clock.now()).number - 1)
        let keys = (0..<count).map { _ in DailyKeyRecord(day: yesterday, intervalSeconds: 900, key: DailyKey.random(using: &generator)) }
        _ = try await fixture.store.appendKeyHistory(keys, credential: .authority(name: "Health Authority A"), idempotencyKey: nil, now: fixture.clock.now())
    }

    static func identity(_ fixture: ServerFixture, origin: String? = nil) throws -> ListLogIdentity {
        try ListLogIdentity(origin: origin, publicKey: fixture.signingKey.publicKey)
    }

    /// The log holds exactly the live batches the store recorded, with the same records (none
    /// of these tests lets a batch expire).
    static func expectLogMatchesBatches(_ fixture: ServerFixture, _ log: PublishedListLog, store: (any SubmissionStore)? = nil) async throws {
        let (ids, keys, _) = try log.batches()
        let recorded = try await (store ?? fixture.store).liveBatchContents(idBatchesAfter: 0, keyBatchesAfter: 0)
        #expect(Set(ids.keys) == Set(recorded.idBatches.map(\.number)))
        for batch in recorded.idBatches { #expect(ids[batch.number] == batch.entries, "id batch \(batch.number)") }
        #expect(Set(keys.keys) == Set(recorded.keyBatches.map(\.number)))
        for batch in recorded.keyBatches { #expect(keys[batch.number].map(Set.init) == Set(batch.records), "key batch \(batch.number)") }
    }

    /// Every file below log/tile with its bytes and modification time.
    static func tileFiles(_ fixture: ServerFixture) -> [String: (Data, Date)] {
        let root = fixture.paths.published.logPath + "/tile"
        var files: [String: (Data, Date)] = [:]
        guard let enumerator = FileManager.default.enumerator(atPath: root) else { return [:] }
        for case let relative as String in enumerator {
            let path = root + "/" + relative
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory), !isDirectory.boolValue else { continue }
            let date = (try? FileManager.default.attributesOfItem(atPath: path)[.modificationDate] as? Date) ?? nil
            files["tile/" + relative] = (FileManager.default.contents(atPath: path)!, date ?? .distantPast)
        }
        return files
    }

    static func consistencyHolds(_ fixture: ServerFixture, from old: Checkpoint, to new: Checkpoint) throws {
        var reader = TileHashReader(treeSize: new.treeSize)
        for tile in try TileLayout.tilesForConsistency(oldSize: old.treeSize, newSize: new.treeSize) {
            try reader.add(tile, bytes: try #require(FileManager.default.contents(atPath: fixture.paths.published.logPath + "/" + tile.path)))
        }
        let proof = try MerkleProofGenerator.consistencyProof(oldSize: old.treeSize, newSize: new.treeSize, reader: reader)
        try MerkleProof.verifyConsistency(oldSize: old.treeSize, newSize: new.treeSize, oldRoot: old.rootHash, newRoot: new.rootHash, proof: proof)
    }

    @Test func everyPublicationAppendsItsBatchesAndTheLogVerifiesFromTheFilesAlone() async throws {
        let fixture = try ServerFixture()
        defer { fixture.remove() }
        let publisher = fixture.makePublisher()
        let identity = try Self.identity(fixture)
        #expect(identity.origin.hasPrefix("tracer-list/") && identity.origin.utf8.count == 12 + 16)
        #expect(publisher.logIdentity.verifierKey == identity.verifierKey)

        var previous: Checkpoint?
        var previousTiles: [String: (Data, Date)] = [:]
        // A batch of 5,000 ids takes two entries; each round adds ids and keys.
        for (round, idCount) in [5_000, 3, 700].enumerated() {
            try await Self.addIDs(fixture, count: idCount, seed: UInt64(100 + round))
            try await Self.addKeys(fixture, count: 10 + round, seed: UInt64(200 + round))
            let report = try await publisher.publish()
            #expect(report.log?.appendedIDBatches == [report.newBatch?.number].compactMap { $0 })
            #expect(report.log?.appendedKeyBatches == [report.newKeyBatch?.number].compactMap { $0 })
            let log = try PublishedListLog.open(fixture.paths.published, identity: identity)
            #expect(log.signedAt == UInt64(fixture.clock.now()))
            try await Self.expectLogMatchesBatches(fixture, log)
            if let previous {
                #expect(log.checkpoint.treeSize > previous.treeSize)
                try Self.consistencyHolds(fixture, from: previous, to: log.checkpoint)
            }
            // Nothing published before changes (bytes and modification time); a partial file
            // the append superseded may be gone (pruned), never changed.
            let tiles = Self.tileFiles(fixture)
            for (path, (bytes, date)) in previousTiles where tiles[path] != nil || !path.contains(".p/") {
                #expect(tiles[path]?.0 == bytes, "\(path) was rewritten")
                #expect(tiles[path]?.1 == date, "\(path) was touched")
            }
            previousTiles = tiles
            previous = log.checkpoint
            fixture.clock.advance(by: 3_600)
        }
        let (_, _, order) = try PublishedListLog.open(fixture.paths.published, identity: identity).batches()
        #expect(order == ["ids 1", "keys 1", "ids 2", "keys 2", "ids 3", "keys 3"])
        // The state beside the database agrees with the checkpoint.
        let state = try #require(Publisher.readLogState(at: fixture.paths.logState))
        #expect(state.treeSize == previous!.treeSize && state.lastIDBatch == 3 && state.lastKeyBatch == 3)
        // Only log files below log/: no temporary file left.
        #expect(!Self.tileFiles(fixture).keys.contains { $0.contains(AtomicFile.temporaryPrefix) })
    }

    /// Nothing new: the checkpoint stays until it is indexRefreshSeconds old, then the same tree
    /// is signed again with the new time, so a node can tell an idle log from a frozen one.
    @Test func anIdleLogIsSignedAgainOnceItsCheckpointIsOld() async throws {
        let fixture = try ServerFixture()
        defer { fixture.remove() }
        let publisher = fixture.makePublisher()
        let identity = try Self.identity(fixture)
        try await publisher.publish()
        let empty = try PublishedListLog.open(fixture.paths.published, identity: identity)
        #expect(empty.checkpoint.treeSize == 0 && empty.checkpoint.rootHash == MerkleTree.emptyRoot, "the first publication signs the empty tree")
        try await Self.addIDs(fixture, count: 2, seed: 1)
        try await publisher.publish()
        let bytes = FileManager.default.contents(atPath: fixture.paths.published.logCheckpointPath)
        let first = try PublishedListLog.open(fixture.paths.published, identity: identity)
        fixture.clock.advance(by: 86_400 - 1)
        let idle = try await publisher.publish()
        #expect(idle.log?.checkpointSigned == false)
        #expect(FileManager.default.contents(atPath: fixture.paths.published.logCheckpointPath) == bytes)
        fixture.clock.advance(by: 1)
        #expect(try await publisher.publish().log?.checkpointSigned == true)
        let refreshed = try PublishedListLog.open(fixture.paths.published, identity: identity)
        #expect(refreshed.checkpoint == first.checkpoint)
        #expect(refreshed.signedAt == first.signedAt + 86_400)
    }

    /// A server with recorded batches and no log (one from before issue 39, its batches' content
    /// copied into the database at the upgrade) appends every live batch at its first
    /// publication: ids then keys, each in number order.
    @Test func aServerWithBatchesButNoLogConvertsAtItsFirstPublication() async throws {
        let fixture = try ServerFixture()
        defer { fixture.remove() }
        let publisher = fixture.makePublisher()
        for round in 0..<3 {
            try await Self.addIDs(fixture, count: 50, seed: UInt64(300 + round))
            try await Self.addKeys(fixture, count: 5, seed: UInt64(400 + round))
            try await publisher.publish()
            fixture.clock.advance(by: 3_600)
        }
        // As a server from before issue 39 left it: no log, no state.
        try FileManager.default.removeItem(atPath: fixture.paths.published.logPath)
        try FileManager.default.removeItem(atPath: fixture.paths.logState)
        let before = try await fixture.store.liveBatchContents(idBatchesAfter: 0, keyBatchesAfter: 0)

        let report = try await fixture.makePublisher().publish()
        #expect(report.newBatch == nil)
        #expect(report.log?.appendedIDBatches == [1, 2, 3])
        #expect(report.log?.appendedKeyBatches == [1, 2, 3])
        let log = try PublishedListLog.open(fixture.paths.published, identity: try Self.identity(fixture))
        #expect(try log.batches().order == ["ids 1", "ids 2", "ids 3", "keys 1", "keys 2", "keys 3"])
        try await Self.expectLogMatchesBatches(fixture, log)
        #expect(try await fixture.store.liveBatchContents(idBatchesAfter: 0, keyBatchesAfter: 0) == before, "the recorded batches are untouched")
        #expect(try await fixture.makePublisher().publish().log?.appendedEntries == 0, "nothing is appended twice")
    }

    /// A crash after each step of the log (and before it, after the batches are recorded) leaves a log a node
    /// can open, and the next publication completes it without losing or repeating an entry.
    @Test(arguments: PublishStep.logSteps + [.batchRecorded, .keyBatchRecorded])
    func aCrashAtEachStepLeavesAnOpenableLogThatTheNextPublicationCompletes(_ step: PublishStep) async throws {
        let fixture = try ServerFixture()
        defer { fixture.remove() }
        let identity = try Self.identity(fixture)
        try await Self.addIDs(fixture, count: 20, seed: 1)
        try await Self.addKeys(fixture, count: 3, seed: 2)
        try await fixture.makePublisher().publish()
        let before = try PublishedListLog.open(fixture.paths.published, identity: identity)
        fixture.clock.advance(by: 3_600)

        try await Self.addIDs(fixture, count: 4_200, seed: 3)
        try await Self.addKeys(fixture, count: 4, seed: 4)
        let crashing = fixture.makePublisher(faultInjection: { if $0 == step { throw CancellationError() } })
        await #expect(throws: PublishError.self) { try await crashing.publish() }
        let after = try PublishedListLog.open(fixture.paths.published, identity: identity)
        switch step {
        case .logCheckpointReplaced:
            #expect(after.checkpoint.treeSize == before.checkpoint.treeSize + 3, "the new checkpoint is in place")
            #expect(Publisher.readLogState(at: fixture.paths.logState)?.treeSize == before.checkpoint.treeSize, "the state lags")
        default:
            #expect(after.checkpoint == before.checkpoint, "the old checkpoint still opens, with all its tiles")
        }
        // A crash between two publications is followed by a new batch or none; here, a new one.
        fixture.clock.advance(by: 60)
        try await Self.addIDs(fixture, count: 5, seed: 5)
        try await fixture.makePublisher().publish()
        let completed = try PublishedListLog.open(fixture.paths.published, identity: identity)
        try await Self.expectLogMatchesBatches(fixture, completed)
        try Self.consistencyHolds(fixture, from: before.checkpoint, to: completed.checkpoint)
        #expect(Publisher.readLogState(at: fixture.paths.logState)?.treeSize == completed.checkpoint.treeSize)
    }

    /// Partial tiles and bundles are new files at every append; only the versions of the last two
    /// checkpoints stay, so a bundle's superseded versions do not pile up (256 of them would be
    /// about 150 MB for key batches), and the log still verifies from the files after each append.
    @Test func supersededPartialFilesArePrunedToTheLastTwoCheckpoints() async throws {
        let fixture = try ServerFixture()
        defer { fixture.remove() }
        let publisher = fixture.makePublisher()
        let identity = try Self.identity(fixture)
        var sizes: [UInt64] = []
        for round in 0..<12 {
            try await Self.addKeys(fixture, count: 3, seed: UInt64(300 + round))
            _ = try await publisher.publish()
            let log = try PublishedListLog.open(fixture.paths.published, identity: identity)
            sizes.append(log.checkpoint.treeSize)
            try await Self.expectLogMatchesBatches(fixture, log)
            fixture.clock.advance(by: 3_600)
        }
        let bundles = try FileManager.default.contentsOfDirectory(atPath: fixture.paths.published.logPath + "/tile/entries/000.p")
        // The two newest widths of the one partial bundle, and no narrower one.
        #expect(Set(bundles) == Set(sizes.suffix(2).map(String.init)), "\(bundles.sorted())")
        let levelZero = try FileManager.default.contentsOfDirectory(atPath: fixture.paths.published.logPath + "/tile/0/000.p")
        #expect(Set(levelZero) == Set(sizes.suffix(2).map(String.init)), "\(levelZero.sorted())")
    }

    /// The publisher reads only the log's right edge: with every full tile and full bundle of a
    /// long log moved away, it still appends, and never writes them again.
    @Test func publicationReadsOnlyTheRightEdgeAndNeverRewritesAFullTile() async throws {
        let fixture = try ServerFixture()
        defer { fixture.remove() }
        let identity = try Self.identity(fixture)
        // A log of 700 entries already (two full level-0 tiles), as a long-running server has:
        // seeded directly, standing for batches that have since expired.
        let seed = (0..<700).map { index in
            Data(try! ListLogEntry(batchNumber: 1_000_000 + UInt64(index), part: 0, partCount: 1, payload: .ids([
                PositiveListEntry(id: UserID(rawValue: UInt64(index)), validFrom: 1_000, validUntil: 2_000),
            ])).encode())
        }
        let appended = try LogAppender.append(seed, to: .empty)
        for write in appended.writes {
            let path = fixture.paths.published.logPath + "/" + write.path
            try FileManager.default.createDirectory(atPath: (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
            try AtomicFile.write(Array(write.bytes), to: path)
        }
        let note = try Checkpoint(origin: identity.origin, treeSize: 700, rootHash: appended.rootHash).signed(by: [
            try NoteSigner(name: identity.origin, privateKey: fixture.signingKey),
            try NoteSigner(name: identity.origin, type: .cosignatureV1, privateKey: fixture.signingKey),
        ], timestamp: UInt64(fixture.clock.now()))
        try AtomicFile.write(Array(note.encoded), to: fixture.paths.published.logCheckpointPath)
        try AtomicFile.write(Array(#"{"lastIDBatch":0,"lastKeyBatch":0,"treeSize":700}"#.utf8), to: fixture.paths.logState)

        let full = appended.writes.filter { !$0.isPartial }.map(\.path)
        #expect(full.count == 4, "two full bundles and their two level-0 tiles")
        let aside = NSTemporaryDirectory() + "/tracer-aside-" + UUID().uuidString
        for path in full {
            try FileManager.default.createDirectory(atPath: (aside + "/" + path as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
            try FileManager.default.moveItem(atPath: fixture.paths.published.logPath + "/" + path, toPath: aside + "/" + path)
        }
        defer { try? FileManager.default.removeItem(atPath: aside) }

        try await Self.addIDs(fixture, count: 30, seed: 9)
        let report = try await fixture.makePublisher().publish()
        #expect(report.log?.appendedEntries == 1)
        for path in full { #expect(!FileManager.default.fileExists(atPath: fixture.paths.published.logPath + "/" + path), "\(path) written again") }
        for path in full { try FileManager.default.moveItem(atPath: aside + "/" + path, toPath: fixture.paths.published.logPath + "/" + path) }
        let log = try PublishedListLog.open(fixture.paths.published, identity: identity)
        #expect(log.checkpoint.treeSize == 701)
        let (ids, _, _) = try log.batches()
        #expect(ids[1] == (try await fixture.store.liveBatchContents(idBatchesAfter: 0, keyBatchesAfter: UInt64(Int64.max)).idBatches.first?.entries))
    }
}
