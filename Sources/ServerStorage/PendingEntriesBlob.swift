import Foundation
import PositiveListFormat
import TracerCore

/// How `pending_histories` keeps a submission's new entries, and `batches.entries` (both back
/// ends) what a batch published: one blob of 24-byte records (id, valid from, valid until;
/// little-endian 64-bit integers), sorted by id.
///
/// One row per upload instead of one per id: an upload then costs one insert whatever its size,
/// and publication reads a few blobs instead of a million rows. The records are never queried
/// inside SQLite; uploads find pending ids through ``PendingIDCache``.
package enum PendingEntriesBlob {
    package static let recordByteCount = 24

    package static func encode(_ entries: [PositiveListEntry]) -> Data {
        var data = Data(count: entries.count * recordByteCount)
        data.withUnsafeMutableBytes { bytes in
            for (position, entry) in entries.enumerated() {
                let offset = position * recordByteCount
                bytes.storeBytes(of: entry.id.rawValue.littleEndian, toByteOffset: offset, as: UInt64.self)
                bytes.storeBytes(of: entry.validFrom.littleEndian, toByteOffset: offset + 8, as: Int64.self)
                bytes.storeBytes(of: entry.validUntil.littleEndian, toByteOffset: offset + 16, as: Int64.self)
            }
        }
        return data
    }

    /// The entries of a blob recorded with `idCount` entries, or nil when it is damaged: another
    /// size, ids out of order, or a window no accepted upload has (what validation lets in
    /// is what a batch can hold, so a damaged blob can never stop a publication).
    package static func decode(_ data: Data, idCount: Int) -> [PositiveListEntry]? {
        // A damaged count must not trap: it is then no blob's size.
        let (byteCount, overflow) = idCount.multipliedReportingOverflow(by: recordByteCount)
        guard idCount >= 0, !overflow, data.count == byteCount else { return nil }
        return data.withUnsafeBytes { bytes -> [PositiveListEntry]? in
            var entries: [PositiveListEntry] = []
            entries.reserveCapacity(idCount)
            for offset in stride(from: 0, to: bytes.count, by: recordByteCount) {
                let entry = PositiveListEntry(
                    id: UserID(rawValue: UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: offset, as: UInt64.self))),
                    validFrom: Int64(littleEndian: bytes.loadUnaligned(fromByteOffset: offset + 8, as: Int64.self)),
                    validUntil: Int64(littleEndian: bytes.loadUnaligned(fromByteOffset: offset + 16, as: Int64.self)))
                guard entry.validFrom >= 0, entry.validUntil > entry.validFrom, entry.validUntil <= Int64(UInt32.max),
                      entries.last.map({ $0.id < entry.id }) ?? true
                else { return nil }
                entries.append(entry)
            }
            return entries
        }
    }
}
