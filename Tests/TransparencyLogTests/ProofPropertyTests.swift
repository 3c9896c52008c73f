import Foundation
import Testing
import TestTiers
import TransparencyLog

/// The library against the RFC's recursive definitions (Support.swift) on seeded random trees,
/// and every proof against hostile changes: each must be refused with an error, never a trap.
@Suite(.tags(.unit)) struct ProofPropertyTests {
    static let leafHashes = entries(count: 300).map { MerkleTree.leafHash($0) }
    static let tree = InMemoryTree(leafHashes: leafHashes)

    @Test func rootsAndProofsEqualTheRecursiveDefinitions() throws {
        var random = SplitMix64(seed: 0x7C2_5EED)
        for _ in 0..<200 {
            let size = Int.random(in: 1...Self.leafHashes.count, using: &random)
            let leaves = Self.leafHashes[..<size]
            let root = NaiveMerkle.root(leaves)
            #expect(MerkleTree.rootHash(ofLeafHashes: leaves) == root)
            #expect(try MerkleProofGenerator.rootHash(treeSize: UInt64(size), reader: Self.tree) == root)

            let index = Int.random(in: 0..<size, using: &random)
            let path = try MerkleProofGenerator.inclusionProof(index: UInt64(index), treeSize: UInt64(size), reader: Self.tree)
            #expect(path == NaiveMerkle.path(index, leaves), "inclusion \(index) of \(size)")
            #expect(path.count == MerkleProof.inclusionProofLength(index: UInt64(index), treeSize: UInt64(size)))
            try MerkleProof.verifyInclusion(
                leafHash: Self.leafHashes[index], index: UInt64(index), treeSize: UInt64(size), proof: path, rootHash: root)

            let oldSize = Int.random(in: 0...size, using: &random)
            let proof = try MerkleProofGenerator.consistencyProof(oldSize: UInt64(oldSize), newSize: UInt64(size), reader: Self.tree)
            #expect(proof == NaiveMerkle.consistency(oldSize, leaves), "consistency \(oldSize) to \(size)")
            try MerkleProof.verifyConsistency(
                oldSize: UInt64(oldSize), newSize: UInt64(size),
                oldRoot: NaiveMerkle.root(Self.leafHashes[..<oldSize]), newRoot: root, proof: proof)
        }
    }

    /// Every inclusion proof of every leaf in trees up to 40: each verifies, and no flipped bit,
    /// dropped, added or reordered hash, or neighbouring index or size passes.
    @Test func inclusionProofsRefuseEveryTampering() throws {
        for size in 1...40 {
            let root = NaiveMerkle.root(Self.leafHashes[..<size])
            for index in 0..<size {
                let proof = NaiveMerkle.path(index, Self.leafHashes[..<size])
                let leaf = Self.leafHashes[index]
                func refused(_ proof: [MerkleHash], leaf: MerkleHash = leaf, index: UInt64 = UInt64(index), root: MerkleHash = root) -> Bool {
                    (try? MerkleProof.verifyInclusion(leafHash: leaf, index: index, treeSize: UInt64(size), proof: proof, rootHash: root)) == nil
                }
                #expect(!refused(proof))
                #expect(refused(proof, leaf: Self.leafHashes[(index + 1) % 300]))
                // A neighbour's index swaps left and right (or leaves the tree).
                #expect(refused(proof, index: UInt64(index) ^ 1))
                #expect(refused(proof, root: Self.leafHashes[299]))
                #expect(refused(proof + [root]))
                #expect(refused([root] + proof))
                if !proof.isEmpty {
                    #expect(refused(Array(proof.dropLast())))
                    #expect(refused(Array(proof.dropFirst())))
                    var flipped = proof
                    flipped[flipped.count / 2] = Self.leafHashes[298]
                    #expect(refused(flipped))
                }
                if proof.count > 1 { #expect(refused(proof.reversed())) }
            }
        }
    }

    @Test func consistencyProofsRefuseEveryTampering() throws {
        for newSize in 1...33 {
            let newRoot = NaiveMerkle.root(Self.leafHashes[..<newSize])
            for oldSize in 1...newSize {
                let oldRoot = NaiveMerkle.root(Self.leafHashes[..<oldSize])
                let proof = NaiveMerkle.consistency(oldSize, Self.leafHashes[..<newSize])
                func refused(_ proof: [MerkleHash], old: UInt64 = UInt64(oldSize), new: UInt64 = UInt64(newSize), oldRoot: MerkleHash = oldRoot, newRoot: MerkleHash = newRoot) -> Bool {
                    (try? MerkleProof.verifyConsistency(oldSize: old, newSize: new, oldRoot: oldRoot, newRoot: newRoot, proof: proof)) == nil
                }
                #expect(!refused(proof), "\(oldSize) to \(newSize)")
                #expect(refused(proof, newRoot: Self.leafHashes[299]))
                if oldSize < newSize {
                    #expect(refused(proof, oldRoot: Self.leafHashes[299]))
                    #expect(refused(proof, old: UInt64(newSize), new: UInt64(oldSize), oldRoot: newRoot, newRoot: oldRoot))
                    #expect(refused(proof + [newRoot]))
                    #expect(refused(Array(proof.dropLast())))
                    var flipped = proof
                    flipped[0] = Self.leafHashes[297]
                    #expect(refused(flipped))
                } else {
                    #expect(refused([oldRoot]), "equal sizes take an empty proof")
                }
            }
        }
    }

    @Test func hostileSizesAndIndexesThrowTypedErrors() throws {
        let anything = Self.leafHashes[0]
        #expect(throws: MerkleProofError.indexOutOfRange(index: 0, treeSize: 0)) {
            try MerkleProof.verifyInclusion(leafHash: anything, index: 0, treeSize: 0, proof: [], rootHash: anything)
        }
        #expect(throws: MerkleProofError.indexOutOfRange(index: 5, treeSize: 5)) {
            try MerkleProof.verifyInclusion(leafHash: anything, index: 5, treeSize: 5, proof: [], rootHash: anything)
        }
        #expect(throws: MerkleProofError.indexOutOfRange(index: .max, treeSize: .max)) {
            try MerkleProof.verifyInclusion(leafHash: anything, index: .max, treeSize: .max, proof: [], rootHash: anything)
        }
        #expect(throws: MerkleProofError.wrongProofLength(expected: 64, actual: 1)) {
            try MerkleProof.verifyInclusion(leafHash: anything, index: 0, treeSize: .max, proof: [anything], rootHash: anything)
        }
        #expect(throws: MerkleProofError.wrongProofLength(expected: 3, actual: 0)) {
            try MerkleProof.verifyInclusion(leafHash: anything, index: 0, treeSize: 8, proof: [], rootHash: anything)
        }
        #expect(throws: MerkleProofError.sizesOutOfOrder(oldSize: 9, newSize: 8)) {
            try MerkleProof.verifyConsistency(oldSize: 9, newSize: 8, oldRoot: anything, newRoot: anything, proof: [])
        }
        #expect(throws: MerkleProofError.wrongProofLength(expected: 0, actual: 1)) {
            try MerkleProof.verifyConsistency(oldSize: 0, newSize: 8, oldRoot: anything, newRoot: anything, proof: [anything])
        }
        #expect(throws: MerkleProofError.rootMismatch(expected: anything, computed: Self.leafHashes[1])) {
            try MerkleProof.verifyConsistency(oldSize: 0, newSize: 0, oldRoot: anything, newRoot: Self.leafHashes[1], proof: [])
        }
        // The empty tree is a prefix of every tree, and a tree of itself.
        try MerkleProof.verifyConsistency(oldSize: 0, newSize: 8, oldRoot: MerkleTree.emptyRoot, newRoot: anything, proof: [])
        try MerkleProof.verifyConsistency(oldSize: 7, newSize: 7, oldRoot: anything, newRoot: anything, proof: [])
        // Huge sizes: the length check answers before any loop runs long.
        #expect(throws: MerkleProofError.self) {
            try MerkleProof.verifyConsistency(oldSize: 1, newSize: .max, oldRoot: anything, newRoot: anything, proof: [anything])
        }
        #expect(throws: MerkleProofError.self) {
            _ = try MerkleProofGenerator.inclusionProof(index: 3, treeSize: 3, reader: Self.tree)
        }
        #expect(throws: MerkleProofError.self) {
            _ = try MerkleProofGenerator.consistencyProof(oldSize: 4, newSize: 3, reader: Self.tree)
        }
        // A reader without the nodes: its error comes through.
        #expect(throws: InMemoryTree.Missing.self) {
            _ = try MerkleProofGenerator.inclusionProof(index: 3, treeSize: 1000, reader: Self.tree)
        }
    }
}
