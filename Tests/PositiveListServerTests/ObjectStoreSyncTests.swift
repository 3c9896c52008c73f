import Crypto
import CurlHTTP
import Foundation
import IDRotation
import Matching
import ObjectStore
import PositiveListFormat
@testable import PositiveListServer
import ServerStorage
@testable import SQLiteServerStore
import Synchronization
import Testing
import TestTiers
import TracerCore
import ServerTestSupport
import TracerTestSupport

/// `ObjectStoreSync` against a real S3-compatible server: moto's, started per test on 127.0.0.1
/// with SigV4 authentication on (Tests/Support/s3/moto_s3.py). Each test uses buckets of its own.
@Suite("ObjectStore sync", .tags(.integration), .serialized)
struct ObjectStoreSyncTests {
    static let authority = "Health Authority A"
    static let day: UnixSeconds = 86_400

    // MARK: Scenario helpers

    /// Ids ending now and yesterday's key (due now: its day ended more than the delay ago).
    static func appendIDsAndKey(_ fixture: ServerFixture, seed: UInt64) async throws -> [PositiveListEntry] {
        let now = fixture.clock.now()
        let entries = try await fixture.appendIDs(Histories.entries(count: 50, endingAt: now, seed: seed))
        let key = try DailyKey(bytes: (0..<16).map { UInt8(truncatingIfNeeded: Int(seed) &* 31 &+ $0) })
        let record = DailyKeyRecord(day: UTCDay(number: UTCDay(containing: now).number - 1), intervalSeconds: 900, key: key)
        guard case .stored = try await fixture.store.appendKeyHistory([record], credential: .authority(name: authority), idempotencyKey: nil, now: now)
        else { throw HarnessFailure(description: "key not stored") }
        return entries
    }

    /// Publishes batch 1 and key batch 1.
    static func firstPublication(_ fixture: ServerFixture) async throws {
        _ = try await appendIDsAndKey(fixture, seed: 1)
        let report = try await fixture.makePublisher().publish()
        #expect(report.newBatch?.number == 1 && report.newKeyBatch?.number == 1)
    }

    /// A retention period later: batch 2 and key batch 2 published, batch 1 and key batch 1 expired.
    static func secondPublication(_ fixture: ServerFixture) async throws {
        fixture.clock.advance(by: fixture.configuration.retentionSeconds + 2 * day)
        _ = try await appendIDsAndKey(fixture, seed: 2)
        let report = try await fixture.makePublisher().publish()
        #expect(report.newBatch?.number == 2 && report.expiredBatches == [1])
        #expect(report.newKeyBatch?.number == 2 && report.expiredKeyBatches == [1])
    }

    static func client(_ moto: MotoS3Server, bucket: String, keyPrefix: String = "", secret: String? = nil) throws -> ObjectStoreClient {
        try ObjectStoreClient(
            location: ObjectStoreLocation(endpoint: moto.endpoint, bucket: bucket, keyPrefix: keyPrefix),
            credentials: ObjectStoreCredentials(accessKeyID: moto.accessKeyID, secretAccessKey: secret ?? moto.secretAccessKey),
            timeout: .seconds(60))
    }

    /// A sync as `serve` and `tracer-server sync` make it: under the store's publication lock,
    /// asking it whether the retired objects are still needed.
    static func sync(_ fixture: ServerFixture, _ client: ObjectStoreClient, fault: ObjectStoreSync.FaultInjection? = nil) -> ObjectStoreSync {
        ObjectStoreSync(
            client: client, directory: fixture.paths.published, store: fixture.store, publicKey: fixture.publicKey,
            logger: fixture.logs.logger, faultInjection: fault)
    }

    /// Records the steps a sync passes, in order; fails at `failing` (its first time).
    final class StepRecorder: Sendable {
        let steps = Mutex<[SyncStep]>([])
        let failing: SyncStep?
        init(failing: SyncStep? = nil) { self.failing = failing }
        var all: [SyncStep] { steps.withLock { $0 } }
        var hook: ObjectStoreSync.FaultInjection {
            { step in
                self.steps.withLock { $0.append(step) }
                if step == self.failing { throw HarnessFailure(description: "injected") }
            }
        }
    }

    /// The objects an older tracer-server uploaded (formats 1 and 2), as `put` into a bucket.
    static let retiredObjects = ["batches/1.tplb", "batches/2.tplb", "index.tpli", "keys/1.tpkb", "keys/index.tpki"]

