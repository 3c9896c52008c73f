import Foundation

/// The bytes of an entry bundle (C2SP tlog-tiles, "Log entries"): each entry as a big-endian
/// uint16 length followed by that many bytes, nothing before, between or after.
public enum EntryBundle {
    public static let maximumEntryBytes = Int(UInt16.max)

    /// The bundle of `entries`; `firstIndex` only names an entry that is too big.
    public static func encode(_ entries: some Collection<Data>, firstIndex: UInt64 = 0) throws(TileError) -> Data {
        var bundle = Data(capacity: entries.reduce(0) { $0 + 2 + $1.count })
        for (offset, entry) in entries.enumerated() {
            guard entry.count <= maximumEntryBytes else {
                throw .entryTooLarge(index: firstIndex + UInt64(offset), byteCount: entry.count)
            }
            bundle.append(UInt8(entry.count >> 8))
            bundle.append(UInt8(entry.count & 0xff))
            bundle.append(entry)
        }
        return bundle
    }

    /// The entries of `bundle`, which must hold exactly `bundleID.width` of them: a bundle cut
    /// short, with bytes left over, or with another count is refused.
    public static func decode(_ bundle: some DataProtocol, as bundleID: EntryBundleID) throws(TileError) -> [Data] {
        let bytes = Array(bundle)
        var entries: [Data] = []
        entries.reserveCapacity(bundleID.width)
        var offset = 0
        while offset < bytes.count {
            guard entries.count < bundleID.width else {
                throw .malformedEntryBundle(path: bundleID.path, reason: "bytes after entry \(bundleID.width - 1) of \(bundleID.width)")
            }
            guard bytes.count - offset >= 2 else {
                throw .malformedEntryBundle(path: bundleID.path, reason: "a length cut short at byte \(offset)")
            }
            let length = Int(bytes[offset]) << 8 | Int(bytes[offset + 1])
            offset += 2
            guard bytes.count - offset >= length else {
                throw .malformedEntryBundle(
                    path: bundleID.path, reason: "entry \(entries.count) needs \(length) bytes, \(bytes.count - offset) are left")
            }
            entries.append(Data(bytes[offset..<(offset + length)]))
            offset += length
        }
        guard entries.count == bundleID.width else {
            throw .malformedEntryBundle(path: bundleID.path, reason: "\(entries.count) entries where \(bundleID.width) are needed")
        }
        return entries
    }
}
