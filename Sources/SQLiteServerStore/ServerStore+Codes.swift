import Foundation
import GRDB
import ServerStorage
import TracerCore

extension ServerStore {
    public func recordIssuedCode(_ code: UploadCode, authority: String, issuedAt: UnixSeconds, expiresAt: UnixSeconds) async throws(ServerStoreError) {
        let digest = code.digest
        try await write { db in
            try db.execute(
                sql: "INSERT INTO upload_codes (digest, authority, issued_at, expires_at) VALUES (?, ?, ?, ?)",
                arguments: [Data(digest), authority, issuedAt, expiresAt])
        }
    }

    public func status(of code: UploadCode, now: UnixSeconds) async throws(ServerStoreError) -> UploadCodeStatus {
        let digest = code.digest
        return try await read { db in try Self.status(ofCodeDigest: digest, now: now, db: db) }
    }

    /// Looks the digest up by key (an index lookup reveals nothing useful: the attacker does not
    /// control the digest's bytes), then compares the stored digest in constant time.
    static func status(ofCodeDigest digest: [UInt8], now: UnixSeconds, db: Database) throws -> UploadCodeStatus {
        guard let row = try Row.fetchOne(
            db, sql: "SELECT digest, authority, expires_at, used_at FROM upload_codes WHERE digest = ?",
            arguments: [Data(digest)])
        else { return .unknown }
        let stored: Data = row["digest"]
        guard ConstantTime.equal(Array(stored), digest) else { return .unknown }
        if (row["used_at"] as Int64?) != nil { return .alreadyUsed }
        let expiresAt: Int64 = row["expires_at"]
        if expiresAt <= now {
            // Revoking ends a code as expiry does; the console's record says which it was.
            let revoked = try Bool.fetchOne(
                db, sql: "SELECT EXISTS (SELECT 1 FROM console_codes WHERE code_digest = ? AND revoked_at IS NOT NULL)", arguments: [Data(digest)]) ?? false
            return revoked ? .revoked : .expired
        }
        return .valid(authority: row["authority"], expiresAt: expiresAt)
    }
}
