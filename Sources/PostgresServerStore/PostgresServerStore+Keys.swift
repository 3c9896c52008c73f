import Foundation
import PositiveListFormat
import ServerStorage
import TracerCore

/// Daily keys on PostgreSQL: ``ServerStore``'s key table and key batches, with the id store's
/// concurrency rules (a key is stored once by its primary key, whichever instance sees it; a key
/// batch marks exactly the keys it publishes).
extension PostgresServerStore {
    public func appendKeyHistory(
        _ records: [DailyKeyRecord], credential: SubmissionCredential, idempotencyKey: IdempotencyKey?, now: UnixSeconds
    ) async throws(ServerStoreError) -> SubmissionOutcome {
        // In key order, so that overlapping uploads take their row locks in the same order.
        let sorted = records.sorted { $0.key.bytes.lexicographicallyPrecedes($1.key.bytes) }
        let keys = sorted.map(\.key.bytes)
        let days = sorted.map(\.day.number)
        let intervals = sorted.map(\.intervalSeconds)
        return try await transaction(retryingUniqueViolations: true) { connection in
            let authority: String
            switch try Self.admit(credential: credential, idempotencyKey: idempotencyKey, now: now, connection) {
            case .answered(let outcome): return outcome
            case .accepted(let owner): authority = owner
            }
            var stored = 0
            if !keys.isEmpty {
                stored = try connection.exec(
                    """
                    INSERT INTO submitted_keys (key, day, interval)
                    SELECT key, day, interval FROM unnest($1::bytea[], $2::bigint[], $3::bigint[]) AS t(key, day, interval)
                    ON CONFLICT (key) DO NOTHING
                    """,
                    [.bytesArray(keys), .intArray(days), .intArray(intervals)]).affectedRowCount
            }
            let submission = try connection.exec(
                """
                INSERT INTO submissions (authority, via_upload_code, received_at, id_count, new_id_count, kind)
                VALUES ($1, $2, $3, $4, $5, 'keys') RETURNING number
                """,
                [.text(authority), .bool(credential.isUploadCode), .int(now), .int(Int64(records.count)), .int(Int64(stored))]).first!.int(0)
            if let idempotencyKey {
                try connection.exec(
                    "INSERT INTO idempotency_keys (scope, key, request_digest, submission, created_at) VALUES ($1, $2, $3, $4, $5)",
                    [.text(credential.idempotencyScope), .text(idempotencyKey.key), .bytes(idempotencyKey.requestDigest),
                     .int(submission), .int(now)])
            }
            return .stored(SubmissionReceipt(submission: submission, received: records.count, stored: stored))
        }
    }

    /// Unpublished keys of days before `firstUndueDay`, by key (unrelated to uploads).
    public func dueKeys(before firstUndueDay: UTCDay) async throws(ServerStoreError) -> [DailyKeyRecord] {
        try await run { connection in
            try connection.exec(
                "SELECT key, day, interval FROM submitted_keys WHERE batch IS NULL AND day < $1 ORDER BY key",
                [.int(firstUndueDay.number)]
            ).all.map { row in
                DailyKeyRecord(day: UTCDay(number: try row.int(1)), intervalSeconds: try row.int(2), key: try DailyKey(bytes: try row.bytes(0)))
            }
        }
    }

    public func pendingKeyCount() async throws(ServerStoreError) -> Int {
        try await run { connection in Int(try connection.exec("SELECT count(*) FROM submitted_keys WHERE batch IS NULL").first!.int(0)) }
    }

    public func heldKeyDays() async throws(ServerStoreError) -> [HeldKeyDay] {
        try await run { connection in
            try connection.exec("SELECT DISTINCT day, interval FROM submitted_keys WHERE batch IS NULL").all.map { row in
                HeldKeyDay(day: UTCDay(number: try row.int(0)), intervalSeconds: try row.int(1))
            }
        }
    }

    public func nextKeyBatchNumber() async throws(ServerStoreError) -> UInt64 {
        try await run { connection in try PostgresBatchLedger.keys.nextNumber(connection) }
    }

    /// Records a key batch whose file is written with what it published, and marks exactly its
    /// real keys published; refuses (false) when its number or one of its keys was taken meanwhile.
    public func recordKeyBatch(_ batch: KeyBatchRecord, keys: [DailyKey], published: [DailyKeyRecord]) async throws(ServerStoreError) -> Bool {
        let content = [UInt8](PublishedKeysBlob.encode(published))
        let keyBytes = keys.map(\.bytes)
        let values: [PostgresValue] = [
            .int(Int64(batch.number)), .int(batch.timeRange.start), .int(batch.timeRange.end), .int(Int64(batch.keyCount)),
            .int(Int64(batch.fakeKeyCount)), .int(batch.publishedAt),
        ]
        return try await run { connection in
            try PostgresBatchLedger.keys.record(values, content: content, members: .bytesArray(keyBytes), memberCount: keyBytes.count, connection)
        }
    }

    /// As ``ServerStore/expireKeyBatches(endingBy:now:)``: expired key batches forget their keys,
    /// and pending keys whose day left the retention period are dropped.
    public func expireKeyBatches(endingBy cutoff: UnixSeconds, now: UnixSeconds) async throws(ServerStoreError) -> [UInt64] {
        try await transaction { connection in try PostgresBatchLedger.keys.expire(endingBy: cutoff, now: now, connection) }
    }

    public func liveKeyBatches() async throws(ServerStoreError) -> [KeyBatchRecord] {
        try await run { connection in
            try PostgresBatchLedger.keys.live(connection).map { row in
                KeyBatchRecord(
                    number: UInt64(try row.int(0)), timeRange: PublishedTimeRange(start: try row.int(1), end: try row.int(2)),
                    keyCount: Int(try row.int(3)), fakeKeyCount: Int(try row.int(4)), publishedAt: try row.int(5))
            }
        }
    }
}
