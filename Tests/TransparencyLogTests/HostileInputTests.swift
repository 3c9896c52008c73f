import Foundation
import Testing
import TestTiers
import TransparencyLog

/// Seeded garbage, built from the characters each parser cares about, through every parser that
/// reads what a CDN or a configuration hands over: each answers or throws, none traps, and what
/// it accepts prints back to the same text.
@Suite(.tags(.unit)) struct HostileInputTests {
    static func garbage(from alphabet: [String], count: Int, using random: inout SplitMix64) -> String {
        (0..<count).map { _ in alphabet.randomElement(using: &random)! }.joined()
    }

    @Test func tilePathsFromGarbage() {
        var random = SplitMix64(seed: 0x7117)
        let alphabet = ["tile/", "entries/", "/", "x", "0", "1", "9", "00", "001", ".p/", ".p", "255", "256", "63", "64", "-", " "]
        for _ in 0..<3_000 {
            let path = Self.garbage(from: alphabet, count: Int.random(in: 0...8, using: &random), using: &random)
            if let tile = try? TileID(path: path) { #expect(tile.path == path) }
            if let bundle = try? EntryBundleID(path: path) { #expect(bundle.path == path) }
        }
    }

    @Test func checkpointsAndKeysFromGarbage() {
        var random = SplitMix64(seed: 0xC4EC)
        let lines = ["log.example/a", "0", "1", "01", "18446744073709551616", MerkleTree.emptyRoot.base64, "AAAA", "", "ext", "\u{E9}"]
        for _ in 0..<2_000 {
            let text = (0..<Int.random(in: 0...6, using: &random)).map { _ in lines.randomElement(using: &random)! + "\n" }.joined()
            if let checkpoint = try? Checkpoint(text: text) { #expect(checkpoint.text == text) }
        }
        let keyParts = ["PeterNeumann", "+", "c74f20a3", "ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW", "=", "A", " ", "0"]
        for _ in 0..<2_000 {
            let text = Self.garbage(from: keyParts, count: Int.random(in: 0...6, using: &random), using: &random)
            if let key = try? NoteVerifierKey(text: text) { #expect(key.text == text) }
        }
    }

    @Test func entryBundlesFromGarbage() throws {
        var random = SplitMix64(seed: 0xB0D1)
        for _ in 0..<2_000 {
            let bytes = (0..<Int.random(in: 0...40, using: &random)).map { _ in UInt8.random(in: 0...3, using: &random) }
            let bundle = try EntryBundleID(index: 0, width: Int.random(in: 1...256, using: &random))
            if let decoded = try? EntryBundle.decode(bytes, as: bundle) { #expect(try EntryBundle.encode(decoded) == Data(bytes)) }
        }
    }

    /// Proof checks with random sizes across the whole 64-bit range and random proof lengths.
    @Test func proofsWithRandomSizes() {
        var random = SplitMix64(seed: 0x9162)
        let anything = MerkleTree.leafHash(Data([1]))
        for _ in 0..<2_000 {
            let size = random.next() >> UInt64.random(in: 0...63, using: &random)
            let other = random.next() >> UInt64.random(in: 0...63, using: &random)
            let proof = Array(repeating: anything, count: Int.random(in: 0...70, using: &random))
            _ = try? MerkleProof.verifyInclusion(leafHash: anything, index: other, treeSize: size, proof: proof, rootHash: anything)
            _ = try? MerkleProof.verifyConsistency(oldSize: other, newSize: size, oldRoot: anything, newRoot: anything, proof: proof)
            _ = try? TileLayout.tilesForConsistency(oldSize: min(other, size), newSize: max(other, size))
            _ = try? TileLayout.tilesForInclusion(index: other, treeSize: size)
        }
    }
}
