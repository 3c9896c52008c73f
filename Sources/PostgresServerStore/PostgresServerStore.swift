import Foundation
import Logging
import PositiveListFormat
import ServerStorage
import TracerCore

/// The server's data in a PostgreSQL database, for several `serve` instances behind one load
/// balancer: what ``ServerStore`` keeps in its SQLite file, with the same promises (see
/// ``SubmissionStore``), made safe for instances that commit concurrently:
/// - an upload runs in one READ COMMITTED transaction; its upload code is marked used with
///   `UPDATE … WHERE used_at IS NULL RETURNING`, so of two uploads with one code exactly one
///   finds it unused; its ids go in with `INSERT … ON CONFLICT (id) DO NOTHING`, so an id is
///   stored once whichever instance sees it first;
/// - publication is admitted to one instance at a time by a session advisory lock, which
///   PostgreSQL releases when the publishing process dies; a batch marks exactly the ids it
///   publishes, so ids committed during a publication wait for the next batch;
/// - deadlocks and serialization failures (SQLSTATE 40P01, 40001) rerun the transaction.
///
/// Uploads are checked against the database: the ids of live batches stay in `submitted_ids`
/// until their batch expires, and what each batch published stays with its row for the log, so
/// no instance reads a batch file. Whichever instance publishes writes the files into its own
/// published directory; the instances share one volume, or each syncs its directory to the one
/// bucket that serves the list (``ObjectStoreSync`` takes this store's lock and reconciles the
/// directories through the bucket).
public final class PostgresServerStore: SubmissionStore {
    public let settings: PostgresSettings
    let pool: PostgresConnectionPool

    private init(settings: PostgresSettings, poolSize: Int) {
        self.settings = settings
        self.pool = PostgresConnectionPool(settings: settings, size: poolSize)
    }

    /// Connects and brings the schema up to date (refusing a newer one); `publishedDirectory`
    /// is this instance's, read only for live batches recorded before schema version 4 and
    /// still without their content (``fillRecordedContent(from:logger:)``, which `logger` warns
    /// through).
    public static func open(
        settings: PostgresSettings, publishedDirectory: PublishedDirectory, poolSize: Int = 4,
        logger: Logger = Logger(label: "tracer-server")
    ) async throws(ServerStoreError) -> PostgresServerStore {
        let store = PostgresServerStore(settings: settings, poolSize: poolSize)
        try await store.migrate()
        await store.fillRecordedContent(from: publishedDirectory, logger: logger)
        return store
    }

    /// For `tracer-server doctor`: the schema version the database has (0 before the first
    /// `serve`), connecting without changing anything.
    public static func schemaVersion(settings: PostgresSettings) async throws(ServerStoreError) -> Int {
        let store = PostgresServerStore(settings: settings, poolSize: 1)
        return try await store.run { connection in
            guard try connection.exec("SELECT to_regclass('tracer_schema_migrations') IS NOT NULL").first?.bool(0) == true else { return 0 }
            return Int(try connection.exec("SELECT coalesce(max(version), 0) FROM tracer_schema_migrations").first?.int(0) ?? 0)
        }
    }

    public static var knownSchemaVersion: Int { PostgresSchema.latestVersion }

    /// The schema's steps not yet applied, in one transaction under the migration lock.
    private func migrate() async throws(ServerStoreError) {
        try await transaction { connection in
            try connection.exec("SELECT pg_advisory_xact_lock($1)", [.int(PostgresSchema.migrationLockKey)])
            try connection.exec("""
                CREATE TABLE IF NOT EXISTS tracer_schema_migrations (
                    version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())
                """)
            let applied = Set(try connection.exec("SELECT version FROM tracer_schema_migrations").all.map { Int(try $0.int(0)) })
            if let newest = applied.max(), newest > PostgresSchema.latestVersion {
                throw ServerStoreError.newerPostgresSchema(version: newest, known: PostgresSchema.latestVersion)
            }
            for step in PostgresSchema.migrations where !applied.contains(step.version) {
                try connection.execScript(step.sql)
                try connection.exec(
                    "INSERT INTO tracer_schema_migrations (version, name) VALUES ($1, $2)", [.int(Int64(step.version)), .text(step.name)])
            }
        }
    }

