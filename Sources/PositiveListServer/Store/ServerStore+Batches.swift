import Foundation
import GRDB
import GRDBSQLite
import IDRotation
import PositiveListFormat

/// Ids accepted since the last batch, sorted by id, and the sequence number that closes them.
public struct PendingEntries: Sendable {
    public let entries: [PositiveListEntry]
    /// Submissions up to this number were published (or skipped) before.
    public let afterSubmission: Int64
    /// The newest submission these entries come from: the next batch's watermark.
    public let lastSubmission: Int64
}

/// A published batch as the database records it.
public struct BatchRecord: Sendable, Equatable {
    public let number: UInt64
    public let timeRange: PublishedTimeRange
    public let byteCount: Int
    public let sha256: [UInt8]
    public let idCount: Int
    public let lastSubmission: Int64
    public let publishedAt: UnixSeconds

    public var listing: PositiveListIndex.BatchListing {
        PositiveListIndex.BatchListing(number: number, timeRange: timeRange, byteCount: byteCount, sha256: sha256)
    }
}

/// Counts for `tracer-server status`.
public struct StoreSummary: Sendable, Equatable {
    public let submissions: Int
    public let storedIDs: Int
    public let unpublishedIDs: Int
    public let liveBatches: Int
    public let lastPublishedAt: UnixSeconds?
    public let openUploadCodes: Int
}

extension ServerStore {
    static let indexGenerationKey = "index_generation"

    /// Pending ids after the last batch whose windows end after `cutoff`, sorted by id.
    public func pendingEntries(endingAfter cutoff: UnixSeconds) async throws(ServerStoreError) -> PendingEntries {
        try await read { db in
            let watermark = try Self.watermark(db)
            var entries: [PositiveListEntry] = []
            var lastSubmission = watermark
            // Read through SQLite's C interface: a batch of a million ids made GRDB's Row a
            // third of the publication's time.
            let statement = try db.makeStatement(
                sql: "SELECT submission, id, valid_from, valid_until FROM pending_ids WHERE submission > ?")
            let handle = statement.sqliteStatement
            sqlite3_bind_int64(handle, 1, watermark)
            var code = sqlite3_step(handle)
            while code == SQLITE_ROW {
                lastSubmission = max(lastSubmission, sqlite3_column_int64(handle, 0))
                let validUntil = sqlite3_column_int64(handle, 3)
                if validUntil > cutoff {
                    entries.append(PositiveListEntry(
                        id: UserID(databaseValue: sqlite3_column_int64(handle, 1)), validFrom: sqlite3_column_int64(handle, 2),
                        validUntil: validUntil))
                }
                code = sqlite3_step(handle)
            }
            guard code == SQLITE_DONE else {
                throw DatabaseError(resultCode: ResultCode(rawValue: code), message: String(cString: sqlite3_errmsg(db.sqliteConnection)))
            }
            // Each submission's rows come sorted; the sort merges those runs.
            entries.sort { $0.id < $1.id }
            return PendingEntries(entries: entries, afterSubmission: watermark, lastSubmission: lastSubmission)
        }
    }

    public func nextBatchNumber() async throws(ServerStoreError) -> UInt64 {
        try await read { db in UInt64(try Int64.fetchOne(db, sql: "SELECT max(number) FROM batches") ?? 0) + 1 }
    }

    /// Records a batch whose file is already on disk. Refuses (returns false) when another
    /// publisher recorded a batch meanwhile, so two publishers can never both claim the same ids.
    public func recordBatch(_ batch: BatchRecord, expectedWatermark: Int64) async throws(ServerStoreError) -> Bool {
        try await write { db in
            guard try Self.watermark(db) == expectedWatermark,
                  try Int64.fetchOne(db, sql: "SELECT count(*) FROM batches WHERE number >= ?", arguments: [Int64(batch.number)]) == 0
            else { return false }
            try db.execute(
                sql: """
                    INSERT INTO batches (number, range_start, range_end, byte_count, sha256, id_count, last_submission, published_at)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?)
                    """,
                arguments: [
                    Int64(batch.number), batch.timeRange.start, batch.timeRange.end, batch.byteCount, Data(batch.sha256),
                    batch.idCount, batch.lastSubmission, batch.publishedAt,
                ])
            return true
        }
    }

    /// Moves the watermark past ids that expired before they could be published, so they are
    /// not read again by every later publication.
    public func skipExpiredPending(through lastSubmission: Int64) async throws(ServerStoreError) {
        try await write { db in
            try db.execute(sql: "INSERT OR REPLACE INTO server_state (key, value) VALUES ('skipped_through', ?)", arguments: [lastSubmission])
        }
    }

