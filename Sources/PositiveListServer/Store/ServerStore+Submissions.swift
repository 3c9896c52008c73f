import Foundation
import GRDB
import GRDBSQLite
import IDRotation
import PositiveListFormat

/// Who is appending a history.
public enum SubmissionCredential: Sendable, Equatable {
    case authority(name: String)
    case uploadCode(UploadCode)

    var isUploadCode: Bool {
        if case .uploadCode = self { return true }
        return false
    }

    /// Idempotency keys are scoped per credential, so two clients cannot collide on a key.
    var idempotencyScope: String {
        switch self {
        case .authority(let name): return "authority:" + name
        case .uploadCode(let code): return "code:" + Hex.encode(code.digest)
        }
    }
}

/// A client's `Idempotency-Key` and a digest of the request body it came with.
public struct IdempotencyKey: Sendable, Equatable {
    public static let maximumLength = 200

    public let key: String
    public let requestDigest: [UInt8]

    public init(key: String, requestDigest: [UInt8]) {
        self.key = key
        self.requestDigest = requestDigest
    }
}

/// An accepted submission: how many ids it carried and how many were new.
public struct SubmissionReceipt: Sendable, Equatable, Codable {
    public let submission: Int64
    public let received: Int
    public let stored: Int
}

public enum SubmissionOutcome: Sendable, Equatable {
    case stored(SubmissionReceipt)
    /// The same request was accepted before under this idempotency key: nothing new was stored.
    case replayed(SubmissionReceipt)
    case refused(SubmissionRefusal)
}

/// Reasons the store itself refuses an otherwise valid history; nothing is stored.
public enum SubmissionRefusal: Sendable, Equatable {
    case unknownCode
    case expiredCode
    case usedCode
    case idempotencyKeyReused
}

extension ServerStore {
    /// Stores `entries` (already validated) in one transaction: the ids, the audit row, the use
    /// of the upload code and the idempotency key commit together or not at all.
    ///
    /// New ids are appended to `pending_ids`; an id is new when it is neither published
    /// (`published_ids`, one lookup) nor pending (``PendingIDCache``) nor repeated earlier in
    /// the same history.
    public func appendHistory(
        _ entries: [PositiveListEntry], credential: SubmissionCredential, idempotencyKey: IdempotencyKey?, now: UnixSeconds
    ) async throws(ServerStoreError) -> SubmissionOutcome {
        let pendingIDs = self.pendingIDs
        return try await writeWithoutTransaction { db in
            var outcome = SubmissionOutcome.refused(.unknownCode)
            var appended: [Int64] = []
            // IMMEDIATE: the write lock from the start, so that the pending ids checked below
            // cannot change before this transaction commits.
            try db.inTransaction(.immediate) {
                (outcome, appended) = try Self.appendHistory(
                    entries, credential: credential, idempotencyKey: idempotencyKey, now: now, pendingIDs: pendingIDs, db: db)
                return .commit
            }
            pendingIDs.recordCommitted(appended)
            return outcome
        }
    }

    /// The body of ``appendHistory(_:credential:idempotencyKey:now:)``, inside its transaction;
    /// also returns the ids appended to `pending_ids`.
    private static func appendHistory(
        _ entries: [PositiveListEntry], credential: SubmissionCredential, idempotencyKey: IdempotencyKey?, now: UnixSeconds,
        pendingIDs: PendingIDCache, db: Database
    ) throws -> (SubmissionOutcome, appended: [Int64]) {
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
            guard Array(digest) == idempotencyKey.requestDigest else { return (.refused(.idempotencyKeyReused), []) }
            return (.replayed(SubmissionReceipt(submission: previous[1], received: previous[2], stored: previous[3])), [])
        }

        let authority: String
        switch credential {
        case .authority(let name):
            authority = name
        case .uploadCode(let code):
            switch try Self.status(ofCodeDigest: code.digest, now: now, db: db) {
            case .unknown: return (.refused(.unknownCode), [])
            case .expired: return (.refused(.expiredCode), [])
            case .alreadyUsed: return (.refused(.usedCode), [])
            case .valid(let owner, _): authority = owner
            }
            try db.execute(sql: "UPDATE upload_codes SET used_at = ? WHERE digest = ?", arguments: [now, Data(code.digest)])
        }

