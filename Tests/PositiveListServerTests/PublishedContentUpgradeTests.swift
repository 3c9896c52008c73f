import Crypto
import Foundation
import GRDB
import IDRotation
import PositiveListFormat
import RetiredFormatWriters
@testable import PositiveListServer
@testable import PostgresServerStore
import ServerStorage
@testable import SQLiteServerStore
import Testing
import TestTiers
import TracerCore
import ServerTestSupport
import TracerTestSupport

/// A database whose live batches a tracer-server from before schema v6 (SQLite) or version 4
/// (PostgreSQL) recorded: rows without what the batches published, and the batch files. Opening
/// it copies that in from the files, checked against the recorded size and SHA-256; a missing or
/// damaged file leaves its row without content and a warning, never a refused open: the log
/// waits at that batch (the rest is published) until an open finds the file.
///
/// Issue 39 item 6 step 4: once an open finds every live row with its content, it deletes the
/// retired files (`index.tpli`, `batches/`, `keys/`); while one row is without, it keeps them
/// all, with a warning saying what to do, since that file is the only copy.
@Suite(.tags(.integration), .serialized, .sharedPostgres) struct PublishedContentUpgradeTests {
    static let authority = SubmissionCredential.authority(name: "Health Authority A")
    /// The SQLite schema's last step before the batches kept what they published.
    static let lastSQLiteStepWithoutContent = "v5: console accounts, sessions, issued codes, audit"
    /// The PostgreSQL schema's last version before the batches kept what they published.
    static let lastPostgresVersionWithoutContent = 3

    /// A data directory as the older server left it: id batch 1 and key batch 1, recorded and
    /// written, with the two indexes listing them, the published ids and keys in neither pending
    /// table; id batch 2, expired, its file deleted as the older publisher did.
    struct OlderData {
        let server: ServerFixture
        let backend: StoreBackend
        /// The SQLite file, or the PostgreSQL database's URL.
        let location: String
        let ids: [PositiveListEntry]
        let keys: [DailyKeyRecord]
        let idFile: [UInt8]
        let keyFile: [UInt8]

        static func make(_ backend: StoreBackend) async throws -> OlderData {
            let server = try ServerFixture()
            let now = server.clock.now()
            var generator = SplitMix64(seed: 61)
            let ids = (0..<25).map { position in
                let until = now - UnixSeconds(position) * 900
                return PositiveListEntry(id: UserID.random(using: &generator), validFrom: until - 900, validUntil: until)
            }.sorted { $0.id < $1.id }
            let yesterday = UTCDay(number: UTCDay(containing: now).number - 1)
            let keys = (0..<6).map { _ in DailyKeyRecord(day: yesterday, intervalSeconds: 900, key: DailyKey.random(using: &generator)) }
            let idFile = try PositiveListBatch.encode(number: 1, entries: ids, signingKey: server.signingKey)
            let keyFile = try PositiveListKeyBatch.encode(number: 1, records: keys, signingKey: server.signingKey)
            let idRange = PublishedTimeRange(covering: ids)!
            let keyRange = PositiveListKeyBatch.timeRange(of: keys)
            let batchRow: [any Sendable] = [1, idRange.start, idRange.end, idFile.count, Array(SHA256.hash(data: idFile)), ids.count, 1, now]
            let keyBatchRow: [any Sendable] = [1, keyRange.start, keyRange.end, keyFile.count, Array(SHA256.hash(data: keyFile)), keys.count, 0, now]
            let location: String
            switch backend {
            case .sqlite:
                location = server.paths.dataDirectory + "/older.sqlite"
                let queue = try DatabaseQueue(path: location)
                try ServerSchema.migrator.migrate(queue, upTo: lastSQLiteStepWithoutContent)
                try await queue.write { db in
                    try db.execute(
                        sql: "INSERT INTO submissions (authority, via_upload_code, received_at, id_count, new_id_count) VALUES ('A', 0, ?, ?, ?)",
                        arguments: [now, ids.count, ids.count])
                    try db.execute(
                        sql: """
                            INSERT INTO batches (number, range_start, range_end, byte_count, sha256, id_count, last_submission, published_at)
                            VALUES (?, ?, ?, ?, ?, ?, ?, ?)
                            """,
                        arguments: StatementArguments(Self.sqliteValues(batchRow)))
                    try db.execute(
                        sql: """
                            INSERT INTO key_batches (number, range_start, range_end, byte_count, sha256, key_count, fake_key_count, published_at)
                            VALUES (?, ?, ?, ?, ?, ?, ?, ?)
                            """,
                        arguments: StatementArguments(Self.sqliteValues(keyBatchRow)))
                    try db.execute(
                        sql: """
                            INSERT INTO batches (number, range_start, range_end, byte_count, sha256, id_count, last_submission, published_at, expired_at)
                            VALUES (2, 900, 1800, 100, ?, 1, 1, 1800, ?)
                            """,
                        arguments: [Data(repeating: 7, count: 32), now])
                    for key in keys {
                        try db.execute(
                            sql: "INSERT INTO submitted_keys (key, day, interval, batch) VALUES (?, ?, ?, 1)",
                            arguments: [Data(key.key.bytes), key.day.number, key.intervalSeconds])
                    }
                }
                try queue.close()
            case .postgres:
                // A version-3 database, as the older server's migrations left it, then its rows.
                location = try SharedPostgres.createDatabase()
                let pool = PostgresConnectionPool(settings: PostgresSettings(connection: location, password: nil), size: 1)
                try await pool.withConnection { connection in
                    try connection.exec("""
                        CREATE TABLE tracer_schema_migrations (
                            version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())
                        """)
                    for step in PostgresSchema.migrations where step.version <= lastPostgresVersionWithoutContent {
                        try connection.execScript(step.sql)
                        try connection.exec(
                            "INSERT INTO tracer_schema_migrations (version, name) VALUES ($1, $2)", [.int(Int64(step.version)), .text(step.name)])
                    }
                    try connection.exec(
                        """
                        INSERT INTO batches (number, range_start, range_end, byte_count, sha256, id_count, last_submission, published_at, expired_at)
                        VALUES (2, 900, 1800, 100, $1, 1, 1, 1800, $2)
                        """,
                        [.bytes([UInt8](repeating: 7, count: 32)), .int(now)])
                    try connection.exec(
                        """
                        INSERT INTO batches (number, range_start, range_end, byte_count, sha256, id_count, last_submission, published_at)
                        VALUES (1, $1, $2, $3, $4, $5, 1, $6)
                        """,
                        [.int(idRange.start), .int(idRange.end), .int(Int64(idFile.count)), .bytes(Array(SHA256.hash(data: idFile))),
                         .int(Int64(ids.count)), .int(now)])
                    try connection.exec(
                        """
                        INSERT INTO key_batches (number, range_start, range_end, byte_count, sha256, key_count, fake_key_count, published_at)
                        VALUES (1, $1, $2, $3, $4, $5, 0, $6)
                        """,
                        [.int(keyRange.start), .int(keyRange.end), .int(Int64(keyFile.count)), .bytes(Array(SHA256.hash(data: keyFile))),
                         .int(Int64(keys.count)), .int(now)])
                    for id in ids {
                        try connection.exec(
                            "INSERT INTO submitted_ids (id, valid_from, valid_until, submission, batch) VALUES ($1, $2, $3, 1, 1)",
                            [.int(Int64(bitPattern: id.id.rawValue)), .int(id.validFrom), .int(id.validUntil)])
                    }
                    for key in keys {
                        try connection.exec(
                            "INSERT INTO submitted_keys (key, day, interval, batch) VALUES ($1, $2, $3, 1)",
                            [.bytes(key.key.bytes), .int(key.day.number), .int(key.intervalSeconds)])
                    }
                }
            }
            let published = server.paths.published
            try write(idFile, to: published.retiredBatchPath(number: 1))
            try write(keyFile, to: published.retiredKeyBatchPath(number: 1))
            let idListing = PositiveListIndex.BatchListing(
                number: 1, timeRange: idRange, byteCount: idFile.count, sha256: Array(SHA256.hash(data: idFile)))
            let keyListing = PositiveListIndex.BatchListing(
                number: 1, timeRange: keyRange, byteCount: keyFile.count, sha256: Array(SHA256.hash(data: keyFile)), kind: .keys)
            try write(
                try PositiveListIndex(generation: 3, publishedAt: now, batches: [idListing], flags: .keyIndexPublished).encode(signingKey: server.signingKey),
                to: published.retiredIndexPath)
            try write(
                try PositiveListKeyIndex(generation: 2, publishedAt: now, accepts: .both, batches: [keyListing]).encode(signingKey: server.signingKey),
                to: published.path + "/" + PositiveListKeyIndex.relativePath)
            return OlderData(server: server, backend: backend, location: location, ids: ids, keys: keys, idFile: idFile, keyFile: keyFile)
        }

        /// Writes a retired file where the older server kept it, its folder created if need be.
        static func write(_ bytes: [UInt8], to path: String) throws {
            try FileManager.default.createDirectory(atPath: (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
            try AtomicFile.write(bytes, to: path)
        }

        /// The retired files still in the published directory.
        var retiredFiles: [String] { server.paths.published.retiredFilesPresent() }

        private static func sqliteValues(_ row: [any Sendable]) -> [(any DatabaseValueConvertible)?] {
            row.map { value in
                switch value {
                case let bytes as [UInt8]: Data(bytes)
                case let number as Int: number
                case let number as Int64: number
                default: nil
                }
            }
        }

        /// Opens the store as the upgraded server does.
        func open() async throws -> any SubmissionStore {
            switch backend {
            case .sqlite: try ServerStore.open(path: location, publishedDirectory: server.paths.published, logger: server.logs.logger)
            case .postgres:
                try await PostgresServerStore.open(
                    settings: PostgresSettings(connection: location, password: nil), publishedDirectory: server.paths.published, poolSize: 2,
                    logger: server.logs.logger)
            }
        }

        /// Runs `sql` on the database directly, as another process would.
        func execute(_ sql: String) async throws {
            switch backend {
            case .sqlite:
                let queue = try DatabaseQueue(path: location)
                try await queue.write { db in try db.execute(sql: sql) }
                try queue.close()
            case .postgres:
                let pool = PostgresConnectionPool(settings: PostgresSettings(connection: location, password: nil), size: 1)
                try await pool.withConnection { connection in _ = try connection.exec(sql) }
            }
        }

        /// Whether the database holds id batch 1's and key batch 1's content, read directly.
        func holdsContent() async throws -> (ids: Bool, keys: Bool) {
            let sql = "SELECT (SELECT entries IS NOT NULL FROM batches WHERE number = 1), (SELECT records IS NOT NULL FROM key_batches WHERE number = 1)"
            switch backend {
            case .sqlite:
                let queue = try DatabaseQueue(path: location)
                defer { try? queue.close() }
                return try await queue.read { db in
                    let row = try #require(try Row.fetchOne(db, sql: sql))
                    return (row[0], row[1])
                }
            case .postgres:
                let pool = PostgresConnectionPool(settings: PostgresSettings(connection: location, password: nil), size: 1)
                let row = try await pool.withConnection { connection in
                    let row = try #require(try connection.exec(sql).first)
                    return (try row.bool(0), try row.bool(1))
                }
                return row
            }
        }

        func publisher(_ store: any SubmissionStore) -> Publisher {
            Publisher(
                store: store, directory: server.paths.published, signingKey: server.signingKey,
                retentionSeconds: server.configuration.retentionSeconds, keySettings: KeyPublicationSettings(server.configuration),
                idPublicationDelaySeconds: 0, clock: server.clock, logger: server.logs.logger, recordPath: server.paths.publicationRecord)
        }

        /// The log the publisher wrote: each id batch's entries and key batch's keys.
        func logged() throws -> (ids: [UInt64: [PositiveListEntry]], keys: [UInt64: [DailyKeyRecord]]) {
            let log = try PublishedListLog.open(
                server.paths.published, identity: try ListLogIdentity(origin: nil, publicKey: server.signingKey.publicKey))
            let (ids, keys, _) = try log.batches()
            return (ids, keys)
        }
    }

    /// The first open (PostgreSQL: of a version-3 database) copies what the older live batches
    /// published from their files, the expired one's gone file not looked for, then, every live
    /// batch's content being in the database, deletes the retired files (both indexes, `batches/`,
    /// `keys/`) and says so. From then on the store opens without them, the log appends the same
    /// entries, and uploads of published ids and keys are no new ones.
    @Test(arguments: StoreBackend.allCases) func theFirstOpenCopiesTheBatchFilesInThenDeletesThem(backend: StoreBackend) async throws {
        let older = try await OlderData.make(backend)
        defer { older.server.remove() }
        #expect(older.retiredFiles == ["index.tpli", "batches", "keys"])
        // Another database opened on the same directory (here an empty one: a `status` run
        // without the configuration) never judges them: they hold batches it never recorded.
        _ = try ServerStore.open(path: older.server.paths.dataDirectory + "/other.sqlite", publishedDirectory: older.server.paths.published, logger: older.server.logs.logger)
        #expect(older.retiredFiles == ["index.tpli", "batches", "keys"], "deleted by another database's open")
        #expect(older.server.logs.all.contains { $0.hasPrefix("warning retired published files kept") && $0.contains("batches/1.tplb, keys/1.tpkb beyond the last batch this database recorded") },
                "\(older.server.logs.all)")
        let before = older.server.logs.all.count
        let store = try await older.open()
        let contents = try await store.liveBatchContents(idBatchesAfter: 0, keyBatchesAfter: 0)
        #expect(contents.idBatches == [PublishedIDBatch(number: 1, entries: older.ids)])
        #expect(contents.keyBatches == [PublishedKeyBatch(number: 1, records: older.keys.sorted { $0.key.bytes.lexicographicallyPrecedes($1.key.bytes) })])
        #expect(try await store.batchesWithoutContent().isEmpty)
        #expect(older.retiredFiles.isEmpty, "the retired files are deleted once the database holds what they held")
        #expect(older.server.logs.all.contains { $0.hasPrefix("notice retired published files deleted") && $0.contains("index.tpli, batches, keys") },
                "\(older.server.logs.all)")
        #expect(!older.server.logs.all.dropFirst(before).contains { $0.hasPrefix("warning") }, "\(older.server.logs.all)")

        let reopened = try await older.open()
        #expect(try await reopened.liveBatchContents(idBatchesAfter: 0, keyBatchesAfter: 0) == contents)
        let report = try await older.publisher(reopened).publish()
        #expect(report.log?.appendedIDBatches == [1] && report.log?.appendedKeyBatches == [1])
        let (loggedIDs, loggedKeys) = try older.logged()
        #expect(loggedIDs.keys.sorted() == [1] && loggedIDs[1] == older.ids)
        #expect(loggedKeys.keys.sorted() == [1] && loggedKeys[1].map(Set.init) == Set(older.keys))
        #expect(!older.server.logs.all.contains { $0.contains("not copied") }, "\(older.server.logs.all)")
        let outcome = try await reopened.appendHistory(Array(older.ids.prefix(4)), credential: Self.authority, idempotencyKey: nil, now: older.server.clock.now())
        guard case .stored(let receipt) = outcome else { Issue.record("\(outcome)"); return }
        #expect(receipt.received == 4 && receipt.stored == 0, "a published id taken as new")
    }

    /// A missing id batch file: the open succeeds and warns, naming the file and what to do; the
    /// row stays without content (the key batch, whose file is there, is copied in); the
    /// publication succeeds, purge included, and says the log waits, which it does, appending
    /// nothing. With the file restored the next open copies it in and the next publication
    /// appends exactly what the batches published. Meanwhile every retired file is kept (the key
    /// batch's too, though its content is copied in), with a warning naming the batch and what
    /// to do, and `status` says so; the open that copies the restored file in deletes them.
    @Test(arguments: StoreBackend.allCases) func aMissingBatchFileLeavesTheLogWaitingUntilItIsBack(backend: StoreBackend) async throws {
        let older = try await OlderData.make(backend)
        defer { older.server.remove() }
        let idPath = older.server.paths.published.retiredBatchPath(number: 1)
        unlink(idPath)
        let store = try await older.open()
        let warnings = older.server.logs.all.filter { $0.hasPrefix("warning") }
        let fill = warnings.filter { $0.contains("Restore the file") }
        #expect(fill.count == 1 && fill.allSatisfy { $0.contains(idPath) && $0.contains("it is missing") }, "\(warnings)")
        let kept = warnings.filter { $0.hasPrefix("warning retired published files kept") }
        #expect(kept.count == 1 && kept.allSatisfy { $0.contains("batch 1 live without its content") && $0.contains("restore the file") }, "\(warnings)")
        #expect(warnings.count == 2, "\(warnings)")
        #expect(try await older.holdsContent() == (ids: false, keys: true))
        #expect(try await store.batchesWithoutContent() == ["batch 1"])
        #expect(older.retiredFiles == ["index.tpli", "batches", "keys"], "kept while batch 1 has no content")
        #expect(FileManager.default.fileExists(atPath: older.server.paths.published.retiredKeyBatchPath(number: 1)))
        let missing = await #expect(throws: ServerStoreError.self) { _ = try await store.liveBatchContents(idBatchesAfter: 0, keyBatchesAfter: 0) }
        guard case .batchContentMissing(batch: "batch 1") = missing else { Issue.record("\(String(describing: missing))"); return }

        // An upload code expired long before the retention cutoff: the purge forgets it.
        try await store.recordIssuedCode(UploadCode.generate(), authority: "Health Authority A", issuedAt: 0, expiresAt: 1)
        let report = try await older.publisher(store).publish()
        #expect(report.log == nil && report.logWaiting?.contains("batch 1") == true, "\(String(describing: report.logWaiting))")
        #expect(!FileManager.default.fileExists(atPath: older.server.paths.published.logCheckpointPath))
        #expect(try await store.uploadCodeCounts(now: older.server.clock.now()).expiredUnused == 0, "the purge did not run")
        let record = try #require(OutcomeRecord.read(from: older.server.paths.publicationRecord))
        #expect(record.succeeded && record.warning?.contains("the list log was not appended: batch 1") == true, "\(record)")
        #expect(older.server.logs.all.contains { $0.hasPrefix("error log not appended") && $0.contains("batch=batch 1") })
        // What `serve` leaves nobody reads: status and doctor say it from the record.
        let status = try ServerCLI.run(["status"], fixture: older.server)
        #expect(status.exitCode == 1 && status.stdout.contains("Publication INCOMPLETE") && status.stdout.contains("batch 1"), "\(status)")
        // `status` without the configuration opens the data directory's own (empty) SQLite
        // database, not this one: the files hold batches it never recorded, so it keeps them.
        #expect(status.stdout.contains("Retired files:     index.tpli, batches, keys kept in") && status.stdout.contains("another database's"), "\(status)")
        #expect(older.retiredFiles == ["index.tpli", "batches", "keys"], "an open of another database deleted them")
        try older.server.writeConfiguration()
        let doctor = try ServerCLI.run(["doctor"], fixture: older.server)
        #expect(doctor.exitCode == 1 && doctor.stdout.contains("FAIL list log: not appended by the last publication"), "\(doctor)")

        try AtomicFile.write(older.idFile, to: idPath)
        let reopened = try await older.open()
        #expect(try await older.holdsContent() == (ids: true, keys: true))
        #expect(older.retiredFiles.isEmpty, "deleted by the open that copied the last batch in")
        let next = try await older.publisher(reopened).publish()
        #expect(next.logWaiting == nil && next.log?.appendedIDBatches == [1] && next.log?.appendedKeyBatches == [1])
        let (loggedIDs, loggedKeys) = try older.logged()
        #expect(loggedIDs.keys.sorted() == [1] && loggedIDs[1] == older.ids)
        #expect(loggedKeys.keys.sorted() == [1] && loggedKeys[1].map(Set.init) == Set(older.keys))
        #expect(OutcomeRecord.read(from: older.server.paths.publicationRecord)?.warning == nil)
        let statusAfter = try ServerCLI.run(["status"], fixture: older.server)
        #expect(!statusAfter.stdout.contains("INCOMPLETE") && !statusAfter.stdout.contains("Retired files"), "\(statusAfter)")
    }

    /// An altered or cut id batch file, or a missing key batch file, is not copied in: the open
    /// succeeds and warns with the file and the reason, the row stays without content and the
    /// retired files are all kept; with the file restored, the next open copies it in and
    /// deletes them.
    @Test(arguments: StoreBackend.allCases) func aDamagedBatchFileIsNotCopiedIn(backend: StoreBackend) async throws {
        let older = try await OlderData.make(backend)
        defer { older.server.remove() }
        var altered = older.idFile
        altered[PositiveListBatch.headerByteCount] ^= 0x01
        let idPath = older.server.paths.published.retiredBatchPath(number: 1)
        let keyPath = older.server.paths.published.retiredKeyBatchPath(number: 1)
        let cases: [(path: String, contents: [UInt8]?, reason: String)] = [
            (idPath, altered, "SHA-256"), (idPath, Array(older.idFile.prefix(100)), "100"), (keyPath, nil, "it is missing"),
        ]
        // Upgraded once (which deletes the files); each case then takes the rows and the files
        // back to what the older server left, and damages one.
        _ = try await older.open()
        #expect(older.retiredFiles.isEmpty)
        for (path, contents, reason) in cases {
            try await older.execute("UPDATE batches SET entries = NULL WHERE number = 1")
            try await older.execute("UPDATE key_batches SET records = NULL WHERE number = 1")
            try OlderData.write(older.idFile, to: idPath)
            try OlderData.write(older.keyFile, to: keyPath)
            unlink(path)
            if let contents { try AtomicFile.write(contents, to: path) }
            let before = older.server.logs.all.count
            let store = try await older.open()
            let warnings = older.server.logs.all.dropFirst(before).filter { $0.hasPrefix("warning") }
            let fill = warnings.filter { $0.contains("Restore the file") }
            #expect(fill.count == 1 && fill.allSatisfy { $0.contains(path) && $0.contains(reason) }, "\(warnings)")
            #expect(warnings.filter { $0.hasPrefix("warning retired published files kept") }.count == 1, "\(warnings)")
            #expect(try await older.holdsContent() == (ids: path != idPath, keys: path != keyPath))
            #expect(older.retiredFiles == ["batches", "keys"], "kept: \(reason)")
            await #expect(throws: ServerStoreError.self) { _ = try await store.liveBatchContents(idBatchesAfter: 0, keyBatchesAfter: 0) }
            try AtomicFile.write(path == idPath ? older.idFile : older.keyFile, to: path)
            _ = try await older.open()
            #expect(try await older.holdsContent() == (ids: true, keys: true))
            #expect(older.retiredFiles.isEmpty, "deleted once \(path) was copied in")
        }
    }

    /// A batch an older server recorded after this one opened the database (several instances
    /// upgraded one by one) is never published from anything but the database: the log waits,
    /// saying what to do, and the rest of the publication goes on.
    @Test func aBatchRecordedWithoutContentAfterTheOpenLeavesTheLogWaiting() async throws {
        let older = try await OlderData.make(.sqlite)
        defer { older.server.remove() }
        let store = try #require(try await older.open() as? ServerStore)
        _ = try await store.write { db in try db.execute(sql: "UPDATE batches SET entries = NULL") }
        let missing = await #expect(throws: ServerStoreError.self) { _ = try await store.liveBatchContents(idBatchesAfter: 0, keyBatchesAfter: 0) }
        guard case .batchContentMissing(batch: "batch 1") = missing else { Issue.record("\(String(describing: missing))"); return }
        let report = try await older.publisher(store).publish()
        #expect(report.logWaiting?.contains("stop any older tracer-server") == true, "\(String(describing: report.logWaiting))")
        #expect(!FileManager.default.fileExists(atPath: older.server.paths.published.logCheckpointPath))
    }
}
