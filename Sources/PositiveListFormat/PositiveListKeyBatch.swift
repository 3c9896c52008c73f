import Crypto
import TracerCore

/// A published key batch: a signed, immutable file of daily keys grouped by (UTC day, rotation
/// interval), from which a node derives each key's ids (docs/daily-keys.md).
///
/// Layout (all integers big-endian; see docs/positive-list-format.md, "Key batches"): a 24-byte
/// header, `groupCount` group headers of 12 bytes (day, interval, key count), the keys of every
/// group in group order (16 bytes each), then a 64-byte Ed25519 signature over all preceding
/// bytes. The day and interval are written once per group rather than once per key: that is
/// what brings a published key to about 16 bytes, against 1,536 for a day of ids.
///
/// Groups are in strictly increasing (day, interval) order and keys strictly increasing within
/// their group. Keys are random, so that order is a random permutation of the uploads: nothing
/// in the file tells which keys came from the same person.
public struct PositiveListKeyBatch: Sendable {
    public static let magic: [UInt8] = Array("TPKB".utf8)
    /// Format version 2 introduced key batches; version 1 files are id batches and indexes.
    public static let version: UInt8 = 2
    public static let headerByteCount = 24
    public static let groupByteCount = KeyGroupCoding.byteCount
    public static let keyByteCount = DailyKey.byteCount
    /// The most keys a reader takes in one key batch: 2^20 (about 16,000 uploads of 64 keys in a
    /// single publication), each at worst in a group of its own. Every key costs a node 96 or
    /// more AES derivations per check, so this is also a bound on a check's work.
    public static let maximumKeyCount = 1 << 20
    public static let maximumByteCount = headerByteCount + maximumKeyCount * (groupByteCount + keyByteCount) + SignedFile.signatureByteCount

    /// The keys of one (day, interval) pair: positions `keys` of the batch.
    public struct Group: Sendable, Equatable {
        public let day: UTCDay
        public let intervalSeconds: Int64
        public let keys: Range<Int>

        public init(day: UTCDay, intervalSeconds: Int64, keys: Range<Int>) {
            self.day = day
            self.intervalSeconds = intervalSeconds
            self.keys = keys
        }
    }

    public let number: UInt64
    public let groups: [Group]
    public let count: Int
    /// The verified file without its signature; keys are read from it on demand.
    private let body: [UInt8]
    private let keysOffset: Int

    /// Parses `file` after checking its signature with `publicKey`, and checks every group and key.
    public init(verifying file: [UInt8], publicKey: PositiveListPublicKey) throws(PositiveListFormatError) {
        try self.init(file, check: .verify(publicKey.key))
    }

    init(_ file: [UInt8], check: SignedFile.SignatureCheck) throws(PositiveListFormatError) {
        let body = try SignedFile.verifiedBody(file, kind: .keyBatch, minimumBodySize: Self.headerByteCount, check: check)
        try self.init(verifiedBody: Array(body))
    }

    /// Parses `file` after checking it against its key index entry (number, size, SHA-256) and
    /// its own signature.
    public init(
        verifying file: [UInt8], listedAs listing: PositiveListIndex.BatchListing, publicKey: PositiveListPublicKey
    ) throws(PositiveListFormatError) {
        try self.init(file, listedAs: listing, check: .verify(publicKey.key))
    }

    /// Parses `file` after checking it against `listing` only (number, size, SHA-256), as
    /// ``PositiveListBatch/init(recorded:listedAs:)``: for the publisher reading back its own file.
    public init(recorded file: [UInt8], listedAs listing: PositiveListIndex.BatchListing) throws(PositiveListFormatError) {
        try self.init(file, listedAs: listing, check: .digestChecked)
    }

    private init(_ file: [UInt8], listedAs listing: PositiveListIndex.BatchListing, check: SignedFile.SignatureCheck) throws(PositiveListFormatError) {
        guard file.count == listing.byteCount else {
            throw .lengthMismatch(.keyBatch, expected: listing.byteCount, actual: file.count)
        }
        guard Array(SHA256.hash(data: file)) == listing.sha256 else { throw .digestMismatch(batchNumber: listing.number) }
        try self.init(file, check: check)
        guard number == listing.number else { throw .batchNumberMismatch(expected: listing.number, actual: number) }
    }

    private init(verifiedBody bytes: [UInt8]) throws(PositiveListFormatError) {
        guard Array(bytes[0..<4]) == Self.magic else { throw .wrongMagic(.keyBatch) }
        guard bytes[4] == Self.version else { throw .unsupportedVersion(.keyBatch, version: bytes[4]) }
        let groupCount = Int(bytes.readInteger(at: 16, as: UInt32.self))
        let keyCount = Int(bytes.readInteger(at: 20, as: UInt32.self))
        // Both counts are 32-bit, so the product cannot overflow a 64-bit Int: a hostile count
        // is refused here, before anything is allocated for it.
        let keysOffset = Self.headerByteCount + groupCount * Self.groupByteCount
        let expected = keysOffset + keyCount * Self.keyByteCount
        guard bytes.count == expected else {
            throw .lengthMismatch(.keyBatch, expected: expected + SignedFile.signatureByteCount, actual: bytes.count + SignedFile.signatureByteCount)
        }
        let groups = try KeyGroupCoding.decode(
            bytes, groupsAt: Self.headerByteCount, groupCount: groupCount, keysAt: keysOffset, keyCount: keyCount)
        self.number = bytes.readInteger(at: 8, as: UInt64.self)
        self.groups = groups
        self.count = keyCount
        self.body = bytes
        self.keysOffset = keysOffset
    }

    /// The key at `position` (0 ..< count), in file order.
    public func key(at position: Int) -> DailyKey {
        let offset = keysOffset + position * Self.keyByteCount
        // Exactly 16 bytes by the length check in init.
        return try! DailyKey(bytes: body[offset..<offset + Self.keyByteCount])
    }

    /// Every key with its day and interval, in file order.
    public var records: [DailyKeyRecord] {
        groups.flatMap { group in
            group.keys.map { DailyKeyRecord(day: group.day, intervalSeconds: group.intervalSeconds, key: key(at: $0)) }
        }
    }

    /// From the start of the first day to the end of the last: what retention and the index use.
    public var timeRange: PublishedTimeRange { Self.timeRange(days: groups.map(\.day)) }

    static func timeRange(days: [UTCDay]) -> PublishedTimeRange {
        guard let first = days.min(), let last = days.max() else { return PublishedTimeRange(start: 0, end: 0) }
        return PublishedTimeRange(start: first.start, end: last.end)
    }

    /// The time range a batch of `records` is listed with in the key index.
    public static func timeRange(of records: [DailyKeyRecord]) -> PublishedTimeRange { timeRange(days: records.map(\.day)) }

    /// The file name of key batch `number` inside the published directory.
    public static func relativePath(number: UInt64) -> String { "keys/\(number).tpkb" }
}