        try db.execute(
            sql: "INSERT INTO submissions (authority, via_upload_code, received_at, id_count, new_id_count) VALUES (?, ?, ?, ?, 0)",
            arguments: [authority, credential.isUploadCode, now, entries.count])
        let submission = db.lastInsertedRowID
        let appended = try pendingIDs.withCurrentIDs(db) { pending in
            try Self.appendNewIDs(entries, submission: submission, alreadyPending: pending, db: db)
        }
        try db.execute(sql: "UPDATE submissions SET new_id_count = ? WHERE number = ?", arguments: [appended.count, submission])
        if let idempotencyKey {
            try db.execute(
                sql: "INSERT INTO idempotency_keys (scope, key, request_digest, submission, created_at) VALUES (?, ?, ?, ?, ?)",
                arguments: [scope, idempotencyKey.key, Data(idempotencyKey.requestDigest), submission, now])
        }
        return (.stored(SubmissionReceipt(submission: submission, received: entries.count, stored: appended.count)), appended)
    }

    /// Appends the ids that are new to the server to `pending_ids` and returns them.
    ///
    /// In id order: repeats within the history become neighbours, the lookups in
    /// `published_ids` walk its pages in order, and publication finds each submission's rows
    /// already sorted.
    ///
    /// One statement per id both looks the id up in `published_ids` and inserts it when absent.
    /// It binds through SQLite's C interface: a 2,688-id history is the common case, and boxing
    /// every value into GRDB's `StatementArguments` cost more than the B-tree work itself.
    static func appendNewIDs(
        _ entries: [PositiveListEntry], submission: Int64, alreadyPending: Set<Int64>, db: Database
    ) throws -> [Int64] {
        let statement = try db.cachedStatement(sql: """
            INSERT INTO pending_ids (submission, id, valid_from, valid_until)
            SELECT ?1, ?2, ?3, ?4 WHERE NOT EXISTS (SELECT 1 FROM published_ids WHERE id = ?2)
            """)
        let handle = statement.sqliteStatement
        defer { sqlite3_reset(handle) }
        var appended: [Int64] = []
        appended.reserveCapacity(entries.count)
        var previous: UserID?
        for entry in entries.sorted(by: { $0.id < $1.id }) {
            // The first of repeated ids in one history wins, as the sort keeps their order.
            defer { previous = entry.id }
            let id = entry.id.databaseValue
            guard entry.id != previous, !alreadyPending.contains(id) else { continue }
            sqlite3_reset(handle)
            sqlite3_bind_int64(handle, 1, submission)
            sqlite3_bind_int64(handle, 2, id)
            sqlite3_bind_int64(handle, 3, entry.validFrom)
            sqlite3_bind_int64(handle, 4, entry.validUntil)
            let code = sqlite3_step(handle)
            guard code == SQLITE_DONE else {
                throw DatabaseError(resultCode: ResultCode(rawValue: code), message: String(cString: sqlite3_errmsg(db.sqliteConnection)))
            }
            if sqlite3_changes(db.sqliteConnection) > 0 { appended.append(id) }
        }
        return appended
    }

    /// Deletes ids, codes and idempotency keys that no longer serve any purpose.
    public func purge(idsEndingBefore cutoff: UnixSeconds, now: UnixSeconds) async throws(ServerStoreError) {
        try await write { db in
            try db.execute(sql: "DELETE FROM published_ids WHERE valid_until <= ?", arguments: [cutoff])
            try db.execute(sql: "DELETE FROM upload_codes WHERE expires_at <= ? OR used_at <= ?", arguments: [cutoff, cutoff])
            try db.execute(sql: "DELETE FROM idempotency_keys WHERE created_at <= ?", arguments: [now - 7 * UnixSeconds.secondsPerDay])
        }
    }
}
