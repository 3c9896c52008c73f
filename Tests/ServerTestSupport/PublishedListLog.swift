import Crypto
import Foundation
import HTTPTypes
import PositiveListFormat
import PositiveListServer
import ServerStorage
import Testing
import TestTiers
import TracerCore
import TracerTestSupport
import TransparencyLog

/// The published log as a node would see it, read from the published files alone.
package struct PublishedListLog {
    package let checkpoint: Checkpoint
    /// The time of the log's own timestamped signature (tlog-cosignature/v1).
    package let signedAt: UInt64
    package let entries: [ListLogEntry]
    package let rawEntries: [Data]

    /// Opens `log/checkpoint` with the log's keys, reads every entry bundle, recomputes the root
    /// from the entries and from the hash tiles, and decodes every entry.
    package static func open(_ directory: PublishedDirectory, identity: ListLogIdentity) throws -> PublishedListLog {
        let bytes = try #require(FileManager.default.contents(atPath: directory.logCheckpointPath), "no log/checkpoint")
        let opened = try Checkpoint.open(
            bytes, origin: identity.origin, logKey: identity.verifierKey, witnesses: [identity.timestampKey], requiredCosignatures: 1)
        let size = opened.checkpoint.treeSize
        var raw: [Data] = []
        var bundle: UInt64 = 0
        while bundle << 8 < size {
            let id = try TileLayout.entryBundle(holding: bundle << 8, treeSize: size)
            let data = try #require(FileManager.default.contents(atPath: directory.logPath + "/" + id.path), "\(id.path) missing")
            raw += try EntryBundle.decode(data, as: id)
            bundle += 1
        }
        #expect(UInt64(raw.count) == size)
        #expect(MerkleTree.rootHash(ofLeafHashes: raw.map { MerkleTree.leafHash($0) }) == opened.checkpoint.rootHash, "the entries make the root")
        var reader = TileHashReader(treeSize: size)
        for tile in try TileLayout.tilesForRoot(treeSize: size) {
            try reader.add(tile, bytes: try #require(FileManager.default.contents(atPath: directory.logPath + "/" + tile.path), "\(tile.path) missing"))
        }
        if size > 0 { #expect(try MerkleProofGenerator.rootHash(treeSize: size, reader: reader) == opened.checkpoint.rootHash, "the tiles make the root") }
        return PublishedListLog(
            checkpoint: opened.checkpoint, signedAt: try #require(opened.cosignatures.first?.cosignatureTime),
            entries: try raw.map { try ListLogEntry(decoding: Array($0)) }, rawEntries: raw)
    }

    /// Whole batches from their parts, each (kind, number) once, its parts 0 ..< P in order.
    package func batches() throws -> (ids: [UInt64: [PositiveListEntry]], keys: [UInt64: [DailyKeyRecord]], order: [String]) {
        var ids: [UInt64: [PositiveListEntry]] = [:]
        var keys: [UInt64: [DailyKeyRecord]] = [:]
        var order: [String] = []
        var expectedPart: (kind: ListLogEntry.Kind, number: UInt64, part: UInt16, count: UInt16)?
        for entry in entries {
            if let expected = expectedPart {
                #expect(entry.kind == expected.kind && entry.batchNumber == expected.number && entry.part == expected.part && entry.partCount == expected.count,
                        "parts of one batch follow each other")
            } else {
                #expect(entry.part == 0)
                let name = "\(entry.kind == .ids ? "ids" : "keys") \(entry.batchNumber)"
                #expect(!order.contains(name), "\(name) appears once")
                order.append(name)
            }
            expectedPart = entry.part + 1 < entry.partCount ? (entry.kind, entry.batchNumber, entry.part + 1, entry.partCount) : nil
            switch entry.payload {
            case .ids(let records): ids[entry.batchNumber, default: []] += records
            case .keys(let records): keys[entry.batchNumber, default: []] += records
            }
        }
        #expect(expectedPart == nil, "no batch is cut short")
        return (ids, keys, order)
    }
}
