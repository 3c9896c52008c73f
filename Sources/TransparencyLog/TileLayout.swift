/// Which tiles and entry bundles a tree of a given size consists of (C2SP tlog-tiles, "Merkle
/// Tree" and "Partial Tiles"), which of them a growth adds, and which a client needs for a proof.
public enum TileLayout {
    /// How many full tiles level `level` has: floor(size / 256^(level+1)).
    public static func fullTileCount(level: Int, treeSize: UInt64) -> UInt64 {
        shifted(treeSize, by: TileID.height * (level + 1))
    }

    /// The width of the partial tile at `level` (0 when there is none): floor(size / 256^level) mod 256.
    public static func partialWidth(level: Int, treeSize: UInt64) -> Int {
        Int(shifted(treeSize, by: TileID.height * level) & 0xff)
    }

    /// The levels that hold any tile: a level exists while size ≥ 256^level.
    public static func levelCount(treeSize: UInt64) -> Int {
        var levels = 0
        while levels <= TileID.maximumLevel, shifted(treeSize, by: TileID.height * levels) > 0 { levels += 1 }
        return levels
    }

    /// The partial tiles at the right edge of the tree, lowest level first: what an appender
    /// needs besides the size, and what changes when the tree grows.
    public static func partialTiles(treeSize: UInt64) -> [TileID] {
        (0..<levelCount(treeSize: treeSize)).compactMap { level in
            let width = partialWidth(level: level, treeSize: treeSize)
            guard width > 0 else { return nil }
            return TileID(validLevel: level, index: fullTileCount(level: level, treeSize: treeSize), width: width)
        }
    }

    /// Every tile of the tree, full and partial, level by level. Meant for small trees and tests:
    /// a big tree is served from what `tilesAdded` listed at each growth.
    public static func tiles(treeSize: UInt64) -> [TileID] {
        tilesAdded(from: 0, to: treeSize)
    }

    /// The tiles a tree of `newSize` has and one of `oldSize` does not: the full tiles completed
    /// and the new partial tiles (a wider partial tile is a new file beside the narrower one, which
    /// clients of older checkpoints may still ask for). Empty when `newSize` ≤ `oldSize`.
    public static func tilesAdded(from oldSize: UInt64, to newSize: UInt64) -> [TileID] {
        guard newSize > oldSize else { return [] }
        var tiles: [TileID] = []
        for level in 0..<levelCount(treeSize: newSize) {
            let oldFull = fullTileCount(level: level, treeSize: oldSize)
            let newFull = fullTileCount(level: level, treeSize: newSize)
            for index in oldFull..<newFull {
                tiles.append(TileID(validLevel: level, index: index, width: TileID.fullWidth))
            }
            let width = partialWidth(level: level, treeSize: newSize)
            let unchanged = newFull == oldFull && width == partialWidth(level: level, treeSize: oldSize)
            if width > 0, !unchanged {
                tiles.append(TileID(validLevel: level, index: newFull, width: width))
            }
        }
        return tiles
    }

    /// The entry bundles a tree of `newSize` has and one of `oldSize` does not (see `tilesAdded`).
    public static func entryBundlesAdded(from oldSize: UInt64, to newSize: UInt64) -> [EntryBundleID] {
        tilesAdded(from: oldSize, to: newSize).filter { $0.level == 0 }.map {
            // Level-0 tile coordinates are valid bundle coordinates.
            EntryBundleID(validIndex: $0.index, width: $0.width)
        }
    }

    /// The entry bundle holding entry `index` of a tree of `treeSize`, at the width that tree has.
    public static func entryBundle(holding index: UInt64, treeSize: UInt64) throws(TileError) -> EntryBundleID {
        guard index < treeSize else { throw .nodeNotInTree(MerkleNodeID(height: 0, index: index), treeSize: treeSize) }
        let tile = try location(of: MerkleNodeID(height: 0, index: index), treeSize: treeSize).tile
        return EntryBundleID(validIndex: tile.index, width: tile.width)
    }

    /// Where a complete subtree's hash is found: the tile of a tree of `treeSize` that holds the
    /// `2^(height mod 8)` hashes at level `height / 8` whose root it is, and their positions.
    public static func location(of node: MerkleNodeID, treeSize: UInt64) throws(TileError) -> (tile: TileID, positions: Range<Int>) {
        guard node.height >= 0, let leaves = node.leafRange, leaves.upperBound <= treeSize else {
            throw .nodeNotInTree(node, treeSize: treeSize)
        }
        let level = node.height / TileID.height
        let heightInTile = node.height % TileID.height
        let firstHash = node.index << UInt64(heightInTile)
        let tileIndex = firstHash >> UInt64(TileID.height)
        let start = Int(firstHash & 0xff)
        let width = tileIndex < fullTileCount(level: level, treeSize: treeSize)
            ? TileID.fullWidth : partialWidth(level: level, treeSize: treeSize)
        return (TileID(validLevel: level, index: tileIndex, width: width), start..<(start + (1 << heightInTile)))
    }

    /// The tiles a client of a tree of `treeSize` fetches to prove that entry `index` is in it.
    public static func tilesForInclusion(index: UInt64, treeSize: UInt64) throws(TileError) -> Set<TileID> {
        guard index < treeSize else { throw .nodeNotInTree(MerkleNodeID(height: 0, index: index), treeSize: treeSize) }
        return try tiles(holding: ProofPlan.inclusion(index: index, treeSize: treeSize).joined(), treeSize: treeSize)
    }

    /// The tiles a client holding a tree of `oldSize` fetches to prove that one of `newSize`
    /// extends it (every node of the proof is in the newer tree).
    public static func tilesForConsistency(oldSize: UInt64, newSize: UInt64) throws(TileError) -> Set<TileID> {
        try tiles(holding: ProofPlan.consistency(oldSize: oldSize, newSize: newSize).joined(), treeSize: newSize)
    }

    /// The tiles from which the root of a tree of `treeSize` is computed: its partial tiles and
    /// the tiles that hold its complete subtrees.
    public static func tilesForRoot(treeSize: UInt64) throws(TileError) -> Set<TileID> {
        try tiles(holding: ProofPlan.completeSubtrees(from: 0, to: treeSize), treeSize: treeSize)
    }

    static func tiles(holding nodes: some Sequence<MerkleNodeID>, treeSize: UInt64) throws(TileError) -> Set<TileID> {
        var tiles = Set<TileID>()
        for node in nodes { tiles.insert(try location(of: node, treeSize: treeSize).tile) }
        return tiles
    }

    /// `value >> bits`, 0 once every bit is shifted out (Swift's `>>` would too, but saying so keeps
    /// the intent visible where levels reach 8 and beyond).
    static func shifted(_ value: UInt64, by bits: Int) -> UInt64 {
        bits >= UInt64.bitWidth ? 0 : value >> UInt64(bits)
    }
}

extension EntryBundleID {
    init(validIndex index: UInt64, width: Int) {
        self.index = index
        self.width = width
    }
}
