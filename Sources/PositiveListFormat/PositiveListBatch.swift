import Crypto
import TracerCore

/// A published batch: a signed, immutable file of ids sorted by value with their windows.
///
/// Layout (all integers big-endian; see docs/positive-list-format.md):
/// header of 40 bytes, `count` entries of 16 bytes, then a 64-byte Ed25519 signature over all
/// preceding bytes. Entries have a fixed size so a reader can seek, binary-search or stream.
public struct PositiveListBatch: Sendable {
    public static let magic: [UInt8] = Array("TPLB".utf8)
    public static let version: UInt8 = 1
    public static let headerByteCount = 40
    public static let entryByteCount = IDEntryCoding.byteCount
    /// The most entries a reader takes in one batch: 2^22 ids (64 MiB), the 28-day histories of
    /// over 1,500 people (2,688 ids each) in a single publication, hourly by default. The bound
    /// lets a node refuse a signed listing that claims gigabytes before it downloads a byte; a
    /// server publishing more in one go must split it into several batches.
    public static let maximumEntryCount = 1 << 22
    public static let maximumByteCount = headerByteCount + maximumEntryCount * entryByteCount + SignedFile.signatureByteCount

    public let number: UInt64
    public let timeRange: PublishedTimeRange
    public let count: Int
    /// The verified file without its signature; entries are decoded from it on demand.
    private let body: ArraySlice<UInt8>

    /// Parses `file` after checking its signature with `publicKey`, and checks every entry.
    public init(verifying file: [UInt8], publicKey: PositiveListPublicKey) throws(PositiveListFormatError) {
        try self.init(file, check: .verify(publicKey.key))
    }

    init(_ file: [UInt8], check: SignedFile.SignatureCheck) throws(PositiveListFormatError) {
        let body = try SignedFile.verifiedBody(file, kind: .batch, minimumBodySize: Self.headerByteCount, check: check)
        try self.init(verifiedBody: body)
    }

    /// Parses `file` after checking it against its index entry (number, size, SHA-256) and its
    /// own signature.
    public init(verifying file: [UInt8], listedAs listing: PositiveListIndex.BatchListing, publicKey: PositiveListPublicKey) throws(PositiveListFormatError) {
        try self.init(file, listedAs: listing, check: .verify(publicKey.key))
    }

    /// Parses `file` after checking it against `listing` only (number, size, SHA-256): for the
    /// publisher reading back its own file, whose listing it recorded itself when it signed the
    /// file (the server's database), so that the digest vouches for it as the signature would.
    public init(recorded file: [UInt8], listedAs listing: PositiveListIndex.BatchListing) throws(PositiveListFormatError) {
        try self.init(file, listedAs: listing, check: .digestChecked)
    }

    private init(_ file: [UInt8], listedAs listing: PositiveListIndex.BatchListing, check: SignedFile.SignatureCheck) throws(PositiveListFormatError) {
        guard file.count == listing.byteCount else {
            throw .lengthMismatch(.batch, expected: listing.byteCount, actual: file.count)
        }
        guard Array(SHA256.hash(data: file)) == listing.sha256 else { throw .digestMismatch(batchNumber: listing.number) }
        try self.init(file, check: check)
        guard number == listing.number else { throw .batchNumberMismatch(expected: listing.number, actual: number) }
    }

    private init(verifiedBody body: ArraySlice<UInt8>) throws(PositiveListFormatError) {
        let bytes = Array(body)
        guard Array(bytes[0..<4]) == Self.magic else { throw .wrongMagic(.batch) }
        guard bytes[4] == Self.version else { throw .unsupportedVersion(.batch, version: bytes[4]) }
        let count = bytes.readInteger(at: 32, as: UInt64.self)
        let expected = signedFileLength(header: Self.headerByteCount, count: count, each: Self.entryByteCount)
        let actual = bytes.count + SignedFile.signatureByteCount
        guard actual == expected else { throw .lengthMismatch(.batch, expected: expected, actual: actual) }
        self.number = bytes.readInteger(at: 8, as: UInt64.self)
        self.timeRange = PublishedTimeRange(start: bytes.readInteger(at: 16, as: Int64.self), end: bytes.readInteger(at: 24, as: Int64.self))
        self.count = Int(count)
        self.body = bytes[...]
        try IDEntryCoding.check(bytes, at: Self.headerByteCount, count: self.count)
    }

    public func entry(at position: Int) -> PositiveListEntry {
        let offset = body.startIndex + Self.headerByteCount + position * Self.entryByteCount
        let bytes = body
        func integer<Integer: FixedWidthInteger>(_ at: Int, _: Integer.Type) -> Integer {
            var value: Integer = 0
            for index in at..<at + MemoryLayout<Integer>.size { value = value << 8 | Integer(bytes[index]) }
            return value
        }
        return PositiveListEntry(
            id: UserID(rawValue: integer(offset, UInt64.self)),
            validFrom: UnixSeconds(integer(offset + 8, UInt32.self)),
            validUntil: UnixSeconds(integer(offset + 12, UInt32.self)))
    }

    public var entries: [PositiveListEntry] { (0..<count).map(entry(at:)) }

    /// The entry for `id`, found by binary search over the sorted entries.
    public func entry(for id: UserID) -> PositiveListEntry? {
        var low = 0
        var high = count
        while low < high {
            let middle = (low + high) / 2
            let candidate = entry(at: middle)
            if candidate.id == id { return candidate }
            if candidate.id < id { low = middle + 1 } else { high = middle }
        }
        return nil
    }

    /// The file name of batch `number` inside the published directory.
    public static func relativePath(number: UInt64) -> String { "batches/\(number).tplb" }
}
