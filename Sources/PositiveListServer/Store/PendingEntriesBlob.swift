import Foundation
import IDRotation
import PositiveListFormat

/// How `pending_histories` keeps a submission's new entries: one blob of 24-byte records (id,
/// valid from, valid until; little-endian 64-bit integers), sorted by id.
///
/// One row per upload instead of one per id: an upload then costs one insert whatever its size,
/// and publication reads a few blobs instead of a million rows. The records are never queried
/// inside SQLite; uploads find pending ids through ``PendingIDCache``.
enum PendingEntriesBlob {
    static let recordByteCount = 24

    static func encode(_ entries: [PositiveListEntry]) -> Data {
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

    /// Calls `body` with each record; a blob whose size is not a whole number of records is
    /// damaged and refused.
    static func forEachEntry(in data: Data, submission: Int64, _ body: (PositiveListEntry) -> Void) throws(ServerStoreError) {
        guard data.count % recordByteCount == 0 else { throw .damagedPendingSubmission(submission: submission, byteCount: data.count) }
        data.withUnsafeBytes { bytes in
            for offset in stride(from: 0, to: bytes.count, by: recordByteCount) {
                body(PositiveListEntry(
                    id: UserID(rawValue: UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: offset, as: UInt64.self))),
                    validFrom: Int64(littleEndian: bytes.loadUnaligned(fromByteOffset: offset + 8, as: Int64.self)),
                    validUntil: Int64(littleEndian: bytes.loadUnaligned(fromByteOffset: offset + 16, as: Int64.self))))
            }
        }
    }
}