    static func putRetiredObjects(_ client: ObjectStoreClient) async throws {
        for relative in retiredObjects {
            try await client.put(client.location.key(for: relative), body: Array(relative.utf8), contentType: "application/octet-stream", cacheControl: "no-cache")
        }
    }

    /// The relative paths in the bucket under the client's prefix.
    static func bucketPaths(_ client: ObjectStoreClient) async throws -> Set<String> {
        let prefix = client.location.keyPrefix
        return Set(try await client.list(prefix: prefix).map { String($0.key.dropFirst(prefix.count)) })
    }

    /// What a node would meet: the bucket's log (every object under `log/`, copied into a
    /// directory of its own), opened and verified from those files alone; nil without a checkpoint.
    @discardableResult
    static func expectBucketValid(_ client: ObjectStoreClient, of fixture: ServerFixture) async throws -> PublishedListLog? {
        let copy = NSTemporaryDirectory() + "/tracer-bucket-" + UUID().uuidString
        defer { try? FileManager.default.removeItem(atPath: copy) }
        for relative in try await bucketPaths(client) where relative.hasPrefix("log/") {
            let bytes = try #require(try await client.get(client.location.key(for: relative)))
            try FileManager.default.createDirectory(atPath: ((copy + "/" + relative) as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
            try Data(bytes).write(to: URL(fileURLWithPath: copy + "/" + relative))
        }
        guard FileManager.default.fileExists(atPath: copy + "/log/checkpoint") else { return nil }
        return try PublishedListLog.open(PublishedDirectory(path: copy), identity: try ListLogPublicationTests.identity(fixture))
    }

    /// The bucket holds the local log (its checkpoint, byte for byte, and everything it needs)
    /// and no retired object.
    static func expectMirror(_ client: ObjectStoreClient, of fixture: ServerFixture) async throws {
        let local = try #require(FileManager.default.contents(atPath: fixture.paths.published.logCheckpointPath))
        #expect(try await client.get(client.location.key(for: "log/checkpoint")) == Array(local))
        let log = try #require(try await expectBucketValid(client, of: fixture))
        #expect(log.checkpoint == (try fixture.verifiedLog().checkpoint))
        let paths = try await bucketPaths(client)
        #expect(!paths.contains { ObjectStoreSync.isRetiredPath($0) }, "\(paths.sorted())")
    }

    // MARK: Tests

    @Test func uploadsTheLogWithTheHeadersOfTheNginxConfigurationAndNoRetiredFile() async throws {
        let fixture = try ServerFixture()
        defer { fixture.remove() }
        let moto = try await MotoS3Server(buckets: ["order"])
        defer { moto.stop() }
        try await Self.firstPublication(fixture)
        let client = try Self.client(moto, bucket: "order")
        let recorder = StepRecorder()
        let report = try await Self.sync(fixture, client, fault: recorder.hook).sync()
        #expect(recorder.all == [.logTilesUploaded], "\(moto.logTail())")
        // Two entries (ids 1, keys 1): the partial bundle and its level-0 tile.
        #expect(report.uploadedLogTiles == 2 && report.uploadedLogCheckpoint && report.uploadedUploadPolicy)
        #expect(report.deletedRetiredObjects.isEmpty && report.retiredObjectsKeptFor.isEmpty)
        try await Self.expectMirror(client, of: fixture)
        #expect(try await Self.bucketPaths(client) == ["log/checkpoint", "log/uploads", "log/tile/0/000.p/2", "log/tile/entries/000.p/2"])

        for (relative, cacheControl) in [
            ("log/checkpoint", PublishedFileHeaders.indexCacheControl), ("log/uploads", PublishedFileHeaders.indexCacheControl),
            ("log/tile/0/000.p/2", PublishedFileHeaders.batchCacheControl), ("log/tile/entries/000.p/2", PublishedFileHeaders.batchCacheControl),
        ] {
            let headers = try #require(try await client.head(relative))
            #expect(headers.cacheControl == cacheControl, "\(relative)")
            #expect(headers.contentType == "application/octet-stream", "\(relative)")
        }
        // The same values as the nginx example gives the same files.
        let nginx = try String(contentsOfFile: MotoS3ServerPaths.repositoryRoot + "/deploy/nginx/tracer-server.conf", encoding: .utf8)
        #expect(nginx.contains("default_type \(PublishedFileHeaders.contentType);"))
        for location in ["location = /log/checkpoint {", "location = /log/uploads {"] {
            #expect(Self.cacheControl(in: nginx, after: location) == PublishedFileHeaders.indexCacheControl, "\(location)")
        }
        #expect(Self.cacheControl(in: nginx, after: #"location ~ "^/log/tile/"#) == PublishedFileHeaders.batchCacheControl)
        // Nor does nginx serve the retired files any more.
        for retired in ["index.tpli", "tplb", "tpki", "tpkb"] { #expect(!nginx.contains(retired + " {") && !nginx.contains(retired + "$"), "\(retired)") }
    }

    /// The `add_header Cache-Control "..."` value of the nginx block that starts with `location`.
    static func cacheControl(in nginx: String, after location: String) -> String? {
        guard let start = nginx.range(of: location), let header = nginx.range(of: "add_header Cache-Control \"", range: start.upperBound..<nginx.endIndex),
              let end = nginx.range(of: "\"", range: header.upperBound..<nginx.endIndex)
        else { return nil }
        return String(nginx[header.upperBound..<end.lowerBound])
    }

    @Test func aSecondRunUploadsNothing() async throws {
        let fixture = try ServerFixture()
        defer { fixture.remove() }
        let moto = try await MotoS3Server(buckets: ["idle"])
        defer { moto.stop() }
        try await Self.firstPublication(fixture)
        let client = try Self.client(moto, bucket: "idle")
        try await Self.sync(fixture, client).sync()
        let before = try await client.list(prefix: "")
        let recorder = StepRecorder()
        let again = try await Self.sync(fixture, client, fault: recorder.hook).sync()
        #expect(again.uploadedLogTiles == 0 && !again.uploadedLogCheckpoint && !again.uploadedUploadPolicy && again.deletedRetiredObjects.isEmpty)
        #expect(recorder.all.isEmpty)
        #expect(try await client.list(prefix: "") == before)
    }

    /// Issue 39 item 6 step 4: the index and batch objects an older tracer-server uploaded are
    /// deleted once the database holds every live batch's content, the indexes first (a node or
    /// CDN meanwhile never finds an index naming a batch already gone), and only those names: an
    /// object that merely sits in the same folders stays.
    @Test func theRetiredObjectsAreDeletedIndexesFirstOnceTheDatabaseHoldsEveryBatch() async throws {
        let fixture = try ServerFixture()
        defer { fixture.remove() }
        let moto = try await MotoS3Server(buckets: ["retired"])
        defer { moto.stop() }
        try await Self.firstPublication(fixture)
        let client = try Self.client(moto, bucket: "retired")
        try await Self.putRetiredObjects(client)
        try await client.put("batches/notes.txt", body: [1], contentType: "text/plain", cacheControl: "no-cache")
        try await client.put("keys/index.tpki.bak", body: [1], contentType: "text/plain", cacheControl: "no-cache")

        let recorder = StepRecorder()
        let report = try await Self.sync(fixture, client, fault: recorder.hook).sync()
        #expect(report.deletedRetiredObjects == ["index.tpli", "keys/index.tpki", "batches/1.tplb", "batches/2.tplb", "keys/1.tpkb"])
        #expect(recorder.all == [.logTilesUploaded] + Array(repeating: .retiredObjectDeleted, count: 5))
        #expect(report.uploadedLogCheckpoint, "the log went up before anything was deleted")
        let left = try await Self.bucketPaths(client)
        #expect(Set(left.filter { !$0.hasPrefix("log/") }) == Set(["batches/notes.txt", "keys/index.tpki.bak"]), "\(left.sorted())")
        try await Self.expectMirror(client, of: fixture)
        #expect(fixture.logs.all.contains { $0.hasPrefix("notice retired index and batch objects deleted from the bucket") })
        #expect(try await Self.sync(fixture, client).sync().deletedRetiredObjects.isEmpty)
    }

    /// While a live batch is without its content in the database (an older tracer-server
    /// recorded it and no open could copy its file in), the bucket's retired objects may be its
    /// only copy: sync keeps them all, says which batch and what to do, and deletes them at the
    /// first sync after the content is in. A sync that cannot ask a database keeps them too.
    @Test func theRetiredObjectsAreKeptWhileALiveBatchIsWithoutItsContent() async throws {
        let fixture = try ServerFixture()
        defer { fixture.remove() }
        let moto = try await MotoS3Server(buckets: ["kept"])
        defer { moto.stop() }
        try await Self.firstPublication(fixture)
        let client = try Self.client(moto, bucket: "kept")
        try await Self.putRetiredObjects(client)
        let content = try await fixture.store.read { db in try Data.fetchOne(db, sql: "SELECT entries FROM batches WHERE number = 1") }
        _ = try await fixture.store.write { db in try db.execute(sql: "UPDATE batches SET entries = NULL WHERE number = 1") }

        let report = try await Self.sync(fixture, client).sync()
        #expect(report.deletedRetiredObjects.isEmpty && report.retiredObjectsKeptFor == ["batch 1"])
        #expect(report.uploadedLogCheckpoint, "the log is synced all the same")
        #expect(try await Self.bucketPaths(client).isSuperset(of: Self.retiredObjects))
        let warning = fixture.logs.all.first { $0.hasPrefix("warning retired index and batch objects kept in the bucket") }
        #expect(warning?.contains("batch 1 live without its content") == true && warning?.contains("restart tracer-server") == true, "\(fixture.logs.all)")

        // Without a store to ask (a sync built on the lock file alone): kept, and said.
        _ = try await fixture.store.write { db in try db.execute(sql: "UPDATE batches SET entries = ? WHERE number = 1", arguments: [content]) }
        let blind = ObjectStoreSync(
            client: client, directory: fixture.paths.published, lockPath: fixture.paths.publishLock, publicKey: fixture.publicKey,
            logger: fixture.logs.logger)
        #expect(try await blind.sync().deletedRetiredObjects.isEmpty)
        #expect(try await Self.bucketPaths(client).isSuperset(of: Self.retiredObjects))

        let filled = try await Self.sync(fixture, client).sync()
        #expect(filled.deletedRetiredObjects.count == Self.retiredObjects.count && filled.retiredObjectsKeptFor.isEmpty)
        try await Self.expectMirror(client, of: fixture)
    }

    /// A crash after each step of a sync, then a full run: the bucket is valid in between (its
    /// log opens from its objects, and no index names a batch already deleted) and a mirror of
    /// the directory after. (Two publications delete no log file: a crash between log deletions
    /// is ListLogHistorySyncTests'.)
    @Test(arguments: SyncStep.allCases.filter { $0 != .logFileDeleted })
    func aSyncStoppedAfterAnyStepLeavesAValidBucketAndTheNextRunFinishesIt(step: SyncStep) async throws {
        let fixture = try ServerFixture()
        defer { fixture.remove() }
        let moto = try await MotoS3Server(buckets: ["resume"])
        defer { moto.stop() }
        try await Self.firstPublication(fixture)
        let client = try Self.client(moto, bucket: "resume")
        try await Self.sync(fixture, client).sync()
        try await Self.secondPublication(fixture)
        try await Self.putRetiredObjects(client)

        let crashing = StepRecorder(failing: step)
        await #expect(throws: ObjectStoreError.injectedFault(step.rawValue)) { try await Self.sync(fixture, client, fault: crashing.hook).sync() }
        #expect(crashing.all.last == step)
        try await Self.expectBucketValid(client, of: fixture)
        let left = try await Self.bucketPaths(client)
        if step == .retiredObjectDeleted {
            #expect(!left.contains("index.tpli") && left.contains("keys/index.tpki") && left.contains("batches/1.tplb"), "\(left.sorted())")
        }

        try await Self.sync(fixture, client).sync()
        try await Self.expectMirror(client, of: fixture)
    }

    // A batch object with other bytes than the published one (batchDiffers) is gone with the
    // batch objects: the log's files are checked by the bucket's checkpoint being a prefix of
    // this directory's log (ListLogServingTests, ListLogHistorySyncTests).

    /// The console's status page reads the last sync's outcome from the data directory.
    @Test func eachSyncLeavesItsOutcomeForTheConsole() async throws {
        let fixture = try ServerFixture()
        defer { fixture.remove() }
        let moto = try await MotoS3Server(buckets: ["recorded"])
        defer { moto.stop() }
        try await Self.firstPublication(fixture)
        let path = fixture.paths.objectStoreSyncRecord
        var sync = Self.sync(fixture, try Self.client(moto, bucket: "recorded"))
        sync.recordPath = path
        try await sync.sync()
        let succeeded = try #require(OutcomeRecord.read(from: path))
        #expect(succeeded.succeeded && succeeded.detail.contains("2 log tiles uploaded, checkpoint uploaded"), "\(succeeded)")
        let wrongSecret = "wrong-secret-0123456789abcdefghijklmnopq"
        var refused = Self.sync(fixture, try Self.client(moto, bucket: "recorded", secret: wrongSecret))
        refused.recordPath = path
        _ = try? await refused.sync()
        let failed = try #require(OutcomeRecord.read(from: path))
        #expect(!failed.succeeded && failed.detail.contains("refused the credentials") && !failed.detail.contains(wrongSecret), "\(failed)")
    }

    @Test func wrongCredentialsAreRefusedWithAPlainMessageThatHoldsNoSecret() async throws {
        let fixture = try ServerFixture()
        defer { fixture.remove() }
        let moto = try await MotoS3Server(buckets: ["locked"])
        defer { moto.stop() }
        try await Self.firstPublication(fixture)
        let wrongSecret = "wrong-secret-0123456789abcdefghijklmnopq"
        for client in [
            try Self.client(moto, bucket: "locked", secret: wrongSecret),
            try ObjectStoreClient(
                location: ObjectStoreLocation(endpoint: moto.endpoint, bucket: "locked"),
                credentials: ObjectStoreCredentials(accessKeyID: "AKIANOSUCHKEY0000000", secretAccessKey: wrongSecret)),
        ] {
            do {
                try await Self.sync(fixture, client).sync()
                Issue.record("sync with wrong credentials succeeded")
            } catch {
                guard case .credentialsRejected(let operation, let bucket, let code) = error else { throw error }
                // The first request reads the bucket's upload policy (is it this server's?).
                #expect(operation == "download" && bucket == "locked" && !code.isEmpty)
                #expect(error.description.contains("refused the credentials"))
                #expect(!error.description.contains(wrongSecret))
            }
        }
        #expect(!fixture.logs.all.joined().contains(wrongSecret))
        #expect(!fixture.logs.all.joined().contains(moto.secretAccessKey))
        #expect(try await Self.client(moto, bucket: "locked").list(prefix: "").isEmpty)
    }

    /// Temporary credentials (an assumed role) sign with their session token, which the store
    /// requires; without it, or with another, they are refused in words that name the token.
    @Test func temporaryCredentialsSyncWithTheirSessionToken() async throws {
        let fixture = try ServerFixture()
        defer { fixture.remove() }
        let moto = try await MotoS3Server(buckets: ["temporary"])
        defer { moto.stop() }
        try await Self.firstPublication(fixture)
        func client(token: String?) throws -> ObjectStoreClient {
            try ObjectStoreClient(
                location: ObjectStoreLocation(endpoint: moto.endpoint, bucket: "temporary"),
                credentials: ObjectStoreCredentials(
                    accessKeyID: moto.temporaryAccessKeyID, secretAccessKey: moto.temporarySecretAccessKey, sessionToken: token),
                timeout: .seconds(60))
        }
        for token in [nil, String(moto.sessionToken.reversed())] {
            let refused = try client(token: token)
            do {
                try await Self.sync(fixture, refused).sync()
                Issue.record("sync with \(token == nil ? "no" : "a wrong") session token succeeded")
            } catch {
                guard case .credentialsRejected = error else { throw error }
                #expect(error.description.contains("AWS_SESSION_TOKEN"))
                #expect(!error.description.contains(moto.sessionToken))
            }
        }
        try await Self.sync(fixture, try client(token: moto.sessionToken)).sync()
        #expect(try await Self.client(moto, bucket: "temporary").head("log/checkpoint") != nil)
        #expect(!fixture.logs.all.joined().contains(moto.sessionToken))
    }

    /// A client built on a credentials file reads it before each request: a long-running server
    /// goes on syncing after whatever renews temporary credentials rewrites the file.
    @Test func renewedCredentialsInTheFileAreUsedWithoutANewClient() async throws {
        let fixture = try ServerFixture()
        defer { fixture.remove() }
        let moto = try await MotoS3Server(buckets: ["renewed"])
        defer { moto.stop() }
        try await Self.firstPublication(fixture)
        let path = fixture.paths.dataDirectory + "/s3-credentials"
        func write(token: String) throws {
            try "AWS_ACCESS_KEY_ID=\(moto.temporaryAccessKeyID)\nAWS_SECRET_ACCESS_KEY=\(moto.temporarySecretAccessKey)\nAWS_SESSION_TOKEN=\(token)\n"
                .write(toFile: path, atomically: true, encoding: .utf8)
            chmod(path, 0o600)
        }
        try write(token: "expired-" + moto.sessionToken.prefix(16))
        let client = try ObjectStoreClient(
            location: ObjectStoreLocation(endpoint: moto.endpoint, bucket: "renewed"), credentialsFile: path,
            environment: ["AWS_ACCESS_KEY_ID": moto.accessKeyID, "AWS_SECRET_ACCESS_KEY": moto.secretAccessKey])
        await #expect(throws: ObjectStoreError.self) { try await Self.sync(fixture, client).sync() }
        try write(token: moto.sessionToken)
        try await Self.sync(fixture, client).sync()
        #expect(try await Self.client(moto, bucket: "renewed").head("log/checkpoint") != nil)
    }

    @Test func aKeyPrefixKeepsEveryObjectUnderIt() async throws {
        let fixture = try ServerFixture()
        defer { fixture.remove() }
        // Without authentication: moto refuses signed listings whose prefix holds a "/".
        let moto = try await MotoS3Server(buckets: ["shared"], authenticate: false)
        defer { moto.stop() }
        try await Self.firstPublication(fixture)
        let client = try Self.client(moto, bucket: "shared", keyPrefix: "tracer/")
        try await client.put("other/batches/7.tplb", body: [1, 2, 3], contentType: "application/octet-stream", cacheControl: "no-cache")
        try await Self.sync(fixture, client).sync()
        try await Self.secondPublication(fixture)
        try await Self.sync(fixture, client).sync()
        try await Self.expectMirror(client, of: fixture)
        // Not under the prefix: not sync's, so never deleted although it looks like a batch.
        #expect(try await client.head("other/batches/7.tplb") != nil)
    }

    /// `serve` with `syncAfterPublish`: the schedule's first tick publishes, then syncs.
    @Test func theScheduleSyncsAfterEachPublication() async throws {
        let fixture = try ServerFixture()
        defer { fixture.remove() }
        let moto = try await MotoS3Server(buckets: ["scheduled"])
        defer { moto.stop() }
        _ = try await Self.appendIDsAndKey(fixture, seed: 3)
        let client = try Self.client(moto, bucket: "scheduled")
        let scheduler = PublishScheduler(
            publisher: fixture.makePublisher(), interval: .seconds(3_600), logger: fixture.logs.logger, sync: Self.sync(fixture, client))
        let running = Task { try await scheduler.run() }
        _ = try await eventually(timeout: .seconds(30), every: .milliseconds(100)) {
            try await client.head("log/checkpoint") != nil
        }
        running.cancel()
        _ = try? await running.value
        try await Self.expectMirror(client, of: fixture)
        #expect(try fixture.verifiedBatches().map(\.number) == [1])
    }

    /// The whole way: the server publishes, sync uploads, and a node's list log updater (libcurl,
    /// anonymous GETs through the bucket's public-read policy) follows the log and finds the exposure.
    @Test func aNodeFetchingFromTheBucketFindsTheExposure() async throws {
        let fixture = try ServerFixture()
        defer { fixture.remove() }
        let moto = try await MotoS3Server(buckets: ["public-list"])
        defer { moto.stop() }
        let entries = try await Self.appendIDsAndKey(fixture, seed: 7)
        try await fixture.makePublisher().publish()
        let client = try Self.client(moto, bucket: "public-list")
        try await Self.sync(fixture, client).sync()

        let cacheDirectory = NSTemporaryDirectory() + "/tracer-node-cache-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: cacheDirectory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: cacheDirectory) }
        let cache = ListCacheDirectory(directory: cacheDirectory)
        let log = FollowedListLog(source: try ListLogHistoryTests.source(fixture), store: FollowedLogStore(directory: cacheDirectory + "/log"))
        let updater = ListLogUpdater(
            log: log, files: HTTPLogFiles(baseURL: client.location.publicListURL + "log", http: CurlHTTPClient()), cache: cache,
            maximumListAge: nil, clock: fixture.clock)
        let lock = try await cache.lock()
        defer { lock.release() }
        let update = try await updater.update(holding: lock)
        #expect(update.changed && update.newEntries > 0, "\(update)")
        let held = try #require(try log.store.load())

        let met = entries[3]
        let encounter = EncounterTimes(peer: met.id, ownWindowStart: met.validFrom, firstSeen: met.validFrom + 60, lastSeen: met.validFrom + 600)
        let matched = try PositiveListMatcher(encounters: [encounter]).match(heldEntries: held.entries)
        #expect(matched.outcome.matches.map(\.listed.id) == [met.id])
        #expect(matched.idBatches == 1 && matched.keyBatches == 1 && matched.unreadableEntries == 0)
    }
}

enum MotoS3ServerPaths {
    static let repositoryRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().path
}
