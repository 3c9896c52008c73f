import Crypto
import Foundation
import GRDB
import IDRotation
import PositiveListFormat
@testable import PositiveListServer
import Testing
import TestTiers
import TracerCore
import TracerTestSupport

/// A database whose live batches a tracer-server from before schema v6 (SQLite) or version 4
/// (PostgreSQL) recorded: rows without what the batches published, and the batch files. Opening
/// it copies that in from the files, checked against the recorded size and SHA-256, once; a
/// missing or damaged file refuses the open with what to do, and nothing is published from it.
@Suite(.tags(.integration), .serialized, .sharedPostgres) struct PublishedContentUpgradeTests {
    static let authority = SubmissionCredential.authority(name: "Health Authority A")
    /// The SQLite schema's last step before the batches kept what they published.
    static let lastSQLiteStepWithoutContent = "v5: console accounts, sessions, issued codes, audit"

    /// A data directory as the older server left it: id batch 1 and key batch 1, recorded and
    /// written, the published ids and keys in neither pending table.
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
                    for key in keys {
                        try db.execute(
                            sql: "INSERT INTO submitted_keys (key, day, interval, batch) VALUES (?, ?, ?, 1)",
                            arguments: [Data(key.key.bytes), key.day.number, key.intervalSeconds])
                    }
                }
                try queue.close()
            case .postgres:
                // Version 4 adds a column that may be NULL: an older server's rows are rows without it.
                location = try SharedPostgres.createDatabase()
                let store = try await PostgresServerStore.open(
                    settings: PostgresSettings(connection: location, password: nil), publishedDirectory: server.paths.published, poolSize: 1)
                _ = try await store.run { connection in
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
            try AtomicFile.write(idFile, to: server.paths.published.batchPath(number: 1))
            try AtomicFile.write(keyFile, to: server.paths.published.keyBatchPath(number: 1))
            return OlderData(server: server, backend: backend, location: location, ids: ids, keys: keys, idFile: idFile, keyFile: keyFile)
        }

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
            case .sqlite: try ServerStore.open(path: location, publishedDirectory: server.paths.published)
            case .postgres:
                try await PostgresServerStore.open(
                    settings: PostgresSettings(connection: location, password: nil), publishedDirectory: server.paths.published, poolSize: 2)
            }
        }

        func publisher(_ store: any SubmissionStore) -> Publisher {
            Publisher(
                store: store, directory: server.paths.published, signingKey: server.signingKey,
                retentionSeconds: server.configuration.retentionSeconds, keySettings: KeyPublicationSettings(server.configuration),
                idPublicationDelaySeconds: 0, clock: server.clock, logger: server.logs.logger)
        }
    }

    /// The first open copies what the older batches published from their files; from then on the
    /// files are not needed: the log appends the same entries, uploads of published ids and keys
    /// are no new ones, and the store opens again without them.
    @Test(arguments: StoreBackend.allCases) func theFirstOpenCopiesTheBatchFilesInOnce(backend: StoreBackend) async throws {
        let older = try await OlderData.make(backend)
        defer { older.server.remove() }
        let store = try await older.open()
        let contents = try await store.liveBatchContents(idBatchesAfter: 0, keyBatchesAfter: 0)
        #expect(contents.idBatches == [PublishedIDBatch(number: 1, entries: older.ids)])
        #expect(contents.keyBatches == [PublishedKeyBatch(number: 1, records: older.keys.sorted { $0.key.bytes.lexicographicallyPrecedes($1.key.bytes) })])

        for path in [older.server.paths.published.batchPath(number: 1), older.server.paths.published.keyBatchPath(number: 1)] {
            try FileManager.default.removeItem(atPath: path)
        }
        let reopened = try await older.open()
        #expect(try await reopened.liveBatchContents(idBatchesAfter: 0, keyBatchesAfter: 0) == contents)
        let report = try await older.publisher(reopened).publish()
        #expect(report.log?.appendedIDBatches == [1] && report.log?.appendedKeyBatches == [1])
        let log = try PublishedListLog.open(
            older.server.paths.published, identity: try ListLogIdentity(origin: nil, publicKey: older.server.signingKey.publicKey))
        let (loggedIDs, loggedKeys, _) = try log.batches()
        #expect(loggedIDs[1] == older.ids)
        #expect(loggedKeys[1].map(Set.init) == Set(older.keys))
        let outcome = try await reopened.appendHistory(Array(older.ids.prefix(4)), credential: Self.authority, idempotencyKey: nil, now: older.server.clock.now())
        guard case .stored(let receipt) = outcome else { Issue.record("\(outcome)"); return }
        #expect(receipt.received == 4 && receipt.stored == 0, "a published id taken as new")
    }

    /// A missing, altered or cut file of an older batch refuses the open and says which file and
    /// what to do; nothing is copied or published; with the file restored, the open succeeds.
    @Test(arguments: StoreBackend.allCases) func aMissingOrDamagedBatchFileRefusesTheOpen(backend: StoreBackend) async throws {
        let older = try await OlderData.make(backend)
        defer { older.server.remove() }
        var altered = older.idFile
        altered[PositiveListBatch.headerByteCount] ^= 0x01
        let idPath = older.server.paths.published.batchPath(number: 1)
        let keyPath = older.server.paths.published.keyBatchPath(number: 1)
        let cases: [(path: String, contents: [UInt8]?, reason: String)] = [
            (idPath, nil, "it is missing"), (idPath, altered, "SHA-256"), (idPath, Array(older.idFile.prefix(100)), "100"),
            (keyPath, nil, "it is missing"),
        ]
        for (path, contents, reason) in cases {
            unlink(path)
            if let contents { try AtomicFile.write(contents, to: path) }
            let error = await #expect(throws: ServerStoreError.self) { _ = try await older.open() }
            let message = error.map(String.init(describing:)) ?? ""
            #expect(message.contains(path) && message.contains(reason) && message.contains("Restore the file"), "\(message)")
            try AtomicFile.write(path == idPath ? older.idFile : older.keyFile, to: path)
        }
        let store = try await older.open()
        #expect(try await store.liveBatchContents(idBatchesAfter: 0, keyBatchesAfter: 0).idBatches.map(\.entries) == [older.ids])
    }

    /// A batch an older server recorded after this one opened the database (several instances
    /// upgraded one by one) is never published from anything but the database: the log step
    /// stops and says what to do.
    @Test func aBatchRecordedWithoutContentAfterTheOpenStopsTheLog() async throws {
        let older = try await OlderData.make(.sqlite)
        defer { older.server.remove() }
        let store = try #require(try await older.open() as? ServerStore)
        _ = try await store.write { db in try db.execute(sql: "UPDATE batches SET entries = NULL") }
        let missing = await #expect(throws: ServerStoreError.self) { _ = try await store.liveBatchContents(idBatchesAfter: 0, keyBatchesAfter: 0) }
        guard case .batchContentMissing(batch: "batch 1") = missing else { Issue.record("\(String(describing: missing))"); return }
        let error = await #expect(throws: PublishError.self) { try await older.publisher(store).publish() }
        #expect(error.map(String.init(describing:))?.contains("stop every older tracer-server") == true)
        #expect(!FileManager.default.fileExists(atPath: older.server.paths.published.logCheckpointPath))
    }
}
