import Crypto
import Foundation
import GRDB
import PositiveListFormat

/// The ids of the live batches (``PublishedIDIndex``), kept as true as the database that lists
/// those batches (see ``DatabaseMirror``: brought up to date when another process committed or
/// this one recorded or expired a batch).
///
/// The `batches` table says which batches are live; their files say which ids they hold.
/// Bringing the index up to date reads only what changed: the files of batches it does not hold
/// yet (checked against the size and SHA-256 the database recorded) and drops the batches no
/// longer live. A recorded batch's file always exists, since it is written and synced before the
/// batch is recorded, and it is deleted only after the batch was marked expired.
enum PublishedIDCache {
    static func make(directory: PublishedDirectory) -> DatabaseMirror<PublishedIDIndex> {
        DatabaseMirror(PublishedIDIndex()) { index, db in
            try bringUpToDate(&index, db: db, directory: directory)
        }
    }

    private static func bringUpToDate(_ index: inout PublishedIDIndex, db: Database, directory: PublishedDirectory) throws {
        let live = try Row.fetchAll(db, sql: "SELECT number, byte_count, sha256 FROM batches WHERE expired_at IS NULL")
        let liveNumbers = Set(live.map { UInt64($0[0] as Int64) })
        index.remove(batches: index.batches.subtracting(liveNumbers))
        var added: [(number: UInt64, ids: [UInt64])] = []
        var failure: ServerStoreError?
        for row in live {
            let number = UInt64(row[0] as Int64)
            guard !index.batches.contains(number) else { continue }
            let digest: Data = row[2]
            do {
                added.append((number, try PublishedBatchIDs.read(path: directory.batchPath(number: number), byteCount: row[1], sha256: Array(digest))))
            } catch {
                failure = error
            }
        }
        // Keep what was read: while one file is missing, each upload then re-reads only that one
        // (and fails fast), not every live batch under the write lock.
        index.insert(added)
        if let failure { throw failure }
    }
}

/// Reads the ids of a batch file this server published.
enum PublishedBatchIDs {
    /// The ids of the file at `path`, which must be the one recorded: `byteCount` bytes with
    /// this SHA-256. The signature is not checked again: the digest already ties the file to
    /// the one this server signed.
    static func read(path: String, byteCount: Int, sha256: [UInt8]) throws(ServerStoreError) -> [UInt64] {
        func damaged(_ reason: String) -> ServerStoreError { .publishedBatchUnreadable(path: path, reason: reason) }
        guard let data = FileManager.default.contents(atPath: path) else {
            throw damaged(FileManager.default.fileExists(atPath: path) ? "it cannot be read" : "it is missing")
        }
        guard data.count == byteCount else { throw damaged("it has \(data.count) bytes, the database recorded \(byteCount)") }
        guard Array(SHA256.hash(data: data)) == sha256 else { throw damaged("its SHA-256 is not the one recorded") }
        let header = PositiveListBatch.headerByteCount
        let entrySize = PositiveListBatch.entryByteCount
        let parsed = data.withUnsafeBytes { (bytes: UnsafeRawBufferPointer) -> Result<[UInt64], ServerStoreError> in
            guard bytes.count >= header, Array(bytes[0..<4]) == PositiveListBatch.magic else { return .failure(damaged("it is not a batch file")) }
            let count = UInt64(bigEndian: bytes.loadUnaligned(fromByteOffset: 32, as: UInt64.self))
            guard count <= UInt64(bytes.count / entrySize),
                  header + Int(count) * entrySize + SignedFile.signatureByteCount == bytes.count
            else { return .failure(damaged("its entry count does not match its size")) }
            var ids: [UInt64] = []
            ids.reserveCapacity(Int(count))
            for position in 0..<Int(count) {
                ids.append(UInt64(bigEndian: bytes.loadUnaligned(fromByteOffset: header + position * entrySize, as: UInt64.self)))
            }
            return .success(ids)
        }
        return try parsed.get()
    }
}
