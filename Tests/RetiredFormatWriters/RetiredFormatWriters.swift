import Crypto
import PositiveListFormat
import TracerCore

// Writers of the retired list files (formats 1 and 2: `index.tpli`, `batches/N.tplb`,
// `keys/index.tpki`, `keys/N.tpkb`; docs/positive-list-format.md keeps their layout as history).
// No program writes these files any more: a server only reads them, once, to move their
// content into its database on upgrade. The tests need them to write what an older server left
// behind and to give the decoders hostile variants, so the writers live here, outside Sources,
// and write what they are given: sorting keys into the published order is the only thing they
// do for the caller, and nothing is refused, so that a test can hand a decoder an unsorted or
// repeated entry.

extension PositiveListBatch {
    /// The signed id batch file (format 1) of `entries`, in the order given.
    public static func encode(number: UInt64, entries: [PositiveListEntry], signingKey: Curve25519.Signing.PrivateKey) throws -> [UInt8] {
        let range = PublishedTimeRange(covering: entries) ?? PublishedTimeRange(start: 0, end: 0)
        var bytes = magic + [version, 0, 0, 0]
        bytes.appendBigEndian(number)
        bytes.appendBigEndian(range.start)
        bytes.appendBigEndian(range.end)
        bytes.appendBigEndian(UInt64(entries.count))
        for entry in entries {
            bytes.appendBigEndian(entry.id.rawValue)
            bytes.appendBigEndian(UInt32(truncatingIfNeeded: entry.validFrom))
            bytes.appendBigEndian(UInt32(truncatingIfNeeded: entry.validUntil))
        }
        return try SignedFile.sign(bytes, with: signingKey)
    }
}

extension PositiveListKeyBatch {
    /// The signed key batch file (format 2) of `records`, sorted into the published order:
    /// (day, interval) groups, keys by their bytes within each.
    public static func encode(number: UInt64, records: [DailyKeyRecord], signingKey: Curve25519.Signing.PrivateKey) throws -> [UInt8] {
        let sorted = KeyGroupCoding.sorted(records)
        var groups: [(day: Int64, interval: Int64, count: UInt32)] = []
        for record in sorted {
            if let last = groups.last, last.day == record.day.number, last.interval == record.intervalSeconds {
                groups[groups.count - 1].count += 1
            } else {
                groups.append((record.day.number, record.intervalSeconds, 1))
            }
        }
        var bytes = magic + [version, 0, 0, 0]
        bytes.appendBigEndian(number)
        bytes.appendBigEndian(UInt32(groups.count))
        bytes.appendBigEndian(UInt32(sorted.count))
        for group in groups {
            bytes.appendBigEndian(UInt32(truncatingIfNeeded: group.day))
            bytes.appendBigEndian(UInt32(truncatingIfNeeded: group.interval))
            bytes.appendBigEndian(group.count)
        }
        for record in sorted { bytes += record.key.bytes }
        return try SignedFile.sign(bytes, with: signingKey)
    }
}

extension PositiveListIndex {
    /// The signed id index file (format 1).
    public func encode(signingKey: Curve25519.Signing.PrivateKey) throws -> [UInt8] {
        try RetiredIndexWriter.encode(
            magic: Self.magic, version: Self.version, flags: flags.rawValue, generation: generation, publishedAt: publishedAt,
            batches: batches, signingKey: signingKey)
    }
}

extension PositiveListKeyIndex {
    /// The signed key index file (format 2).
    public func encode(signingKey: Curve25519.Signing.PrivateKey) throws -> [UInt8] {
        try RetiredIndexWriter.encode(
            magic: Self.magic, version: Self.version, flags: accepts.rawValue, generation: generation, publishedAt: publishedAt,
            batches: batches, signingKey: signingKey)
    }
}

/// The header and 64-byte listings both indexes share.
private enum RetiredIndexWriter {
    static func encode(
        magic: [UInt8], version: UInt8, flags: UInt8, generation: UInt64, publishedAt: UnixSeconds,
        batches: [PositiveListIndex.BatchListing], signingKey: Curve25519.Signing.PrivateKey
    ) throws -> [UInt8] {
        var bytes = magic + [version, flags, 0, 0]
        bytes.appendBigEndian(generation)
        bytes.appendBigEndian(publishedAt)
        bytes.appendBigEndian(UInt64(batches.count))
        for listing in batches {
            bytes.appendBigEndian(listing.number)
            bytes.appendBigEndian(listing.timeRange.start)
            bytes.appendBigEndian(listing.timeRange.end)
            bytes.appendBigEndian(UInt64(listing.byteCount))
            bytes += listing.sha256
        }
        return try SignedFile.sign(bytes, with: signingKey)
    }
}

extension SignedFile {
    /// `body` followed by its Ed25519 signature.
    public static func sign(_ body: [UInt8], with key: Curve25519.Signing.PrivateKey) throws -> [UInt8] {
        body + Array(try key.signature(for: body))
    }
}

extension Array where Element == UInt8 {
    fileprivate mutating func appendBigEndian<Integer: FixedWidthInteger>(_ value: Integer) {
        Swift.withUnsafeBytes(of: value.bigEndian) { append(contentsOf: $0) }
    }
}
