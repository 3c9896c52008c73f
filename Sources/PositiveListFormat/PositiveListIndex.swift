import Crypto
import TracerCore

/// The signed list of live id batches, the one file a node fetches on every check.
///
/// Layout (big-endian): a 32-byte header, `count` listings of 64 bytes, a 64-byte Ed25519
/// signature. `generation` grows with every index the server writes, so a node can refuse an
/// older index replayed to it. Format version 1, unchanged since: key batches are listed in
/// their own index (``PositiveListKeyIndex``), so nodes that know only ids keep working.
public struct PositiveListIndex: Sendable, Equatable {
    public static let magic: [UInt8] = Array("TPLI".utf8)
    public static let version: UInt8 = 1
    public static let headerByteCount = 32
    public static let listingByteCount = 64
    public static let relativePath = "index.tpli"
    /// The most listings a reader takes from one index (id or key index): the batches of the
    /// 28-day retention period plus the day a batch may take to expire, at one publication every
    /// 5 minutes, twelve times the server's default hourly rate. The default rate needs
    /// 28 × 24 = 672 listings (43 KB); this bound is 8,352 (535 KB), so a reader can cap the
    /// download of an index at ``maximumByteCount`` instead of megabytes.
    public static let maximumListingCount = 29 * 288
    /// The largest index a reader accepts: an endless or padded answer is cut off here.
    public static let maximumByteCount = headerByteCount + maximumListingCount * listingByteCount + SignedFile.signatureByteCount

    /// What a listed batch holds, which decides its file name; not written in the listing,
    /// since each index lists one kind.
    public enum BatchKind: Sendable, Equatable {
        case ids
        case keys
    }

    public struct BatchListing: Sendable, Equatable {
        public let number: UInt64
        public let timeRange: PublishedTimeRange
        public let byteCount: Int
        public let sha256: [UInt8]
        public let kind: BatchKind

        public init(number: UInt64, timeRange: PublishedTimeRange, byteCount: Int, sha256: [UInt8], kind: BatchKind = .ids) {
            self.number = number
            self.timeRange = timeRange
            self.byteCount = byteCount
            self.sha256 = sha256
            self.kind = kind
        }

        /// The largest file of this kind a reader downloads (see `PositiveListBatch.maximumByteCount`).
        public var maximumByteCount: Int {
            switch kind {
            case .ids: return PositiveListBatch.maximumByteCount
            case .keys: return PositiveListKeyBatch.maximumByteCount
            }
        }

        public var relativePath: String {
            switch kind {
            case .ids: return PositiveListBatch.relativePath(number: number)
            case .keys: return PositiveListKeyBatch.relativePath(number: number)
            }
        }
    }

    /// Header byte 5 of the id index. Version 1 readers ignore it, so a bit can be added without
    /// a new version.
    public struct Flags: OptionSet, Sendable, Hashable {
        public let rawValue: UInt8
        public init(rawValue: UInt8) { self.rawValue = rawValue }

        /// The server publishes `keys/index.tpki` beside this index. A reader that sees this in
        /// a verified index takes a missing key index for a failing server or cache, never for
        /// "no keys": an unsigned 404 must not hide key-based exposures from a node that has
        /// never seen the key index.
        public static let keyIndexPublished = Flags(rawValue: 1 << 0)
    }

    public let generation: UInt64
    public let publishedAt: UnixSeconds
    public let batches: [BatchListing]
    public let flags: Flags

    public init(generation: UInt64, publishedAt: UnixSeconds, batches: [BatchListing], flags: Flags = []) {
        self.generation = generation
        self.publishedAt = publishedAt
        self.batches = batches
        self.flags = flags
    }

    /// Parses `file` after checking its signature with `publicKey`.
    public init(verifying file: [UInt8], publicKey: PositiveListPublicKey) throws(PositiveListFormatError) {
        try self.init(file, check: .verify(publicKey.key))
    }

    init(_ file: [UInt8], check: SignedFile.SignatureCheck) throws(PositiveListFormatError) {
        let decoded = try IndexCoding.decode(
            file, kind: .index, magic: Self.magic, version: Self.version, batchKind: .ids, check: check)
        generation = decoded.generation
        publishedAt = decoded.publishedAt
        batches = decoded.batches
        // Bits this reader does not know are ignored, as version 1 readers ignore the byte.
        flags = Flags(rawValue: decoded.flags).intersection(.keyIndexPublished)
    }
}

/// The header and listings both indexes share: magic (4), version (1), flags (1), two zero
/// bytes, generation, publication time and listing count (u64 each), then 64-byte listings.
enum IndexCoding {
    struct Decoded {
        var flags: UInt8
        var generation: UInt64
        var publishedAt: UnixSeconds
        var batches: [PositiveListIndex.BatchListing]
    }

    static func decode(
        _ file: [UInt8], kind: PositiveListFormatError.FileKind, magic: [UInt8], version: UInt8,
        batchKind: PositiveListIndex.BatchKind, check: SignedFile.SignatureCheck
    ) throws(PositiveListFormatError) -> Decoded {
        let headerByteCount = PositiveListIndex.headerByteCount
        let listingByteCount = PositiveListIndex.listingByteCount
        let body = Array(try SignedFile.verifiedBody(file, kind: kind, minimumBodySize: headerByteCount, check: check))
        guard Array(body[0..<4]) == magic else { throw .wrongMagic(kind) }
        guard body[4] == version else { throw .unsupportedVersion(kind, version: body[4]) }
        let count = body.readInteger(at: 24, as: UInt64.self)
        let expected = signedFileLength(header: headerByteCount, count: count, each: listingByteCount)
        guard file.count == expected else { throw .lengthMismatch(kind, expected: expected, actual: file.count) }
        let batches = (0..<Int(count)).map { position in
            let offset = headerByteCount + position * listingByteCount
            return PositiveListIndex.BatchListing(
                number: body.readInteger(at: offset, as: UInt64.self),
                timeRange: PublishedTimeRange(
                    start: body.readInteger(at: offset + 8, as: Int64.self),
                    end: body.readInteger(at: offset + 16, as: Int64.self)),
                byteCount: Int(clamping: body.readInteger(at: offset + 24, as: UInt64.self)),
                sha256: Array(body[offset + 32..<offset + 64]),
                kind: batchKind)
        }
        return Decoded(
            flags: body[5], generation: body.readInteger(at: 8, as: UInt64.self),
            publishedAt: body.readInteger(at: 16, as: Int64.self), batches: batches)
    }
}
