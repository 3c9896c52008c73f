import Foundation

/// Stored hashes read from hash tiles a client fetched, for a tree of a known size: hand it to
/// `MerkleProofGenerator` to compute a root or a proof locally, then check that with
/// `MerkleProof`. The tiles themselves are untrusted; a wrong one only yields a proof that fails.
public struct TileHashReader: MerkleNodeReader, Sendable {
    public let treeSize: UInt64
    /// By level and index; a wider tile than the tree needs (the full tile where the tree has a
    /// partial one) holds the same hashes at the same positions, so it serves as well.
    private var tiles: [TileKey: [MerkleHash]] = [:]

    private struct TileKey: Hashable, Sendable {
        let level: Int
        let index: UInt64
    }

    public init(treeSize: UInt64) {
        self.treeSize = treeSize
    }

    /// Adds a tile's bytes, checked against its width.
    public mutating func add(_ tile: TileID, bytes: some DataProtocol) throws(TileError) {
        guard bytes.count == tile.byteCount else {
            throw .wrongTileSize(path: tile.path, expectedBytes: tile.byteCount, actualBytes: bytes.count)
        }
        let key = TileKey(level: tile.level, index: tile.index)
        if let held = tiles[key], held.count >= tile.width { return }
        tiles[key] = Self.hashes(in: bytes, count: tile.width)
    }

    public func hash(of node: MerkleNodeID) throws -> MerkleHash {
        let (tile, positions) = try TileLayout.location(of: node, treeSize: treeSize)
        guard let hashes = tiles[TileKey(level: tile.level, index: tile.index)], hashes.count >= positions.upperBound else {
            throw TileError.missingTile(path: tile.path)
        }
        return MerkleTree.rootHash(ofLeafHashes: hashes[positions])
    }

    /// Splits tile bytes (already checked to hold `count` hashes) into hashes.
    static func hashes(in bytes: some DataProtocol, count: Int) -> [MerkleHash] {
        let contiguous = Array(bytes)
        return contiguous.withUnsafeBytes { buffer in
            (0..<count).map { MerkleHash(unsafeReadingFrom: buffer, at: $0 * MerkleHash.byteCount) }
        }
    }

    /// The bytes of a tile holding `hashes`.
    static func bytes(of hashes: some Collection<MerkleHash>) -> Data {
        var data = Data(capacity: hashes.count * MerkleHash.byteCount)
        for hash in hashes { hash.withUnsafeBytes { data.append(contentsOf: $0) } }
        return data
    }
}
