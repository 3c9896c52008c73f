import Crypto
import IDRotation

/// The signed list of live batches, the one file a node fetches on every check.
///
/// Layout (big-endian): a 32-byte header, `count` listings of 64 bytes, a 64-byte Ed25519
/// signature. `generation` grows with every index the server writes, so a node can refuse an
/// older index replayed to it.
public struct PositiveListIndex: Sendable, Equatable {
    public static let magic: [UInt8] = Array("TPLI".utf8)
    public static let version: UInt8 = 1
    public static let headerByteCount = 32
    public static let listingByteCount = 64
    public static let relativePath = "index.tpli"

    public struct BatchListing: Sendable, Equatable {
        public let number: UInt64
        public let timeRange: PublishedTimeRange
        public let byteCount: Int
        public let sha256: [UInt8]

        public init(number: UInt64, timeRange: PublishedTimeRange, byteCount: Int, sha256: [UInt8]) {
            self.number = number
            self.timeRange = timeRange
            self.byteCount = byteCount
            self.sha256 = sha256
        }

        public var relativePath: String { PositiveListBatch.relativePath(number: number) }
    }

    public let generation: UInt64
    public let publishedAt: UnixSeconds
    public let batches: [BatchListing]

    public init(generation: UInt64, publishedAt: UnixSeconds, batches: [BatchListing]) {
        self.generation = generation
        self.publishedAt = publishedAt
        self.batches = batches
    }

    public func encode(signingKey: Curve25519.Signing.PrivateKey) throws -> [UInt8] {
        var writer = ByteWriter(capacity: Self.headerByteCount + batches.count * Self.listingByteCount + SignedFile.signatureByteCount)
        writer.append(Self.magic)
        writer.append(Self.version)
        writer.append([0, 0, 0])
        writer.append(generation)
        writer.append(publishedAt)
        writer.append(UInt64(batches.count))
        for listing in batches {
            precondition(listing.sha256.count == 32, "a SHA-256 digest is 32 bytes")
            writer.append(listing.number)
            writer.append(listing.timeRange.start)
            writer.append(listing.timeRange.end)
            writer.append(UInt64(listing.byteCount))
            writer.append(listing.sha256)
        }
        return try SignedFile.sign(writer.bytes, with: signingKey)
    }

    /// Parses `file` after checking its signature with `publicKey`.
    public init(verifying file: [UInt8], publicKey: PositiveListPublicKey) throws(PositiveListFormatError) {
        let body = Array(try SignedFile.verifiedBody(file, kind: .index, minimumBodySize: Self.headerByteCount, publicKey: publicKey.key))
        guard Array(body[0..<4]) == Self.magic else { throw .wrongMagic(.index) }
        guard body[4] == Self.version else { throw .unsupportedVersion(.index, version: body[4]) }
        let count = body.readInteger(at: 24, as: UInt64.self)
        let expected = Self.headerByteCount + Int(clamping: count) * Self.listingByteCount
        guard count <= UInt64(Int.max / Self.listingByteCount), body.count == expected else {
            throw .lengthMismatch(.index, expected: expected + SignedFile.signatureByteCount, actual: file.count)
        }
        generation = body.readInteger(at: 8, as: UInt64.self)
        publishedAt = body.readInteger(at: 16, as: Int64.self)
        batches = (0..<Int(count)).map { position in
            let offset = Self.headerByteCount + position * Self.listingByteCount
            return BatchListing(
                number: body.readInteger(at: offset, as: UInt64.self),
                timeRange: PublishedTimeRange(
                    start: body.readInteger(at: offset + 8, as: Int64.self),
                    end: body.readInteger(at: offset + 16, as: Int64.self)),
                byteCount: Int(clamping: body.readInteger(at: offset + 24, as: UInt64.self)),
                sha256: Array(body[offset + 32..<offset + 64]))
        }
    }
}