    /// Copies into the database what the live batches recorded before version 4 published, from
    /// the files present and intact in this instance's published directory
    /// (``RecordedBatchFile``). Best effort, at every open: the instances need not hold each
    /// other's files, so a missing or damaged file, or a failure here, leaves those rows without
    /// content (the log waits at them; uploads are checked against `submitted_ids`, not this)
    /// and a warning, never a refused open: `serve` and `sync`, which fetches the files, still
    /// run, and the next open here, or the instance that has the file, fills it. Each update
    /// fills only a row still without content, so instances opening at once agree.
    ///
    /// Then, once no live row is without content (whichever instance filled it), this instance's
    /// retired files are deleted (``RecordedBatchFile/retireFiles(in:stillUnfilled:lastIDBatch:lastKeyBatch:logger:)``);
    /// never after a failure here.
    func fillRecordedContent(from directory: PublishedDirectory, logger: Logger) async {
        do {
            var unfilled = try await unfilled()
            if !unfilled.isEmpty {
                let filled = RecordedBatchFile.fill(unfilled, in: directory, logger: logger)
                if !filled.ids.isEmpty || !filled.keys.isEmpty {
                    try await transaction { connection in
                        try PostgresBatchLedger.ids.fill(filled.ids, connection)
                        try PostgresBatchLedger.keys.fill(filled.keys, connection)
                    }
                }
                unfilled = try await self.unfilled()
            }
            let (lastIDBatch, lastKeyBatch) = try await run { connection in
                (try PostgresBatchLedger.ids.nextNumber(connection) - 1, try PostgresBatchLedger.keys.nextNumber(connection) - 1)
            }
            RecordedBatchFile.retireFiles(in: directory, stillUnfilled: unfilled, lastIDBatch: lastIDBatch, lastKeyBatch: lastKeyBatch, logger: logger)
        } catch {
            logger.warning("published batches not copied into the database; the next start tries again", metadata: ["reason": "\(error)"])
        }
    }

    private func unfilled() async throws(ServerStoreError) -> RecordedBatchFile.Unfilled {
        try await run { connection in
            RecordedBatchFile.Unfilled(
                ids: try PostgresBatchLedger.ids.listingsWithoutContent(kind: .ids, connection),
                keys: try PostgresBatchLedger.keys.listingsWithoutContent(kind: .keys, connection))
        }
    }

    public func batchesWithoutContent() async throws(ServerStoreError) -> [String] {
        try await unfilled().names
    }

    // MARK: Running statements

    /// Runs `body` on a pooled connection, its failures as ``ServerStoreError``.
    func run<T: Sendable>(_ body: @escaping @Sendable (PostgresConnection) throws -> T) async throws(ServerStoreError) -> T {
        do {
            return try await pool.withConnection(body)
        } catch let error as ServerStoreError {
            throw error
        } catch let error as PostgresError {
            throw .postgres(error)
        } catch {
            throw .postgres(PostgresError(context: "using the database", sqlState: nil, message: String(describing: error)))
        }
    }

    /// Runs `body` in one transaction, again (up to five times) after a deadlock or a
    /// serialization failure, and with `retryingUniqueViolations` after a unique violation: the
    /// sign that a concurrent transaction inserted the same key first, which the next attempt
    /// then sees. Also again when the pooled connection turned out broken before the transaction
    /// began (the database restarted since its last use): the pool then opens a new one, so the
    /// first requests after a restart succeed instead of each finding a dead connection.
    func transaction<T: Sendable>(
        retryingUniqueViolations: Bool = false, _ body: @escaping @Sendable (PostgresConnection) throws -> T
    ) async throws(ServerStoreError) -> T {
        var attempt = 1
        while true {
            do {
                return try await run { connection in try connection.transaction { try body($0) } }
            } catch .postgres(let error) where attempt < 5 && (error.isRetryable || error.nothingDone || (retryingUniqueViolations && error.isUniqueViolation)) {
                attempt += 1
            }
        }
    }

    // MARK: Codes

