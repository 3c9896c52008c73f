import Foundation
import PositiveListFormat
import ServerStorage
import TracerCore

extension PostgresServerStore {
    /// One publisher across every instance: a session advisory lock on a connection of its own,
    /// taken without waiting (an instance that finds it held skips this round; the holder
    /// publishes what is due). PostgreSQL releases it when the connection ends, so a publisher
    /// killed mid-publication does not block the next one.
    public func lockPublication() async throws(PublicationLockError) -> any PublicationLock {
        let slot = PostgresConnectionSlot(label: "tracer-server.postgres.publication")
        let acquired: Bool
        do {
            acquired = try await slot.run(settings: settings) { connection in
                try connection.exec("SELECT pg_try_advisory_lock($1)", [.int(PostgresSchema.publicationLockKey)]).first!.bool(0)
            }
        } catch let error as PostgresError {
            await slot.close()
            throw .store(.postgres(error))
        } catch {
            await slot.close()
            throw .store(.postgres(PostgresError(context: "taking the publication lock", sqlState: nil, message: "\(error)")))
        }
        guard acquired else {
            await slot.close()
            throw .anotherInstancePublishing
        }
        return AdvisoryPublicationLock(slot: slot, settings: settings)
    }

    /// The pending ids whose windows end after `cutoff` and stopped being valid by `dueBy`,
    /// sorted by id; the ones still valid after `dueBy` wait (anyone reading the list could
    /// broadcast them). Ids that expired unpublished are deleted by
    /// ``expireBatches(endingBy:now:)``.
    public func pendingEntries(endingAfter cutoff: UnixSeconds, dueBy: UnixSeconds) async throws(ServerStoreError) -> PendingEntries {
        try await run { connection in
            let rows = try connection.exec(
                "SELECT id, valid_from, valid_until, submission FROM submitted_ids WHERE batch IS NULL AND valid_until > $1 AND valid_until <= $2",
                [.int(cutoff), .int(dueBy)]).all
            var entries: [PositiveListEntry] = []
            entries.reserveCapacity(rows.count)
            var last: Int64 = 0
            for row in rows {
                entries.append(PositiveListEntry(
                    id: UserID(rawValue: UInt64(bitPattern: try row.int(0))), validFrom: try row.int(1), validUntil: try row.int(2)))
                last = max(last, try row.int(3))
            }
            entries.sort { $0.id < $1.id }
            let waiting = try connection.exec(
                "SELECT count(*), min(valid_until) FROM submitted_ids WHERE batch IS NULL AND valid_until > $1", [.int(dueBy)]).first!
            return PendingEntries(
                entries: entries, lastSubmission: last, waitingIDs: Int(try waiting.int(0)), nextDueBy: try waiting.optionalInt(1))
        }
    }

    public func nextBatchNumber() async throws(ServerStoreError) -> UInt64 {
        try await run { connection in try PostgresBatchLedger.ids.nextNumber(connection) }
    }

    /// Records the batch and marks exactly its ids published, in one transaction; refuses
    /// (false) when its number or any of its ids was taken by another publisher meanwhile.
    public func recordBatch(_ batch: BatchRecord, publishing pending: PendingEntries) async throws(ServerStoreError) -> Bool {
        let ids = pending.entries.map { Int64(bitPattern: $0.id.rawValue) }
        let values: [PostgresValue] = [
            .int(Int64(batch.number)), .int(batch.timeRange.start), .int(batch.timeRange.end), .int(Int64(batch.idCount)),
            .int(batch.lastSubmission), .int(batch.publishedAt),
        ]
        let content = [UInt8](PendingEntriesBlob.encode(pending.entries))
        return try await run { connection in
            try PostgresBatchLedger.ids.record(values, content: content, members: .intArray(ids), memberCount: ids.count, connection)
        }
    }

    /// Marks live batches whose every window ended by `cutoff` as expired and forgets their ids,
    /// and the pending ids that expired before they could be published; returns the batches'
    /// numbers.
    public func expireBatches(endingBy cutoff: UnixSeconds, now: UnixSeconds) async throws(ServerStoreError) -> [UInt64] {
        try await transaction { connection in try PostgresBatchLedger.ids.expire(endingBy: cutoff, now: now, connection) }
    }

    public func liveBatches() async throws(ServerStoreError) -> [BatchRecord] {
        try await run { connection in
            try PostgresBatchLedger.ids.live(connection).map { row in
                BatchRecord(
                    number: UInt64(try row.int(0)), timeRange: PublishedTimeRange(start: try row.int(1), end: try row.int(2)),
                    idCount: Int(try row.int(3)), lastSubmission: try row.int(4), publishedAt: try row.int(5))
            }
        }
    }

    public func liveBatchContents(
        idBatchesAfter idBatch: UInt64, keyBatchesAfter keyBatch: UInt64
    ) async throws(ServerStoreError) -> LiveBatchContents {
        try await transaction { connection in
            var contents = LiveBatchContents()
            for row in try PostgresBatchLedger.ids.liveContents(after: idBatch, connection) {
                contents.idBatches.append(try PublishedIDBatch(
                    number: UInt64(try row.int(0)), idCount: Int(try row.int(1)), content: row.isNull(2) ? nil : Data(try row.bytes(2))))
            }
            for row in try PostgresBatchLedger.keys.liveContents(after: keyBatch, connection) {
                contents.keyBatches.append(try PublishedKeyBatch(
                    number: UInt64(try row.int(0)), keyCount: Int(try row.int(1)), content: row.isNull(2) ? nil : Data(try row.bytes(2))))
            }
            return contents
        }
    }

    public func purge(endingBefore cutoff: UnixSeconds, now: UnixSeconds) async throws(ServerStoreError) {
        try await transaction { connection in
            try connection.exec("DELETE FROM upload_codes WHERE expires_at <= $1 OR used_at <= $1", [.int(cutoff)])
            try connection.exec("DELETE FROM idempotency_keys WHERE created_at <= $1", [.int(now - 7 * UnixSeconds.secondsPerDay)])
        }
    }
}

/// The publication lock's session; closing it releases the lock.
private final class AdvisoryPublicationLock: PublicationLock {
    let slot: PostgresConnectionSlot
    let settings: PostgresSettings
    init(slot: PostgresConnectionSlot, settings: PostgresSettings) {
        self.slot = slot
        self.settings = settings
    }

    /// Unlocks before closing: the server frees a closed session's locks only once its backend
    /// has exited, a moment after the close, and a publication started in that moment (the
    /// next scheduled one, or a test's) would find the lock still held.
    func release() async {
        _ = try? await slot.run(settings: settings) { connection in
            try connection.exec("SELECT pg_advisory_unlock($1)", [.int(PostgresSchema.publicationLockKey)])
        }
        await slot.close()
    }
}
