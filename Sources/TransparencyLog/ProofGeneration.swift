/// A complete subtree of the Merkle tree: the `2^height` leaves starting at `index << height`.
/// Height 0 is a leaf. These are the only hashes a log stores; every other node (at the ragged
/// right edge of a tree) is computed from them.
public struct MerkleNodeID: Hashable, Sendable, CustomStringConvertible {
    public let height: Int
    public let index: UInt64

    public init(height: Int, index: UInt64) {
        self.height = height
        self.index = index
    }

    /// The leaves it covers, or nil when they would not fit in 64 bits.
    public var leafRange: Range<UInt64>? {
        guard height < UInt64.bitWidth, index <= (UInt64.max >> UInt64(height)) - 1 else { return nil }
        let start = index << UInt64(height)
        return start..<(start + (1 << UInt64(height)))
    }

    public var description: String { "node(height \(height), index \(index))" }
}

/// Where a proof's generator gets stored hashes: a database, a tile store, a test's array.
public protocol MerkleNodeReader {
    /// The hash of the complete subtree `node`; throws when it is not stored (yet).
    func hash(of node: MerkleNodeID) throws -> MerkleHash
}

/// Producing RFC 6962 §2.1.1 inclusion (PATH) and §2.1.2 consistency (PROOF) proofs from stored
/// complete-subtree hashes, so that a server can answer with proofs and a client holding tiles can
/// make its own.
public enum MerkleProofGenerator {
    /// The audit path of entry `index` in the tree of size `treeSize`, deepest sibling first.
    public static func inclusionProof(index: UInt64, treeSize: UInt64, reader: some MerkleNodeReader) throws -> [MerkleHash] {
        guard index < treeSize else { throw MerkleProofError.indexOutOfRange(index: index, treeSize: treeSize) }
        return try ProofPlan.inclusion(index: index, treeSize: treeSize).map { try ProofPlan.hash(of: $0, reader: reader) }
    }

    /// The proof that the tree of `newSize` extends the one of `oldSize`. Empty when the sizes
    /// are equal or the old tree is empty (as `MerkleProof.verifyConsistency` expects).
    public static func consistencyProof(oldSize: UInt64, newSize: UInt64, reader: some MerkleNodeReader) throws -> [MerkleHash] {
        guard oldSize <= newSize else { throw MerkleProofError.sizesOutOfOrder(oldSize: oldSize, newSize: newSize) }
        return try ProofPlan.consistency(oldSize: oldSize, newSize: newSize).map { try ProofPlan.hash(of: $0, reader: reader) }
    }

    /// The root of the tree of size `treeSize` from its complete subtrees (at most 64 reads).
    public static func rootHash(treeSize: UInt64, reader: some MerkleNodeReader) throws -> MerkleHash {
        guard treeSize > 0 else { return MerkleTree.emptyRoot }
        return try ProofPlan.hash(of: ProofPlan.completeSubtrees(from: 0, to: treeSize), reader: reader)
    }
}

/// Which stored nodes each element of a proof is made of, without reading any: the generator
/// reads them, and a tile client maps them to the tiles it must fetch.
public enum ProofPlan {
    /// One proof element per item: the complete subtrees, left to right, whose RFC 6962 hash is
    /// the element (a single node except at the tree's ragged right edge).
    public static func inclusion(index: UInt64, treeSize: UInt64) -> [[MerkleNodeID]] {
        guard index < treeSize else { return [] }
        var topDown: [[MerkleNodeID]] = []
        var low: UInt64 = 0
        var high = treeSize
        while high - low > 1 {
            let split = low + largestPowerOfTwo(below: high - low)
            if index < split {
                topDown.append(completeSubtrees(from: split, to: high))
                high = split
            } else {
                topDown.append(completeSubtrees(from: low, to: split))
                low = split
            }
        }
        return topDown.reversed()
    }

    /// RFC 6962 §2.1.2 SUBPROOF, as for `inclusion`. Empty when `oldSize` is 0 or not below
    /// `newSize`.
    public static func consistency(oldSize: UInt64, newSize: UInt64) -> [[MerkleNodeID]] {
        guard oldSize > 0, oldSize < newSize else { return [] }
        var topDown: [[MerkleNodeID]] = []
        var low: UInt64 = 0
        var high = newSize
        // Whether the subtree in hand is still the old tree's own root (whose hash the verifier
        // has, so it is left out) rather than a piece of it.
        var wholeOldTree = true
        while oldSize != high {
            let split = low + largestPowerOfTwo(below: high - low)
            if oldSize <= split {
                topDown.append(completeSubtrees(from: split, to: high))
                high = split
            } else {
                topDown.append(completeSubtrees(from: low, to: split))
                low = split
                wholeOldTree = false
            }
        }
        if !wholeOldTree { topDown.append(completeSubtrees(from: low, to: high)) }
        return topDown.reversed()
    }

    /// The complete subtrees, biggest first, that an RFC 6962 subtree over leaves `start..<end`
    /// splits into (its start is a multiple of a power of two at least its size, as for every
    /// subtree a proof names).
    public static func completeSubtrees(from start: UInt64, to end: UInt64) -> [MerkleNodeID] {
        var nodes: [MerkleNodeID] = []
        var position = start
        while position < end {
            // The biggest aligned block at `position` that ends by `end`.
            var height = position == 0 ? 63 : position.trailingZeroBitCount
            while height > 0 && (UInt64(1) << UInt64(height)) > end - position { height -= 1 }
            nodes.append(MerkleNodeID(height: height, index: position >> UInt64(height)))
            position += UInt64(1) << UInt64(height)
        }
        return nodes
    }

    /// The RFC 6962 hash of the subtree made of `nodes`: the last two joined first, since each
    /// split puts the complete (power-of-two) part on the left.
    static func hash(of nodes: [MerkleNodeID], reader: some MerkleNodeReader) throws -> MerkleHash {
        guard var hash = try nodes.last.map({ try reader.hash(of: $0) }) else { return MerkleTree.emptyRoot }
        for node in nodes.dropLast().reversed() {
            hash = MerkleTree.nodeHash(try reader.hash(of: node), hash)
        }
        return hash
    }

    /// The largest power of two strictly below `count` (count ≥ 2).
    static func largestPowerOfTwo(below count: UInt64) -> UInt64 {
        UInt64(1) << UInt64(UInt64.bitWidth - 1 - (count - 1).leadingZeroBitCount)
    }
}
