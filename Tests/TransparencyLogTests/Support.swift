import Foundation
@testable import TransparencyLog

/// A small seeded generator (SplitMix64) so that property tests replay exactly; TransparencyLog
/// depends on nothing of Tracer, so it does not borrow TracerCore's.
struct SplitMix64: RandomNumberGenerator {
    private var state: UInt64

    init(seed: UInt64) { state = seed }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var mixed = state
        mixed = (mixed ^ (mixed >> 30)) &* 0xBF58_476D_1CE4_E5B9
        mixed = (mixed ^ (mixed >> 27)) &* 0x94D0_49BB_1331_11EB
        return mixed ^ (mixed >> 31)
    }
}

/// The RFC 6962 §2.1 definitions written as recursively as the RFC states them: the reference
/// the library's iterative code is compared with.
enum NaiveMerkle {
    static func root(_ leaves: ArraySlice<MerkleHash>) -> MerkleHash {
        if leaves.isEmpty { return MerkleTree.emptyRoot }
        if leaves.count == 1 { return leaves.first! }
        let split = leaves.startIndex + largestPowerOfTwo(below: leaves.count)
        return MerkleTree.nodeHash(root(leaves[..<split]), root(leaves[split...]))
    }

    /// PATH(m, D[n]).
    static func path(_ index: Int, _ leaves: ArraySlice<MerkleHash>) -> [MerkleHash] {
        if leaves.count <= 1 { return [] }
        let k = largestPowerOfTwo(below: leaves.count)
        let split = leaves.startIndex + k
        if index < k { return path(index, leaves[..<split]) + [root(leaves[split...])] }
        return path(index - k, leaves[split...]) + [root(leaves[..<split])]
    }

    /// PROOF(m, D[n]) = SUBPROOF(m, D[n], true).
    static func consistency(_ oldSize: Int, _ leaves: ArraySlice<MerkleHash>) -> [MerkleHash] {
        guard oldSize > 0, oldSize < leaves.count else { return [] }
        return subproof(oldSize, leaves, wholeOldTree: true)
    }

    private static func subproof(_ m: Int, _ leaves: ArraySlice<MerkleHash>, wholeOldTree: Bool) -> [MerkleHash] {
        if m == leaves.count { return wholeOldTree ? [] : [root(leaves)] }
        let k = largestPowerOfTwo(below: leaves.count)
        let split = leaves.startIndex + k
        if m <= k { return subproof(m, leaves[..<split], wholeOldTree: wholeOldTree) + [root(leaves[split...])] }
        return subproof(m - k, leaves[split...], wholeOldTree: false) + [root(leaves[..<split])]
    }

    static func largestPowerOfTwo(below count: Int) -> Int {
        var power = 1
        while power * 2 < count { power *= 2 }
        return power
    }
}

/// Every complete subtree hash of a tree held in memory: the reader a test hands to the proof
/// generator.
struct InMemoryTree: MerkleNodeReader {
    /// `levels[h][i]` is node (h, i).
    let levels: [[MerkleHash]]

    init(leafHashes: [MerkleHash]) {
        var levels = [leafHashes]
        while let below = levels.last, below.count > 1 {
            levels.append(stride(from: 0, to: below.count - 1, by: 2).map { MerkleTree.nodeHash(below[$0], below[$0 + 1]) })
        }
        self.levels = levels
    }

    struct Missing: Error {}

    func hash(of node: MerkleNodeID) throws -> MerkleHash {
        guard node.height < levels.count, node.index < UInt64(levels[node.height].count) else { throw Missing() }
        return levels[node.height][Int(node.index)]
    }
}

func hash(_ hex: String) -> MerkleHash { MerkleHash(hex: hex)! }

func entries(count: Int, from start: Int = 0) -> [Data] {
    (start..<(start + count)).map { Data("entry \($0)".utf8) }
}
