/// Why a proof was refused, with the numbers a log message or a test needs to say what was wrong.
public enum MerkleProofError: Error, Equatable, Sendable, CustomStringConvertible {
    /// An inclusion proof for an entry the tree does not hold (this includes every index of the
    /// empty tree).
    case indexOutOfRange(index: UInt64, treeSize: UInt64)
    /// A consistency proof from a bigger tree to a smaller one.
    case sizesOutOfOrder(oldSize: UInt64, newSize: UInt64)
    /// A proof whose number of hashes is not the one its sizes and index call for.
    case wrongProofLength(expected: Int, actual: Int)
    /// The proof recomputes a root other than the one it is checked against.
    case rootMismatch(expected: MerkleHash, computed: MerkleHash)
    /// The consistency proof recomputes an old root other than the one the verifier holds.
    case oldRootMismatch(expected: MerkleHash, computed: MerkleHash)

    public var description: String {
        switch self {
        case let .indexOutOfRange(index, treeSize): "entry \(index) is not in a tree of size \(treeSize)"
        case let .sizesOutOfOrder(oldSize, newSize): "tree size \(newSize) cannot extend the bigger size \(oldSize)"
        case let .wrongProofLength(expected, actual): "proof has \(actual) hashes where \(expected) are needed"
        case let .rootMismatch(expected, computed): "proof leads to root \(computed), not \(expected)"
        case let .oldRootMismatch(expected, computed): "proof leads to old root \(computed), not \(expected)"
        }
    }
}

/// Checking RFC 9162 inclusion and consistency proofs (§2.1.3.2 and §2.1.4.2). Every input may
/// be hostile: sizes, indexes and proof lengths are checked before any hashing, and nothing traps.
public enum MerkleProof {
    /// Succeeds when `proof` shows that the leaf with hash `leafHash` is entry `index` of the tree
    /// of size `treeSize` whose root is `rootHash`.
    public static func verifyInclusion(
        leafHash: MerkleHash, index: UInt64, treeSize: UInt64, proof: [MerkleHash], rootHash: MerkleHash
    ) throws(MerkleProofError) {
        let computed = try rootFromInclusionProof(leafHash: leafHash, index: index, treeSize: treeSize, proof: proof)
        guard computed == rootHash else { throw .rootMismatch(expected: rootHash, computed: computed) }
    }

    /// The root that `proof` leads to from `leafHash` at `index` (RFC 9162 §2.1.3.2, steps 1-5).
    public static func rootFromInclusionProof(
        leafHash: MerkleHash, index: UInt64, treeSize: UInt64, proof: [MerkleHash]
    ) throws(MerkleProofError) -> MerkleHash {
        guard index < treeSize else { throw .indexOutOfRange(index: index, treeSize: treeSize) }
        let expected = inclusionProofLength(index: index, treeSize: treeSize)
        guard proof.count == expected else { throw .wrongProofLength(expected: expected, actual: proof.count) }
        var fn = index
        var sn = treeSize - 1
        var hash = leafHash
        for sibling in proof {
            // The length check above makes sn reach 0 exactly at the last hash; kept as a guard.
            guard sn > 0 else { throw .wrongProofLength(expected: expected, actual: proof.count) }
            if fn & 1 == 1 || fn == sn {
                hash = MerkleTree.nodeHash(sibling, hash)
                // A left child that is the last of its level has no sibling: climb until it is a
                // right child (or the leftmost node).
                while fn & 1 == 0 && fn != 0 {
                    fn >>= 1
                    sn >>= 1
                }
            } else {
                hash = MerkleTree.nodeHash(hash, sibling)
            }
            fn >>= 1
            sn >>= 1
        }
        guard sn == 0 else { throw .wrongProofLength(expected: expected, actual: proof.count) }
        return hash
    }

    /// Succeeds when `proof` shows that the tree of size `newSize` and root `newRoot` has the tree
    /// of size `oldSize` and root `oldRoot` as its prefix. Equal sizes need an empty proof and
    /// equal roots; the empty tree is a prefix of every tree, with an empty proof.
    public static func verifyConsistency(
        oldSize: UInt64, newSize: UInt64, oldRoot: MerkleHash, newRoot: MerkleHash, proof: [MerkleHash]
    ) throws(MerkleProofError) {
        guard oldSize <= newSize else { throw .sizesOutOfOrder(oldSize: oldSize, newSize: newSize) }
        if oldSize == newSize || oldSize == 0 {
            guard proof.isEmpty else { throw .wrongProofLength(expected: 0, actual: proof.count) }
            if oldSize == newSize, oldRoot != newRoot { throw .rootMismatch(expected: oldRoot, computed: newRoot) }
            return
        }
        let expected = ProofPlan.consistency(oldSize: oldSize, newSize: newSize).count
        guard proof.count == expected else { throw .wrongProofLength(expected: expected, actual: proof.count) }

        // RFC 9162 §2.1.4.2. When the old tree is a complete subtree of the new one, the proof
        // leaves out its root (the verifier has it): put it back in front.
        var path = proof[...]
        let oldIsPowerOfTwo = oldSize & (oldSize - 1) == 0
        var fn = oldSize - 1
        var sn = newSize - 1
        while fn & 1 == 1 {
            fn >>= 1
            sn >>= 1
        }
        var oldHash: MerkleHash
        if oldIsPowerOfTwo {
            oldHash = oldRoot
        } else {
            oldHash = path.removeFirst()
        }
        var newHash = oldHash
        for node in path {
            guard sn > 0 else { throw .wrongProofLength(expected: expected, actual: proof.count) }
            if fn & 1 == 1 || fn == sn {
                oldHash = MerkleTree.nodeHash(node, oldHash)
                newHash = MerkleTree.nodeHash(node, newHash)
                while fn & 1 == 0 && fn != 0 {
                    fn >>= 1
                    sn >>= 1
                }
            } else {
                newHash = MerkleTree.nodeHash(newHash, node)
            }
            fn >>= 1
            sn >>= 1
        }
        guard sn == 0 else { throw .wrongProofLength(expected: expected, actual: proof.count) }
        guard oldHash == oldRoot else { throw .oldRootMismatch(expected: oldRoot, computed: oldHash) }
        guard newHash == newRoot else { throw .rootMismatch(expected: newRoot, computed: newHash) }
    }

    /// How many hashes the inclusion proof of `index` in a tree of `treeSize` has: one per level
    /// below the point where the paths to `index` and to the last leaf part, plus one per left
    /// sibling above it.
    public static func inclusionProofLength(index: UInt64, treeSize: UInt64) -> Int {
        guard index < treeSize else { return 0 }
        let inner = UInt64.bitWidth - (index ^ (treeSize - 1)).leadingZeroBitCount
        let border = inner >= UInt64.bitWidth ? 0 : (index >> UInt64(inner)).nonzeroBitCount
        return inner + border
    }
}
