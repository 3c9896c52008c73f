import Foundation
import GRDB
import PositiveListFormat
import ServerStorage
import TracerCore

extension ServerStore {
    /// Stores `entries` (already validated) in one transaction: the ids, the audit row, the use
    /// of the upload code and the idempotency key commit together or not at all.
    ///
    /// New ids are appended to `pending_histories`; an id is new when it is neither in a live
    /// batch (``PublishedIDCache``) nor pending (``PendingIDCache``); both are ``DatabaseMirror``s nor repeated earlier in the
    /// same history.
    public func appendHistory(
        _ entries: [PositiveListEntry], credential: SubmissionCredential, idempotencyKey: IdempotencyKey?, now: UnixSeconds
    ) async throws(ServerStoreError) -> SubmissionOutcome {
        let knownIDs = KnownIDs(pending: pendingIDs, published: publishedIDs)
        return try await writeWithoutTransaction { db in
            var outcome = SubmissionOutcome.refused(.unknownCode)
            var appended: [UInt64] = []
            // IMMEDIATE: the write lock from the start, so that the pending ids and live
            // batches checked below cannot change before this transaction commits.
            try db.inTransaction(.immediate) {
                (outcome, appended) = try Self.appendHistory(
                    entries, credential: credential, idempotencyKey: idempotencyKey, now: now, knownIDs: knownIDs, db: db)
                return .commit
            }
            knownIDs.pending.update { $0.formUnion(appended) }
            return outcome
        }
    }

    /// How many published ids an upload is checked against, and the memory they take.
    public struct PublishedIDsInMemory: Sendable, Equatable {
        public let ids: Int
        public let bytes: Int
    }

    /// Reads the ids of the live batches now rather than at the first upload.
    @discardableResult
    public func loadPublishedIDs() async throws(ServerStoreError) -> PublishedIDsInMemory {
        let publishedIDs = self.publishedIDs
        return try await writeWithoutTransaction { db in
            var loaded = PublishedIDsInMemory(ids: 0, bytes: 0)
            // IMMEDIATE for the same reason as an upload: no batch may expire between listing
            // the live batches and reading their ids.
            try db.inTransaction(.immediate) {
                loaded = try publishedIDs.withCurrentValue(db, dataVersion: try db.dataVersion()) {
                    PublishedIDsInMemory(ids: $0.count, bytes: $0.memoryBytes)
                }
                return .commit
            }
            return loaded
        }
    }

    /// The two places an id already accepted may be.
    private struct KnownIDs: Sendable {
        let pending: DatabaseMirror<Set<UInt64>>
        let published: DatabaseMirror<PublishedIDIndex>
    }

    /// The body of ``appendHistory(_:credential:idempotencyKey:now:)``, inside its transaction;
    /// also returns the ids appended to `pending_histories`.
    private static func appendHistory(
        _ entries: [PositiveListEntry], credential: SubmissionCredential, idempotencyKey: IdempotencyKey?, now: UnixSeconds,
        knownIDs: KnownIDs, db: Database
    ) throws -> (SubmissionOutcome, appended: [UInt64]) {
        let authority: String
        switch try admit(credential: credential, idempotencyKey: idempotencyKey, now: now, db: db) {
        case .answered(let outcome): return (outcome, [])
        case .accepted(let owner): authority = owner
        }

        let dataVersion = try db.dataVersion()
        let newEntries = try knownIDs.published.withCurrentValue(db, dataVersion: dataVersion) { published in
            try knownIDs.pending.withCurrentValue(db, dataVersion: dataVersion) { pending in
                SubmittedEntries.new(entries) { pending.contains($0) || published.contains($0) }
            }
        }
        try db.execute(
            sql: "INSERT INTO submissions (authority, via_upload_code, received_at, id_count, new_id_count) VALUES (?, ?, ?, ?, ?)",
            arguments: [authority, credential.isUploadCode, now, entries.count, newEntries.count])
        let submission = db.lastInsertedRowID
        if !newEntries.isEmpty {
            try db.execute(
                sql: "INSERT INTO pending_histories (submission, id_count, entries) VALUES (?, ?, ?)",
                arguments: [submission, newEntries.count, PendingEntriesBlob.encode(newEntries)])
        }
        try recordIdempotencyKey(idempotencyKey, credential: credential, submission: submission, now: now, db: db)
        return (.stored(SubmissionReceipt(submission: submission, received: entries.count, stored: newEntries.count)),
                newEntries.map(\.id.rawValue))
    }

    /// The checks every kind of history passes first, inside its transaction: a repeated
    /// idempotency key answers with the first submission (or is refused with another body), an
    /// upload code must be valid and is marked used.
    static func admit(
        credential: SubmissionCredential, idempotencyKey: IdempotencyKey?, now: UnixSeconds, db: Database
    ) throws -> SubmissionAdmission {
        let scope = credential.idempotencyScope
        if let idempotencyKey, let previous = try Row.fetchOne(
            db, sql: """
                SELECT k.request_digest, s.number, s.id_count, s.new_id_count
                FROM idempotency_keys k JOIN submissions s ON s.number = k.submission
                WHERE k.scope = ? AND k.key = ?
                """,
            arguments: [scope, idempotencyKey.key])
        {
            let digest: Data = previous[0]
            guard Array(digest) == idempotencyKey.requestDigest else { return .answered(.refused(.idempotencyKeyReused)) }
            return .answered(.replayed(SubmissionReceipt(submission: previous[1], received: previous[2], stored: previous[3])))
        }

        let authority: String
        switch credential {
        case .authority(let name):
            authority = name
        case .uploadCode(let code):
            switch try Self.status(ofCodeDigest: code.digest, now: now, db: db) {
            case .unknown: return .answered(.refused(.unknownCode))
            case .expired: return .answered(.refused(.expiredCode))
            case .revoked: return .answered(.refused(.revokedCode))
            case .alreadyUsed: return .answered(.refused(.usedCode))
            case .valid(let owner, _): authority = owner
            }
            try db.execute(sql: "UPDATE upload_codes SET used_at = ? WHERE digest = ?", arguments: [now, Data(code.digest)])
        }

        return .accepted(authority: authority)
    }

    static func recordIdempotencyKey(
        _ idempotencyKey: IdempotencyKey?, credential: SubmissionCredential, submission: Int64, now: UnixSeconds, db: Database
    ) throws {
        guard let idempotencyKey else { return }
        try db.execute(
            sql: "INSERT INTO idempotency_keys (scope, key, request_digest, submission, created_at) VALUES (?, ?, ?, ?, ?)",
            arguments: [credential.idempotencyScope, idempotencyKey.key, Data(idempotencyKey.requestDigest), submission, now])
    }

    /// Deletes codes and idempotency keys that no longer serve any purpose. (Published ids go
    /// when their batch expires; see ``expireBatches(endingBy:now:)``.)
    public func purge(endingBefore cutoff: UnixSeconds, now: UnixSeconds) async throws(ServerStoreError) {
        try await write { db in
            try db.execute(sql: "DELETE FROM upload_codes WHERE expires_at <= ? OR used_at <= ?", arguments: [cutoff, cutoff])
            try db.execute(sql: "DELETE FROM idempotency_keys WHERE created_at <= ?", arguments: [now - 7 * UnixSeconds.secondsPerDay])
        }
    }
}