    public func recordIssuedCode(_ code: UploadCode, authority: String, issuedAt: UnixSeconds, expiresAt: UnixSeconds) async throws(ServerStoreError) {
        let digest = code.digest
        _ = try await run { connection in
            try connection.exec(
                "INSERT INTO upload_codes (digest, authority, issued_at, expires_at) VALUES ($1, $2, $3, $4)",
                [.bytes(digest), .text(authority), .int(issuedAt), .int(expiresAt)])
        }
    }

    public func status(of code: UploadCode, now: UnixSeconds) async throws(ServerStoreError) -> UploadCodeStatus {
        let digest = code.digest
        return try await run { connection in try Self.status(ofCodeDigest: digest, now: now, connection) }
    }

    /// As ``ServerStore``: looked up by key, the stored digest then compared in constant time.
    static func status(ofCodeDigest digest: [UInt8], now: UnixSeconds, _ connection: PostgresConnection) throws -> UploadCodeStatus {
        guard let row = try connection.exec(
            "SELECT digest, authority, expires_at, used_at FROM upload_codes WHERE digest = $1", [.bytes(digest)]).first
        else { return .unknown }
        guard ConstantTime.equal(try row.bytes(0), digest) else { return .unknown }
        if !row.isNull(3) { return .alreadyUsed }
        let expiresAt = try row.int(2)
        if expiresAt <= now { return try endedCodeStatus(digest: digest, connection) }
        return .valid(authority: try row.string(1), expiresAt: expiresAt)
    }

    // MARK: Uploads

    public func appendHistory(
        _ entries: [PositiveListEntry], credential: SubmissionCredential, idempotencyKey: IdempotencyKey?, now: UnixSeconds
    ) async throws(ServerStoreError) -> SubmissionOutcome {
        // Sorted by id, each once: concurrent uploads then take their ids' row locks in the same
        // order, which keeps overlapping uploads from deadlocking.
        let fresh = SubmittedEntries.new(entries) { _ in false }
        let ids = fresh.map { Int64(bitPattern: $0.id.rawValue) }
        let validFrom = fresh.map(\.validFrom)
        let validUntil = fresh.map(\.validUntil)
        return try await transaction(retryingUniqueViolations: true) { connection in
            let authority: String
            switch try Self.admit(credential: credential, idempotencyKey: idempotencyKey, now: now, connection) {
            case .answered(let outcome): return outcome
            case .accepted(let owner): authority = owner
            }
            let submission = try connection.exec(
                """
                INSERT INTO submissions (authority, via_upload_code, received_at, id_count, new_id_count, kind)
                VALUES ($1, $2, $3, $4, 0, 'ids') RETURNING number
                """,
                [.text(authority), .bool(credential.isUploadCode), .int(now), .int(Int64(entries.count))]).first!.int(0)
            var stored = 0
            if !ids.isEmpty {
                stored = try connection.exec(
                    """
                    INSERT INTO submitted_ids (id, valid_from, valid_until, submission)
                    SELECT id, valid_from, valid_until, $4 FROM unnest($1::bigint[], $2::bigint[], $3::bigint[]) AS t(id, valid_from, valid_until)
                    ON CONFLICT (id) DO NOTHING
                    """,
                    [.intArray(ids), .intArray(validFrom), .intArray(validUntil), .int(submission)]).affectedRowCount
                try connection.exec("UPDATE submissions SET new_id_count = $1 WHERE number = $2", [.int(Int64(stored)), .int(submission)])
            }
            if let idempotencyKey {
                try connection.exec(
                    "INSERT INTO idempotency_keys (scope, key, request_digest, submission, created_at) VALUES ($1, $2, $3, $4, $5)",
                    [.text(credential.idempotencyScope), .text(idempotencyKey.key), .bytes(idempotencyKey.requestDigest),
                     .int(submission), .int(now)])
            }
            return .stored(SubmissionReceipt(submission: submission, received: entries.count, stored: stored))
        }
    }

