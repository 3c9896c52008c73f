import Foundation
import GRDB
import PositiveListFormat
import ServerStorage
import TracerCore

extension ServerStore {
    /// Pending ids after the last batch whose windows end after `cutoff`, sorted by id: those of
    /// the submissions, in order, whose every id stopped being valid by `dueBy` (an id still
    /// valid could be broadcast by anyone who reads the list). The first submission with an id
    /// valid after `dueBy` and all later ones wait, so the watermark only ever passes whole
    /// submissions; a submission is due at most the longest window plus the clock skew after
    /// its upload.
    public func pendingEntries(endingAfter cutoff: UnixSeconds, dueBy: UnixSeconds) async throws(ServerStoreError) -> PendingEntries {
        let reader = pendingReader
        return try await read { db in
            let watermark = try Self.watermark(db)
            var entries: [PositiveListEntry] = []
            var lastSubmission = watermark
            var damaged: [Int64] = []
            var waiting = 0
            var nextDueBy: UnixSeconds?
            let rows = try Row.fetchCursor(
                db, sql: "SELECT submission, id_count, entries FROM pending_histories WHERE submission > ? ORDER BY submission",
                arguments: [watermark])
            while let row = try rows.next() {
                let submission: Int64 = row[0]
                if waiting > 0 {
                    waiting += row[1] as Int
                    continue
                }
                guard let decoded = PendingEntriesBlob.decode(row[2], idCount: row[1]) else {
                    lastSubmission = submission
                    damaged.append(submission)
                    continue
                }
                if let latest = decoded.lazy.map(\.validUntil).max(), latest > dueBy {
                    waiting = decoded.count
                    nextDueBy = latest
                    continue
                }
                lastSubmission = submission
                entries.append(contentsOf: decoded.lazy.filter { $0.validUntil > cutoff })
            }
            // Each submission's entries come sorted; the sort merges those runs. An id in two
            // submissions cannot happen (uploads check the pending ids), but should it, the batch
            // keeps one of them rather than refusing to publish.
            entries.sort { $0.id < $1.id }
            var unique: [PositiveListEntry] = []
            unique.reserveCapacity(entries.count)
            for entry in entries where unique.last?.id != entry.id { unique.append(entry) }
            return PendingEntries(
                entries: unique, lastSubmission: lastSubmission, damagedSubmissions: damaged, waitingIDs: waiting, nextDueBy: nextDueBy,
                read: PendingRead(reader: reader, mark: watermark))
        }
    }

    public func nextBatchNumber() async throws(ServerStoreError) -> UInt64 {
        try await read { db in try SQLiteBatchLedger.ids.nextNumber(db) }
    }

    /// Records a batch whose file is already on disk, with the `entries` it publishes, and
    /// removes them from the pending ones, in one transaction; the `damaged` submissions' rows
    /// move to `damaged_pending_histories`. Refuses (returns false) when another publisher
    /// recorded a batch meanwhile, so two publishers can never both claim the same ids.
    func recordBatch(
        _ batch: BatchRecord, entries: [PositiveListEntry], expectedWatermark: Int64, quarantining damaged: [Int64] = []
    ) async throws(ServerStoreError) -> Bool {
        let content = PendingEntriesBlob.encode(entries)
        let (pendingIDs, publishedIDs) = (self.pendingIDs, self.publishedIDs)
        return try await writeWithoutTransaction { db in
            var recorded = false
            defer {
                pendingIDs.invalidate()
                publishedIDs.invalidate()
            }
            try db.inTransaction(.immediate) {
                guard try Self.watermark(db) == expectedWatermark, try !SQLiteBatchLedger.ids.isTaken(batch.number, db) else { return .rollback }
                try SQLiteBatchLedger.ids.insert(
                    [
                        Int64(batch.number), batch.timeRange.start, batch.timeRange.end, batch.idCount, batch.lastSubmission, batch.publishedAt,
                    ], content: content, db)
                try Self.removePending(through: batch.lastSubmission, quarantining: damaged, db)
                recorded = true
                return .commit
            }
            return recorded
        }
    }

    /// Moves the watermark past the oldest pending submissions whose every id's window ended by
    /// `cutoff` (they can never be published), or whose ids are damaged, and forgets them, so
    /// that later publications do not read them again. Stops at the first submission with an id
    /// still inside retention: the watermark only ever passes whole submissions. Returns whether
    /// it moved.
    private static func skipExpiredPending(endingBy cutoff: UnixSeconds, _ db: Database) throws -> Bool {
        var skippedThrough: Int64?
        var damaged: [Int64] = []
        let rows = try Row.fetchCursor(
            db, sql: "SELECT submission, id_count, entries FROM pending_histories WHERE submission > ? ORDER BY submission",
            arguments: [try watermark(db)])
        while let row = try rows.next() {
            let submission: Int64 = row[0]
            if let decoded = PendingEntriesBlob.decode(row[2], idCount: row[1]) {
                guard decoded.allSatisfy({ $0.validUntil <= cutoff }) else { break }
            } else {
                damaged.append(submission)
            }
            skippedThrough = submission
        }
        guard let skippedThrough else { return false }
        try db.execute(sql: "INSERT OR REPLACE INTO server_state (key, value) VALUES ('skipped_through', ?)", arguments: [skippedThrough])
        try removePending(through: skippedThrough, quarantining: damaged, db)
        return true
    }

