import Crypto
import Foundation

/// One SHA-256 value of the log's Merkle tree: a leaf hash, an interior node or a root.
///
/// Stored inline as four words rather than an array, so that appending and proving (which make
/// and compare millions of these) allocate nothing per hash.
public struct MerkleHash: Hashable, Sendable, CustomStringConvertible {
    public static let byteCount = 32

    private var word0: UInt64 = 0
    private var word1: UInt64 = 0
    private var word2: UInt64 = 0
    private var word3: UInt64 = 0

    /// The hash whose bytes are `bytes`, or nil unless there are exactly 32 of them.
    public init?<Bytes: Collection>(bytes: Bytes) where Bytes.Element == UInt8 {
        guard bytes.count == Self.byteCount else { return nil }
        Swift.withUnsafeMutableBytes(of: &self) { storage in
            for (offset, byte) in bytes.enumerated() { storage[offset] = byte }
        }
    }

    /// Reads 32 bytes at `offset` of a raw buffer (a hash tile); the caller checks the bounds.
    init(unsafeReadingFrom buffer: UnsafeRawBufferPointer, at offset: Int) {
        Swift.withUnsafeMutableBytes(of: &self) { storage in
            storage.copyMemory(from: UnsafeRawBufferPointer(rebasing: buffer[offset..<(offset + Self.byteCount)]))
        }
    }

    init(digest: SHA256.Digest) {
        digest.withUnsafeBytes { source in
            Swift.withUnsafeMutableBytes(of: &self) { $0.copyMemory(from: source) }
        }
    }

    public var bytes: [UInt8] { withUnsafeBytes { Array($0) } }
    public var data: Data { withUnsafeBytes { Data($0) } }
    public var hex: String { bytes.map { String(format: "%02x", $0) }.joined() }
    public var base64: String { data.base64EncodedString() }
    public var description: String { hex }

    /// The hash written as lowercase or uppercase hex, or nil.
    public init?(hex: String) {
        let digits = Array(hex.utf8)
        guard digits.count == 2 * Self.byteCount else { return nil }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(Self.byteCount)
        for pair in stride(from: 0, to: digits.count, by: 2) {
            guard let high = Self.hexValue(digits[pair]), let low = Self.hexValue(digits[pair + 1]) else { return nil }
            bytes.append(high << 4 | low)
        }
        self.init(bytes: bytes)
    }

    /// The hash in canonical standard base64 (44 characters with padding), or nil: a decoder that
    /// took several spellings of one hash would let two different checkpoints sign the same tree.
    public init?(base64: String) {
        guard let decoded = Data(base64Encoded: base64), decoded.base64EncodedString() == base64 else { return nil }
        self.init(bytes: decoded)
    }

    func withUnsafeBytes<Result>(_ body: (UnsafeRawBufferPointer) throws -> Result) rethrows -> Result {
        try Swift.withUnsafeBytes(of: self, body)
    }

    private static func hexValue(_ digit: UInt8) -> UInt8? {
        switch digit {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): digit - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): digit - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): digit - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}

/// The RFC 6962 §2.1 (RFC 9162 §2.1.1) Merkle Tree Hash with SHA-256: leaves and interior nodes
/// hashed under different one-byte prefixes, so that no leaf can pass for a node.
public enum MerkleTree {
    /// The root of the empty tree: SHA-256 of nothing.
    public static let emptyRoot = MerkleHash(digest: SHA256.hash(data: Data()))

    /// SHA-256(0x00 || entry).
    public static func leafHash<Bytes: DataProtocol>(_ entry: Bytes) -> MerkleHash {
        var hasher = SHA256()
        hasher.update(data: [0x00] as [UInt8])
        hasher.update(data: entry)
        return MerkleHash(digest: hasher.finalize())
    }

    /// SHA-256(0x01 || left || right).
    public static func nodeHash(_ left: MerkleHash, _ right: MerkleHash) -> MerkleHash {
        var hasher = SHA256()
        hasher.update(data: [0x01] as [UInt8])
        left.withUnsafeBytes { hasher.update(bufferPointer: $0) }
        right.withUnsafeBytes { hasher.update(bufferPointer: $0) }
        return MerkleHash(digest: hasher.finalize())
    }

    /// The root over `leafHashes`, split at the largest power of two below the count (RFC 6962
    /// MTH); the empty list gives `emptyRoot`. Works bottom up in place, one pass per level, so a
    /// tile of 256 hashes costs 255 node hashes and no recursion.
    public static func rootHash<Hashes: Collection>(ofLeafHashes leafHashes: Hashes) -> MerkleHash
    where Hashes.Element == MerkleHash {
        var level = Array(leafHashes)
        guard !level.isEmpty else { return emptyRoot }
        // Pairing neighbours level by level and carrying an odd last one up unchanged gives the
        // same tree as the recursive largest-power-of-two split.
        while level.count > 1 {
            var next = 0
            var index = 0
            while index + 1 < level.count {
                level[next] = nodeHash(level[index], level[index + 1])
                next += 1
                index += 2
            }
            if index < level.count {
                level[next] = level[index]
                next += 1
            }
            level.removeLast(level.count - next)
        }
        return level[0]
    }

    /// The root over the entries themselves.
    public static func rootHash<Entries: Collection>(ofEntries entries: Entries) -> MerkleHash
    where Entries.Element: DataProtocol {
        rootHash(ofLeafHashes: entries.map { leafHash($0) })
    }
}