    /// The idempotency and credential checks of ``ServerStore/admit(credential:idempotencyKey:now:db:)``,
    /// in a transaction that other instances may commit next to.
    static func admit(
        credential: SubmissionCredential, idempotencyKey: IdempotencyKey?, now: UnixSeconds, _ connection: PostgresConnection
    ) throws -> SubmissionAdmission {
        if let idempotencyKey, let answer = try previousAnswer(to: idempotencyKey, credential: credential, connection) {
            return .answered(answer)
        }
        switch credential {
        case .authority(let name):
            return .accepted(authority: name)
        case .uploadCode(let code):
            let digest = code.digest
            // A concurrent upload holding the row makes this wait for its end; READ COMMITTED
            // then checks the condition again on the committed row.
            if let row = try connection.exec(
                "UPDATE upload_codes SET used_at = $2 WHERE digest = $1 AND used_at IS NULL AND expires_at > $2 RETURNING digest, authority",
                [.bytes(digest), .int(now)]).first, ConstantTime.equal(try row.bytes(0), digest)
            {
                return .accepted(authority: try row.string(1))
            }
            // The code may have been used a moment ago by this very request, sent twice: its
            // key, committed meanwhile, is visible to this new statement.
            if let idempotencyKey, let answer = try previousAnswer(to: idempotencyKey, credential: credential, connection) {
                return .answered(answer)
            }
            switch try status(ofCodeDigest: digest, now: now, connection) {
            case .unknown: return .answered(.refused(.unknownCode))
            case .expired: return .answered(.refused(.expiredCode))
            case .revoked: return .answered(.refused(.revokedCode))
            case .alreadyUsed, .valid: return .answered(.refused(.usedCode))
            }
        }
    }

    private static func previousAnswer(
        to idempotencyKey: IdempotencyKey, credential: SubmissionCredential, _ connection: PostgresConnection
    ) throws -> SubmissionOutcome? {
        guard let previous = try connection.exec(
            """
            SELECT k.request_digest, s.number, s.id_count, s.new_id_count
            FROM idempotency_keys k JOIN submissions s ON s.number = k.submission
            WHERE k.scope = $1 AND k.key = $2
            """,
            [.text(credential.idempotencyScope), .text(idempotencyKey.key)]).first
        else { return nil }
        guard try previous.bytes(0) == idempotencyKey.requestDigest else { return .refused(.idempotencyKeyReused) }
        return .replayed(SubmissionReceipt(
            submission: try previous.int(1), received: Int(try previous.int(2)), stored: Int(try previous.int(3))))
    }

    public func uploadCodeCounts(now: UnixSeconds) async throws(ServerStoreError) -> UploadCodeCounts {
        try await run { connection in
            let row = try connection.exec(
                "SELECT count(*) FILTER (WHERE expires_at > $1), count(*) FILTER (WHERE expires_at <= $1) FROM upload_codes WHERE used_at IS NULL",
                [.int(now)]).first!
            return UploadCodeCounts(open: Int(try row.int(0)), expiredUnused: Int(try row.int(1)))
        }
    }

    public var connectionPoolUsage: ConnectionPoolUsage? { pool.usage }

    public func summary(now: UnixSeconds) async throws(ServerStoreError) -> StoreSummary {
        try await run { connection in
            let row = try connection.exec(
                """
                SELECT (SELECT count(*) FROM submissions),
                       (SELECT count(*) FROM submitted_ids),
                       (SELECT count(*) FROM submitted_ids WHERE batch IS NULL),
                       (SELECT count(*) FROM batches WHERE expired_at IS NULL),
                       (SELECT max(published_at) FROM batches),
                       (SELECT count(*) FROM upload_codes WHERE used_at IS NULL AND expires_at > $1),
                       (SELECT count(*) FROM submitted_keys),
                       (SELECT count(*) FROM submitted_keys WHERE batch IS NULL),
                       (SELECT count(*) FROM key_batches WHERE expired_at IS NULL)
                """, [.int(now)]).first!
            return StoreSummary(
                submissions: Int(try row.int(0)), storedIDs: Int(try row.int(1)), unpublishedIDs: Int(try row.int(2)),
                liveBatches: Int(try row.int(3)), lastPublishedAt: try row.optionalInt(4), openUploadCodes: Int(try row.int(5)),
                storedKeys: Int(try row.int(6)), unpublishedKeys: Int(try row.int(7)), liveKeyBatches: Int(try row.int(8)))
        }
    }
}
