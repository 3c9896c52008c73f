import Foundation
import Testing
import TestTiers
import TransparencyLog

/// Known-answer tests with the vectors Certificate Transparency's tests have used since RFC 6962,
/// as kept by transparency-dev/merkle (commit 417fb0c3): the eight leaf inputs and the roots of
/// the trees of sizes 0 to 8 are testonly/constants.go; the proofs are the "happy-path" probes
/// of testdata/inclusion/{0..4} and testdata/consistency/{0..4}.
@Suite(.tags(.unit)) struct MerkleVectorTests {
    static let leafInputs: [[UInt8]] = [
        [], [0x00], [0x10], [0x20, 0x21], [0x30, 0x31], [0x40, 0x41, 0x42, 0x43],
        [0x50, 0x51, 0x52, 0x53, 0x54, 0x55, 0x56, 0x57],
        [0x60, 0x61, 0x62, 0x63, 0x64, 0x65, 0x66, 0x67, 0x68, 0x69, 0x6a, 0x6b, 0x6c, 0x6d, 0x6e, 0x6f],
    ]

    /// testonly.NodeHashes()[0]: the leaf hashes.
    static let leafHashes = [
        "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
        "96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
        "0298d122906dcfc10892cb53a73992fc5b9f493ea4c9badb27b791b4127a7fe7",
        "07506a85fd9dd2f120eb694f86011e5bb4662e5c415a62917033d4a9624487e7",
        "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
        "4271a26be0d8a84f0bd54c8c302e7cb3a3b5d1fa6780a40bcce2873477dab658",
        "b08693ec2e721597130641e8211e7eedccb4c26413963eee6c1e2ed16ffb1a5f",
        "46f6ffadd3d06a09ff3c5860d2755c8b9819db7df44251788c7d8e3180de8eb1",
    ].map(hash)

    /// testonly.RootHashes(): index = tree size.
    static let roots = [
        "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
        "fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
        "aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77",
        "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
        "4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4",
        "76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef",
        "ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c",
        "5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328",
    ].map(hash)

    struct InclusionVector: Sendable {
        let index: UInt64, treeSize: UInt64, proof: [String]
    }

    /// testdata/inclusion/{0,1,2,3,4}/happy-path.json (hashes there are base64; hex here).
    static let inclusionVectors = [
        InclusionVector(index: 0, treeSize: 1, proof: []),
        InclusionVector(index: 0, treeSize: 8, proof: [
            "96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
            "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
            "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4",
        ]),
        InclusionVector(index: 5, treeSize: 8, proof: [
            "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
            "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
            "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
        ]),
        InclusionVector(index: 2, treeSize: 3, proof: ["fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125"]),
        InclusionVector(index: 1, treeSize: 5, proof: [
            "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
            "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
            "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
        ]),
    ]

    struct ConsistencyVector: Sendable {
        let oldSize: UInt64, newSize: UInt64, proof: [String]
    }

    /// testdata/consistency/{0,1,2,3,4}/happy-path.json.
    static let consistencyVectors = [
        ConsistencyVector(oldSize: 1, newSize: 1, proof: []),
        ConsistencyVector(oldSize: 1, newSize: 8, proof: [
            "96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
            "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
            "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4",
        ]),
        ConsistencyVector(oldSize: 6, newSize: 8, proof: [
            "0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a",
            "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
            "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
        ]),
        ConsistencyVector(oldSize: 2, newSize: 5, proof: [
            "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
            "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
        ]),
        ConsistencyVector(oldSize: 6, newSize: 7, proof: [
            "0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a",
            "b08693ec2e721597130641e8211e7eedccb4c26413963eee6c1e2ed16ffb1a5f",
            "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
        ]),
    ]

    @Test func leafHashesAndRootsMatchTheVectors() {
        #expect(Self.leafInputs.map { MerkleTree.leafHash($0) } == Self.leafHashes)
        for size in 0...8 {
            #expect(MerkleTree.rootHash(ofEntries: Self.leafInputs.prefix(size)) == Self.roots[size], "size \(size)")
        }
        #expect(MerkleTree.emptyRoot == Self.roots[0])
    }

    @Test(arguments: inclusionVectors) func inclusionProofsMatchTheVectors(_ vector: InclusionVector) throws {
        let expected = vector.proof.map(hash)
        let leaf = Self.leafHashes[Int(vector.index)]
        let root = Self.roots[Int(vector.treeSize)]
        try MerkleProof.verifyInclusion(leafHash: leaf, index: vector.index, treeSize: vector.treeSize, proof: expected, rootHash: root)
        let tree = InMemoryTree(leafHashes: Array(Self.leafHashes.prefix(Int(vector.treeSize))))
        #expect(try MerkleProofGenerator.inclusionProof(index: vector.index, treeSize: vector.treeSize, reader: tree) == expected)
    }

    @Test(arguments: consistencyVectors) func consistencyProofsMatchTheVectors(_ vector: ConsistencyVector) throws {
        let expected = vector.proof.map(hash)
        try MerkleProof.verifyConsistency(
            oldSize: vector.oldSize, newSize: vector.newSize,
            oldRoot: Self.roots[Int(vector.oldSize)], newRoot: Self.roots[Int(vector.newSize)], proof: expected)
        let tree = InMemoryTree(leafHashes: Array(Self.leafHashes.prefix(Int(vector.newSize))))
        #expect(try MerkleProofGenerator.consistencyProof(oldSize: vector.oldSize, newSize: vector.newSize, reader: tree) == expected)
    }

    /// The generator's root from stored nodes, for every size of the vector tree.
    @Test func rootsFromStoredNodesMatchTheVectors() throws {
        let tree = InMemoryTree(leafHashes: Self.leafHashes)
        for size in 0...8 {
            #expect(try MerkleProofGenerator.rootHash(treeSize: UInt64(size), reader: tree) == Self.roots[size])
        }
    }

    @Test func hashesRoundTripThroughHexAndBase64() {
        let root = Self.roots[8]
        #expect(MerkleHash(hex: root.hex) == root)
        #expect(MerkleHash(base64: "XcnaeacGWamtVZy3Ad7ZoqudgjqtL0lgz+Nw7/RgQyg=") == root)
        #expect(MerkleHash(base64: root.base64) == root)
        #expect(MerkleHash(hex: "00") == nil)
        #expect(MerkleHash(base64: "XcnaeacGWamtVZy3Ad7ZoqudgjqtL0lgz+Nw7/RgQyg") == nil, "unpadded")
        #expect(MerkleHash(base64: "XcnaeacGWamtVZy3Ad7ZoqudgjqtL0lgz+Nw7/RgQyh=") == nil, "non-canonical last character")
        #expect(MerkleHash(bytes: [UInt8](repeating: 0, count: 31)) == nil)
    }
}
