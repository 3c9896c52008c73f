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
    public func appendHistory(
        _ entries: [PositiveListEntry], credential: SubmissionCredential, idempotencyKey: IdempotencyKey?, now: UnixSeconds
    ) async throws(ServerStoreError) -> SubmissionOutcome {
        try await write { db in
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
                guard Array(digest) == idempotencyKey.requestDigest else { return .refused(.idempotencyKeyReused) }
                return .replayed(SubmissionReceipt(submission: previous[1], received: previous[2], stored: previous[3]))
            }

            let authority: String
            switch credential {
            case .authority(let name):
                authority = name
            case .uploadCode(let code):
                switch try Self.status(ofCodeDigest: code.digest, now: now, db: db) {
                case .unknown: return .refused(.unknownCode)
                case .expired: return .refused(.expiredCode)
                case .alreadyUsed: return .refused(.usedCode)
                case .valid(let owner, _): authority = owner
                }
                try db.execute(sql: "UPDATE upload_codes SET used_at = ? WHERE digest = ?", arguments: [now, Data(code.digest)])
            }

            try db.execute(
                sql: "INSERT INTO submissions (authority, via_upload_code, received_at, id_count, new_id_count) VALUES (?, ?, ?, ?, 0)",
                arguments: [authority, credential.isUploadCode, now, entries.count])
            let submission = db.lastInsertedRowID
            let stored = try Self.insertIDs(entries, submission: submission, db: db)
            try db.execute(sql: "UPDATE submissions SET new_id_count = ? WHERE number = ?", arguments: [stored, submission])
            if let idempotencyKey {
                try db.execute(
                    sql: "INSERT INTO idempotency_keys (scope, key, request_digest, submission, created_at) VALUES (?, ?, ?, ?, ?)",
                    arguments: [scope, idempotencyKey.key, Data(idempotencyKey.requestDigest), submission, now])
            }
            return .stored(SubmissionReceipt(submission: submission, received: entries.count, stored: stored))
        }
    }

    /// Inserts the ids in id order (neighbouring keys touch the same B-tree pages) and returns
    /// how many were new.
    ///
    /// Binds through SQLite's C interface: a 2,688-id history is the common case, and boxing
    /// every value into GRDB's `StatementArguments` cost more than the B-tree work itself.
    static func insertIDs(_ entries: [PositiveListEntry], submission: Int64, db: Database) throws -> Int {
        let statement = try db.cachedStatement(
            sql: "INSERT OR IGNORE INTO submitted_ids (id, valid_from, valid_until, submission) VALUES (?, ?, ?, ?)")
        let handle = statement.sqliteStatement
        var stored = 0
        for entry in entries.sorted(by: { $0.id < $1.id }) {
            sqlite3_reset(handle)
            sqlite3_bind_int64(handle, 1, entry.id.databaseValue)
            sqlite3_bind_int64(handle, 2, entry.validFrom)
            sqlite3_bind_int64(handle, 3, entry.validUntil)
            sqlite3_bind_int64(handle, 4, submission)
            let code = sqlite3_step(handle)
            guard code == SQLITE_DONE else {
                sqlite3_reset(handle)
                throw DatabaseError(resultCode: ResultCode(rawValue: code), message: String(cString: sqlite3_errmsg(db.sqliteConnection)))
            }
            stored += Int(sqlite3_changes(db.sqliteConnection))
        }
        sqlite3_reset(handle)
        return stored
    }

    /// Deletes ids, codes and idempotency keys that no longer serve any purpose.
    public func purge(idsEndingBefore cutoff: UnixSeconds, now: UnixSeconds) async throws(ServerStoreError) {
        try await write { db in
            try db.execute(sql: "DELETE FROM submitted_ids WHERE valid_until <= ?", arguments: [cutoff])
            try db.execute(sql: "DELETE FROM upload_codes WHERE expires_at <= ? OR used_at <= ?", arguments: [cutoff, cutoff])
            try db.execute(sql: "DELETE FROM idempotency_keys WHERE created_at <= ?", arguments: [now - 7 * UnixSeconds.secondsPerDay])
        }
    }
}
