import Foundation
import GRDB
import PositiveListFormat
import ServerStorage
import TracerCore

extension ServerStore {
    /// Stores `records` (already validated) in one transaction, with the same credential and
    /// idempotency handling as an id history. A key accepted before (pending or in a live
    /// batch) is not stored again; `stored` in the receipt counts the new ones.
    public func appendKeyHistory(
        _ records: [DailyKeyRecord], credential: SubmissionCredential, idempotencyKey: IdempotencyKey?, now: UnixSeconds
    ) async throws(ServerStoreError) -> SubmissionOutcome {
        try await writeWithoutTransaction { db in
            var outcome = SubmissionOutcome.refused(.unknownCode)
            // IMMEDIATE, as for ids: the upload code's state cannot change between its check and
            // its use, even when `tracer-server append` or a second server writes meanwhile.
            try db.inTransaction(.immediate) {
                outcome = try Self.appendKeyHistory(records, credential: credential, idempotencyKey: idempotencyKey, now: now, db: db)
                return .commit
            }
            return outcome
        }
    }

    private static func appendKeyHistory(
        _ records: [DailyKeyRecord], credential: SubmissionCredential, idempotencyKey: IdempotencyKey?, now: UnixSeconds, db: Database
    ) throws -> SubmissionOutcome {
        let authority: String
        switch try admit(credential: credential, idempotencyKey: idempotencyKey, now: now, db: db) {
        case .answered(let outcome): return outcome
        case .accepted(let owner): authority = owner
        }
        var stored = 0
        let insert = try db.cachedStatement(sql: "INSERT OR IGNORE INTO submitted_keys (key, day, interval) VALUES (?, ?, ?)")
        for record in records {
            try insert.execute(arguments: [Data(record.key.bytes), record.day.number, record.intervalSeconds])
            stored += db.changesCount
        }
        try db.execute(
            sql: """
                INSERT INTO submissions (authority, via_upload_code, received_at, id_count, new_id_count, kind)
                VALUES (?, ?, ?, ?, ?, 'keys')
                """,
            arguments: [authority, credential.isUploadCode, now, records.count, stored])
        let submission = db.lastInsertedRowID
        try recordIdempotencyKey(idempotencyKey, credential: credential, submission: submission, now: now, db: db)
        return .stored(SubmissionReceipt(submission: submission, received: records.count, stored: stored))
    }

    /// Unpublished keys of days before `firstUndueDay` (those whose day ended, plus the delay,
    /// by now), in the table's order: by key, unrelated to uploads.
    public func dueKeys(before firstUndueDay: UTCDay) async throws(ServerStoreError) -> [DailyKeyRecord] {
        try await read { db in
            try Row.fetchAll(
                db, sql: "SELECT key, day, interval FROM submitted_keys WHERE batch IS NULL AND day < ? ORDER BY key",
                arguments: [firstUndueDay.number]
            ).compactMap { row in
                let bytes: Data = row[0]
                // The CHECK constraint guarantees 16 bytes.
                guard let key = try? DailyKey(bytes: bytes) else { return nil }
                return DailyKeyRecord(day: UTCDay(number: row[1]), intervalSeconds: row[2], key: key)
            }
        }
    }

    public func pendingKeyCount() async throws(ServerStoreError) -> Int {
        try await read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM submitted_keys WHERE batch IS NULL") ?? 0 }
    }

    public func heldKeyDays() async throws(ServerStoreError) -> [HeldKeyDay] {
        try await read { db in
            try Row.fetchAll(db, sql: "SELECT DISTINCT day, interval FROM submitted_keys WHERE batch IS NULL").map { row in
                HeldKeyDay(day: UTCDay(number: row[0]), intervalSeconds: row[1])
            }
        }
    }

    public func nextKeyBatchNumber() async throws(ServerStoreError) -> UInt64 {
        try await read { db in try SQLiteBatchLedger.keys.nextNumber(db) }
    }

    /// Records a key batch whose file is already on disk with what it published, and marks its
    /// real keys published, in one transaction. Refuses (returns false) when another publisher
    /// took the number or any of the keys meanwhile, so that no key is published twice.
    public func recordKeyBatch(_ batch: KeyBatchRecord, keys: [DailyKey], published: [DailyKeyRecord]) async throws(ServerStoreError) -> Bool {
        let content = PublishedKeysBlob.encode(published)
        return try await writeWithoutTransaction { db in
            var recorded = false
            try db.inTransaction(.immediate) {
                guard try !SQLiteBatchLedger.keys.isTaken(batch.number, db) else { return .rollback }
                let mark = try db.cachedStatement(sql: "UPDATE submitted_keys SET batch = ? WHERE key = ? AND batch IS NULL")
                for key in keys {
                    try mark.execute(arguments: [Int64(batch.number), Data(key.bytes)])
                    guard db.changesCount == 1 else { return .rollback }
                }
                try SQLiteBatchLedger.keys.insert(
                    [
                        Int64(batch.number), batch.timeRange.start, batch.timeRange.end, batch.keyCount, batch.fakeKeyCount, batch.publishedAt,
                    ], content: content, db)
                recorded = true
                return .commit
            }
            return recorded
        }
    }

    /// Marks live key batches whose last day ended by `cutoff` as expired and forgets their
    /// keys; also drops pending keys whose day left the retention period unpublished (possible
    /// only when publication stopped for weeks). Returns the expired batches' numbers.
    public func expireKeyBatches(endingBy cutoff: UnixSeconds, now: UnixSeconds) async throws(ServerStoreError) -> [UInt64] {
        try await write { db in
            let numbers = try SQLiteBatchLedger.keys.expire(endingBy: cutoff, now: now, db)
            for number in numbers {
                try db.execute(sql: "DELETE FROM submitted_keys WHERE batch = ?", arguments: [number])
            }
            // Day d ends at (d + 1) × 86400.
            try db.execute(
                sql: "DELETE FROM submitted_keys WHERE batch IS NULL AND (day + 1) * 86400 <= ?", arguments: [cutoff])
            return numbers.map { UInt64($0) }
        }
    }

    public func liveKeyBatches() async throws(ServerStoreError) -> [KeyBatchRecord] {
        try await read { db in
            try SQLiteBatchLedger.keys.live(db).map { row in
                KeyBatchRecord(
                    number: UInt64(row[0] as Int64), timeRange: PublishedTimeRange(start: row[1], end: row[2]),
                    keyCount: row[3], fakeKeyCount: row[4], publishedAt: row[5])
            }
        }
    }
}
