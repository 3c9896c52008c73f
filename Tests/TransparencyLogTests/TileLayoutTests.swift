import Foundation
import Testing
import TestTiers
@testable import TransparencyLog

/// Tile paths and the tiles of a tree, against the examples of the C2SP tlog-tiles spec
/// (github.com/C2SP/C2SP, tlog-tiles.md, "Merkle Tree" and "Partial Tiles").
@Suite(.tags(.unit)) struct TileLayoutTests {
    @Test func pathsFollowTheSpecExamples() throws {
        // "index 1234067 will be encoded as x001/x234/067".
        #expect(try TileID(level: 0, index: 1_234_067, width: 256).path == "tile/0/x001/x234/067")
        #expect(try TileID(level: 2, index: 1_234_067, width: 17).path == "tile/2/x001/x234/067.p/17")
        #expect(try TileID(level: 0, index: 0, width: 256).path == "tile/0/000")
        #expect(try TileID(level: 1, index: 5, width: 1).path == "tile/1/005.p/1")
        #expect(try TileID(level: 63, index: 0, width: 1).path == "tile/63/000.p/1")
        #expect(try TileID(level: 0, index: 1000, width: 256).path == "tile/0/x001/000")
        #expect(try EntryBundleID(index: 1_234_067, width: 256).path == "tile/entries/x001/x234/067")
        #expect(try EntryBundleID(index: 7, width: 112).path == "tile/entries/007.p/112")
        // The index spellings of Go's sumdb tile paths (golang.org/x/mod/sumdb/tlog tlog_test.go:
        // `tile/3/5/x123/x456/078.p/2`, `tile/1/0/x003/x057/500`). Those paths also name the tile
        // height, which tlog-tiles fixes at 8 and leaves out, so only the <N>[.p/<W>] part carries over.
        #expect(try TileID(level: 1, index: 123_456_078, width: 2).path == "tile/1/x123/x456/078.p/2")
        #expect(try TileID(level: 0, index: 3_057_500, width: 256).path == "tile/0/x003/x057/500")
    }

    @Test func pathsParseBackAndOnlyInTheirCanonicalSpelling() throws {
        var random = SplitMix64(seed: 39)
        for _ in 0..<300 {
            let level = Int.random(in: 0...6, using: &random)
            let index = UInt64.random(in: 0..<(UInt64.max >> UInt64(8 * (level + 1))), using: &random) >> UInt64.random(in: 0...56, using: &random)
            let width = Bool.random(using: &random) ? 256 : Int.random(in: 1...255, using: &random)
            let tile = try TileID(level: level, index: index, width: width)
            #expect(try TileID(path: tile.path) == tile)
            let bundle = try EntryBundleID(index: index >> 1, width: width)
            #expect(try EntryBundleID(path: bundle.path) == bundle)
        }
        let refused = [
            "tile/0/1", "tile/0/0001", "tile/00/000", "tile/01/000", "tile/64/000", "tile/-1/000",
            "tile/0/001/002", "tile/0/x000/001", "tile/0/x001/x002", "tile/0/x1/002", "tile/0/xx01/002",
            "tile/0/000.p/0", "tile/0/000.p/256", "tile/0/000.p/01", "tile/0/000.p/", "tile/0/000.p",
            "tile/0/000.p/5/6", "tile/0/000/", "tile/0/", "tile/0", "tile/", "tile/data/000",
            "tile/3/5/x123/x456/078", "tile/1/0/x003/x057/500", "tile/3/-1/123/456/078",
            "tile/0/x018/x446/x744/x073/x709/x551/615", "tile/0/x999/x999/x999/x999/x999/x999/999",
            "tile/7/001", "tile/entries/000", " tile/0/000", "tile/0/000 ", "tile/0/+00",
        ]
        for path in refused { #expect(throws: TileError.self, "\(path)") { try TileID(path: path) } }
        for path in ["tile/entries/1", "tile/entries/000.p/256", "tile/entries/", "tile/0/000", "tile/entries/x000/001"] {
            #expect(throws: TileError.self, "\(path)") { try EntryBundleID(path: path) }
        }
        #expect(throws: TileError.self) { try TileID(level: 0, index: 0, width: 0) }
        #expect(throws: TileError.self) { try TileID(level: 0, index: 0, width: 257) }
        #expect(throws: TileError.self) { try TileID(level: 8, index: 1, width: 1) }
    }

    /// "a tree of size 70,000 will be represented by 273 full level 0 tiles, one partial level 0
    /// tile of width 112, one full level 1 tile, one partial level 1 tile of width 17, and one
    /// partial level 2 tile of width 1. [...] a tree of size 256 will be represented by a full
    /// level 0 tile and a partial level 1 tile of width 1."
    @Test func treesConsistOfTheSpecsTiles() {
        let tiles = TileLayout.tiles(treeSize: 70_000)
        #expect(tiles.filter { $0.level == 0 && !$0.isPartial }.count == 273)
        #expect(tiles.filter { $0.isPartial }.map { "\($0.level):\($0.width)" } == ["0:112", "1:17", "2:1"])
        #expect(tiles.filter { $0.level == 1 && !$0.isPartial }.map(\.index) == [0])
        #expect(tiles.count == 273 + 1 + 1 + 1 + 1)
        #expect(TileLayout.tiles(treeSize: 256).map(\.path) == ["tile/0/000", "tile/1/000.p/1"])
        #expect(TileLayout.tiles(treeSize: 0).isEmpty)
        #expect(TileLayout.partialTiles(treeSize: 70_000).map(\.path) == ["tile/0/273.p/112", "tile/1/001.p/17", "tile/2/000.p/1"])
        #expect(TileLayout.levelCount(treeSize: .max) == 8)
        #expect(TileLayout.partialTiles(treeSize: .max).count == 8)
    }

    @Test func growthAddsOnlyNewTiles() {
        var random = SplitMix64(seed: 6962)
        for _ in 0..<200 {
            let old = UInt64.random(in: 0...70_000, using: &random)
            let new = old + UInt64.random(in: 0...2_000, using: &random)
            let before = Set(TileLayout.tiles(treeSize: old))
            let after = Set(TileLayout.tiles(treeSize: new))
            #expect(Set(TileLayout.tilesAdded(from: old, to: new)) == after.subtracting(before), "\(old) to \(new)")
        }
        #expect(TileLayout.entryBundlesAdded(from: 250, to: 600).map(\.path) == ["tile/entries/000", "tile/entries/001", "tile/entries/002.p/88"])
    }

    @Test func storedHashesAreFoundInTheirTiles() throws {
        // Height 9 = level 1 plus one level inside the tile: node 3 covers level-1 hashes 6 and 7.
        let (tile, positions) = try TileLayout.location(of: MerkleNodeID(height: 9, index: 3), treeSize: 70_000)
        #expect(tile.path == "tile/1/000")
        #expect(positions == 6..<8)
        let (edge, edgePositions) = try TileLayout.location(of: MerkleNodeID(height: 0, index: 69_999), treeSize: 70_000)
        #expect(edge.path == "tile/0/273.p/112")
        #expect(edgePositions == 111..<112)
        #expect(throws: TileError.self) { try TileLayout.location(of: MerkleNodeID(height: 0, index: 70_000), treeSize: 70_000) }
        #expect(throws: TileError.self) { try TileLayout.location(of: MerkleNodeID(height: 4, index: 4375), treeSize: 70_000) }
        #expect(throws: TileError.self) { try TileLayout.location(of: MerkleNodeID(height: 64, index: 0), treeSize: .max) }
        #expect(throws: TileError.self) { try TileLayout.location(of: MerkleNodeID(height: 1, index: .max), treeSize: .max) }
        #expect(try TileLayout.entryBundle(holding: 69_999, treeSize: 70_000).path == "tile/entries/273.p/112")
        #expect(try TileLayout.entryBundle(holding: 255, treeSize: 70_000).path == "tile/entries/000")
    }

    @Test func tileReadersRefuseWrongSizesAndSayWhatIsMissing() throws {
        var reader = TileHashReader(treeSize: 300)
        let partial = try TileID(level: 0, index: 1, width: 44)
        #expect(throws: TileError.wrongTileSize(path: "tile/0/001.p/44", expectedBytes: 1408, actualBytes: 1407)) {
            try reader.add(partial, bytes: Data(count: 1407))
        }
        #expect(throws: TileError.missingTile(path: "tile/0/001.p/44")) { try reader.hash(of: MerkleNodeID(height: 0, index: 299)) }
        // The full tile serves where the tree has the partial one: same hashes, same positions.
        let leaves = entries(count: 512).map { MerkleTree.leafHash($0) }
        try reader.add(try TileID(level: 0, index: 1, width: 256), bytes: TileHashReader.bytes(of: leaves[256...]))
        #expect(try reader.hash(of: MerkleNodeID(height: 0, index: 299)) == leaves[299])
        #expect(try reader.hash(of: MerkleNodeID(height: 5, index: 8)) == MerkleTree.rootHash(ofLeafHashes: leaves[256..<288]))
        #expect(throws: TileError.self) { try reader.hash(of: MerkleNodeID(height: 6, index: 4)) }
    }

    @Test func entryBundlesRoundTripAndRefuseDamage() throws {
        let bundle = try EntryBundleID(index: 0, width: 3)
        let items = [Data(), Data([1]), Data(repeating: 7, count: 300)]
        let bytes = try EntryBundle.encode(items)
        #expect(bytes.prefix(5) == Data([0, 0, 0, 1, 1]))
        #expect(bytes[5] == 0x01 && bytes[6] == 0x2C)
        #expect(try EntryBundle.decode(bytes, as: bundle) == items)
        #expect(throws: TileError.self) { try EntryBundle.decode(bytes.dropLast(), as: bundle) }
        #expect(throws: TileError.self) { try EntryBundle.decode(bytes + [0], as: bundle) }
        #expect(throws: TileError.self) { try EntryBundle.decode(bytes + [0, 0], as: bundle) }
        #expect(throws: TileError.self) { try EntryBundle.decode(bytes, as: try EntryBundleID(index: 0, width: 4)) }
        #expect(throws: TileError.self) { try EntryBundle.decode(bytes, as: try EntryBundleID(index: 0, width: 2)) }
        #expect(throws: TileError.self) { try EntryBundle.decode(Data([0xff, 0xff, 1]), as: try EntryBundleID(index: 0, width: 1)) }
        #expect(throws: TileError.entryTooLarge(index: 10, byteCount: 65536)) {
            try EntryBundle.encode([Data(count: 65536)], firstIndex: 10)
        }
        #expect(try EntryBundle.encode([Data(count: 65535)]).count == 65537)
    }
}