    private static func removePending(through lastSubmission: Int64, quarantining damaged: [Int64], _ db: Database) throws {
        // Kept, not deleted: whatever can still be read from them is the authority's to recover.
        for submission in damaged where submission <= lastSubmission {
            try db.execute(
                sql: """
                    INSERT OR REPLACE INTO damaged_pending_histories (submission, id_count, entries)
                    SELECT submission, id_count, entries FROM pending_histories WHERE submission = ?
                    """,
                arguments: [submission])
        }
        if try Int64.fetchOne(db, sql: "SELECT max(submission) FROM pending_histories") ?? 0 <= lastSubmission {
            // Usually nothing arrived during the publication: without a WHERE clause, SQLite
            // drops the table's pages instead of deleting row by row.
            try db.execute(sql: "DELETE FROM pending_histories")
        } else {
            try db.execute(sql: "DELETE FROM pending_histories WHERE submission <= ?", arguments: [lastSubmission])
        }
    }

    /// Marks live batches whose every window ended by `cutoff` as expired, and forgets the
    /// pending ids that expired before they could be published (see
    /// ``skipExpiredPending(endingBy:_:)``); returns the batches' numbers.
    public func expireBatches(endingBy cutoff: UnixSeconds, now: UnixSeconds) async throws(ServerStoreError) -> [UInt64] {
        let (pendingIDs, publishedIDs) = (self.pendingIDs, self.publishedIDs)
        return try await write { db in
            // Before any later write runs: an upload queued behind this one must not find the
            // expired batches' ids still known.
            defer { publishedIDs.invalidate() }
            if try Self.skipExpiredPending(endingBy: cutoff, db) { pendingIDs.invalidate() }
            return try SQLiteBatchLedger.ids.expire(endingBy: cutoff, now: now, db).map { UInt64($0) }
        }
    }

    public func liveBatches() async throws(ServerStoreError) -> [BatchRecord] {
        try await read { db in
            try SQLiteBatchLedger.ids.live(db).map { row in
                BatchRecord(
                    number: UInt64(row[0] as Int64), timeRange: PublishedTimeRange(start: row[1], end: row[2]),
                    idCount: row[3], lastSubmission: row[4], publishedAt: row[5])
            }
        }
    }

    public func liveBatchContents(
        idBatchesAfter idBatch: UInt64, keyBatchesAfter keyBatch: UInt64
    ) async throws(ServerStoreError) -> LiveBatchContents {
        try await read { db in
            var contents = LiveBatchContents()
            for row in try SQLiteBatchLedger.ids.liveContents(after: idBatch, db) {
                contents.idBatches.append(try PublishedIDBatch(number: UInt64(row[0] as Int64), idCount: row[1], content: row[2]))
            }
            for row in try SQLiteBatchLedger.keys.liveContents(after: keyBatch, db) {
                contents.keyBatches.append(try PublishedKeyBatch(number: UInt64(row[0] as Int64), keyCount: row[1], content: row[2]))
            }
            return contents
        }
    }

    public func uploadCodeCounts(now: UnixSeconds) async throws(ServerStoreError) -> UploadCodeCounts {
        try await read { db in
            let row = try Row.fetchOne(db, sql: """
                SELECT coalesce(sum(expires_at > ?), 0), coalesce(sum(expires_at <= ?), 0)
                FROM upload_codes WHERE used_at IS NULL
                """, arguments: [now, now])
            return UploadCodeCounts(open: row?[0] ?? 0, expiredUnused: row?[1] ?? 0)
        }
    }

    public func summary(now: UnixSeconds) async throws(ServerStoreError) -> StoreSummary {
        try await read { db in
            let watermark = try Self.watermark(db)
            return StoreSummary(
                submissions: try Int.fetchOne(db, sql: "SELECT count(*) FROM submissions") ?? 0,
                storedIDs: try Int.fetchOne(db, sql: """
                    SELECT (SELECT coalesce(sum(id_count), 0) FROM batches WHERE expired_at IS NULL)
                         + (SELECT coalesce(sum(id_count), 0) FROM pending_histories)
                    """) ?? 0,
                unpublishedIDs: try Int.fetchOne(
                    db, sql: "SELECT coalesce(sum(id_count), 0) FROM pending_histories WHERE submission > ?", arguments: [watermark]) ?? 0,
                liveBatches: try Int.fetchOne(db, sql: "SELECT count(*) FROM batches WHERE expired_at IS NULL") ?? 0,
                lastPublishedAt: try Int64.fetchOne(db, sql: "SELECT max(published_at) FROM batches"),
                openUploadCodes: try Int.fetchOne(
                    db, sql: "SELECT count(*) FROM upload_codes WHERE used_at IS NULL AND expires_at > ?", arguments: [now]) ?? 0,
                storedKeys: try Int.fetchOne(db, sql: "SELECT count(*) FROM submitted_keys") ?? 0,
                unpublishedKeys: try Int.fetchOne(db, sql: "SELECT count(*) FROM submitted_keys WHERE batch IS NULL") ?? 0,
                liveKeyBatches: try Int.fetchOne(db, sql: "SELECT count(*) FROM key_batches WHERE expired_at IS NULL") ?? 0)
        }
    }

    /// The newest submission already published (or skipped as expired).
    static func watermark(_ db: Database) throws -> Int64 {
        let published = try Int64.fetchOne(db, sql: "SELECT max(last_submission) FROM batches") ?? 0
        let skipped = try Int64.fetchOne(db, sql: "SELECT value FROM server_state WHERE key = 'skipped_through'") ?? 0
        return max(published, skipped)
    }
}