    /// Moves the pending ids at or below the watermark (published in a batch, or skipped as
    /// expired) into `published_ids`, in one transaction; returns how many moved.
    ///
    /// The ids arrive sorted, so the id table's pages are each written once however many ids
    /// land on them: this is where the random writes that used to cost every upload are paid,
    /// once per publication. Safe to run at any time and again: until it runs, published ids
    /// wait in `pending_ids`, where uploads still find them and the watermark keeps them out of
    /// the next batch.
    @discardableResult
    public func mergePublishedIDs() async throws(ServerStoreError) -> Int {
        let pendingIDs = self.pendingIDs
        return try await writeWithoutTransaction { db in
            var merged = 0
            defer { pendingIDs.invalidate() }
            try db.inTransaction(.immediate) {
                let watermark = try Self.watermark(db)
                // OR IGNORE: appending keeps each id in one of the two tables, so nothing is
                // ever ignored; should that fail, an id published twice does no harm, whereas a
                // merge that fails stops every later publication.
                try db.execute(
                    sql: """
                        INSERT OR IGNORE INTO published_ids (id, valid_until)
                        SELECT id, valid_until FROM pending_ids WHERE submission <= ? ORDER BY id
                        """,
                    arguments: [watermark])
                merged = db.changesCount
                let newestPending = try Int64.fetchOne(db, sql: "SELECT max(submission) FROM pending_ids") ?? 0
                if newestPending <= watermark {
                    // Usually nothing arrived during the publication: without a WHERE clause,
                    // SQLite drops the table's pages instead of deleting row by row.
                    try db.execute(sql: "DELETE FROM pending_ids")
                } else {
                    try db.execute(sql: "DELETE FROM pending_ids WHERE submission <= ?", arguments: [watermark])
                }
                return .commit
            }
            return merged
        }
    }

    /// Marks live batches whose every window ended by `cutoff` as expired; returns their numbers.
    public func expireBatches(endingBy cutoff: UnixSeconds, now: UnixSeconds) async throws(ServerStoreError) -> [UInt64] {
        try await write { db in
            let numbers = try Int64.fetchAll(
                db, sql: "SELECT number FROM batches WHERE expired_at IS NULL AND range_end <= ? ORDER BY number", arguments: [cutoff])
            try db.execute(sql: "UPDATE batches SET expired_at = ? WHERE expired_at IS NULL AND range_end <= ?", arguments: [now, cutoff])
            return numbers.map { UInt64($0) }
        }
    }

    public func liveBatches() async throws(ServerStoreError) -> [BatchRecord] {
        try await read { db in
            try Row.fetchAll(db, sql: """
                SELECT number, range_start, range_end, byte_count, sha256, id_count, last_submission, published_at
                FROM batches WHERE expired_at IS NULL ORDER BY number
                """).map { row in
                let digest: Data = row[4]
                return BatchRecord(
                    number: UInt64(row[0] as Int64), timeRange: PublishedTimeRange(start: row[1], end: row[2]),
                    byteCount: row[3], sha256: Array(digest), idCount: row[5], lastSubmission: row[6], publishedAt: row[7])
            }
        }
    }

    /// The next index generation, recorded before the index is written so a generation number
    /// is never reused even if the write then fails.
    public func claimIndexGeneration() async throws(ServerStoreError) -> UInt64 {
        try await write { db in
            let current = try Int64.fetchOne(db, sql: "SELECT value FROM server_state WHERE key = ?", arguments: [Self.indexGenerationKey]) ?? 0
            try db.execute(
                sql: "INSERT OR REPLACE INTO server_state (key, value) VALUES (?, ?)", arguments: [Self.indexGenerationKey, current + 1])
            return UInt64(current + 1)
        }
    }

    public func summary(now: UnixSeconds) async throws(ServerStoreError) -> StoreSummary {
        try await read { db in
            let watermark = try Self.watermark(db)
            return StoreSummary(
                submissions: try Int.fetchOne(db, sql: "SELECT count(*) FROM submissions") ?? 0,
                storedIDs: try Int.fetchOne(db, sql: "SELECT (SELECT count(*) FROM published_ids) + (SELECT count(*) FROM pending_ids)") ?? 0,
                unpublishedIDs: try Int.fetchOne(db, sql: "SELECT count(*) FROM pending_ids WHERE submission > ?", arguments: [watermark]) ?? 0,
                liveBatches: try Int.fetchOne(db, sql: "SELECT count(*) FROM batches WHERE expired_at IS NULL") ?? 0,
                lastPublishedAt: try Int64.fetchOne(db, sql: "SELECT max(published_at) FROM batches"),
                openUploadCodes: try Int.fetchOne(
                    db, sql: "SELECT count(*) FROM upload_codes WHERE used_at IS NULL AND expires_at > ?", arguments: [now]) ?? 0)
        }
    }

    /// The newest submission already published (or skipped as expired).
    static func watermark(_ db: Database) throws -> Int64 {
        let published = try Int64.fetchOne(db, sql: "SELECT max(last_submission) FROM batches") ?? 0
        let skipped = try Int64.fetchOne(db, sql: "SELECT value FROM server_state WHERE key = 'skipped_through'") ?? 0
        return max(published, skipped)
    }
}
