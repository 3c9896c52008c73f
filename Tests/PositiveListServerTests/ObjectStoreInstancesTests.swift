import Foundation
import IDRotation
import ObjectStore
import PositiveListFormat
@testable import PositiveListServer
import PostgresServerStore
import ServerStorage
import Testing
import TestTiers
import ServerTestSupport
import TracerTestSupport

/// Two `serve` instances on one PostgreSQL database, each with a published directory of its own
/// (two machines), syncing to one bucket: the bucket is what they share, and it stays valid
/// whichever instance publishes or syncs, and in whatever order.
@Suite("ObjectStore sync from several instances", .tags(.integration), .serialized)
struct ObjectStoreInstancesTests {
    /// One instance: its connection pool and published directory.
    struct Instance {
        let store: PostgresServerStore
        let directory: PublishedDirectory

        func publisher(_ fixture: PostgresFixture) -> Publisher {
            Publisher(
                store: store, directory: directory, signingKey: fixture.server.signingKey,
                retentionSeconds: fixture.server.configuration.retentionSeconds, idPublicationDelaySeconds: 0, clock: fixture.server.clock,
                logger: fixture.server.logs.logger)
        }

        func sync(_ fixture: PostgresFixture, _ client: ObjectStoreClient) -> ObjectStoreSync {
            ObjectStoreSync(
                client: client, directory: directory, store: store, publicKey: fixture.server.publicKey,
                logger: fixture.server.logs.logger)
        }

        func localCheckpoint() throws -> [UInt8] {
            Array(try #require(FileManager.default.contents(atPath: directory.logCheckpointPath), "no checkpoint in \(directory.path)"))
        }
    }

    /// One PostgreSQL database with two instances on it, the first in the fixture's data
    /// directory, the second in one of its own, and one bucket.
    struct TwoInstances {
        let fixture: PostgresFixture
        let moto: MotoS3Server
        let client: ObjectStoreClient
        let secondRoot: String
        let first: Instance
        let second: Instance

        static func make() async throws -> TwoInstances {
            let fixture = try await PostgresFixture.make(stores: 2)
            let secondRoot = NSTemporaryDirectory() + "tracer-second-instance-" + UUID().uuidString
            do {
                let moto = try await MotoS3Server(buckets: ["shared"])
                try FileManager.default.createDirectory(atPath: secondRoot, withIntermediateDirectories: true)
                return TwoInstances(
                    fixture: fixture, moto: moto, client: try ObjectStoreSyncTests.client(moto, bucket: "shared"), secondRoot: secondRoot,
                    first: Instance(store: fixture.stores[0], directory: fixture.server.paths.published),
                    second: Instance(store: fixture.stores[1], directory: PublishedDirectory(path: secondRoot + "/public")))
            } catch {
                try? FileManager.default.removeItem(atPath: secondRoot)
                fixture.remove()
                throw error
            }
        }

        func remove() {
            moto.stop()
            try? FileManager.default.removeItem(atPath: secondRoot)
            fixture.remove()
        }
    }

    static func append(_ fixture: PostgresFixture, to instance: Instance, seed: UInt64) async throws {
        let outcome = try await instance.store.appendHistory(
            try fixture.entries(count: 40, seed: seed), credential: PostgresStoreTests.authority, idempotencyKey: nil,
            now: fixture.server.clock.now())
        guard case .stored = outcome else { throw HarnessFailure(description: "ids not stored: \(outcome)") }
    }

    /// The id batches of the bucket's log, which opens and verifies from the bucket's objects alone.
    static func bucketBatches(_ client: ObjectStoreClient, _ fixture: PostgresFixture) async throws -> [UInt64] {
        let log = try #require(try await ObjectStoreSyncTests.expectBucketValid(client, of: fixture.server), "no log in the bucket")
        return try log.batches().ids.keys.sorted()
    }

    static let checkpointKey = "log/checkpoint"

    @Test func instancesWithDirectoriesOfTheirOwnKeepOneValidBucket() async throws {
        let bed = try await TwoInstances.make()
        defer { bed.remove() }
        let (fixture, client, first, second) = (bed.fixture, bed.client, bed.first, bed.second)

        // The first instance publishes batch 1 and syncs it.
        try await Self.append(fixture, to: first, seed: 1)
        try await first.publisher(fixture).publish()
        try await first.sync(fixture, client).sync()
        #expect(try await Self.bucketBatches(client, fixture) == [1])

        // The second publishes batch 2: its log appends batch 1 too, from the database (no file
        // of the first's is needed), and its sync extends the bucket's log.
        try await Self.append(fixture, to: second, seed: 2)
        let secondPublication = try await second.publisher(fixture).publish()
        #expect(secondPublication.newBatch?.number == 2 && secondPublication.log?.appendedIDBatches == [1, 2])
        let secondSync = try await second.sync(fixture, client).sync()
        #expect(secondSync.uploadedLogCheckpoint && secondSync.newerInBucket.isEmpty && !secondSync.logDiverges)
        #expect(try await Self.bucketBatches(client, fixture) == [1, 2])
        #expect(try await client.get(Self.checkpointKey) == (try second.localCheckpoint()))

        // The first syncs again from its smaller log: the bucket's larger one stays.
        let staleSync = try await first.sync(fixture, client).sync()
        #expect(staleSync.newerInBucket == [client.location.key(for: Self.checkpointKey)])
        #expect(!staleSync.uploadedLogCheckpoint && staleSync.uploadedLogTiles == 0)
        #expect(try await Self.bucketBatches(client, fixture) == [1, 2])
        #expect(try await client.get(Self.checkpointKey) == (try second.localCheckpoint()))

        // While the second holds the publication lock, the first's sync leaves the bucket to it.
        let held = try await second.store.lockPublication()
        let busySync = try await first.sync(fixture, client).sync()
        await held.release()
        #expect(busySync.anotherInstanceBusy)
        #expect(!busySync.uploadedLogCheckpoint && busySync.uploadedLogTiles == 0 && busySync.deletedRetiredObjects.isEmpty)

        // The first's next publication catches up with the database, and its sync with the bucket.
        let catchUp = try await first.publisher(fixture).publish()
        #expect(catchUp.newBatch == nil && catchUp.liveBatches == 2)
        let catchUpSync = try await first.sync(fixture, client).sync()
        // The same tree as the bucket's (its checkpoint may even be the same bytes: same entries,
        // same time, same key): nothing newer, nothing diverging.
        #expect(catchUpSync.newerInBucket.isEmpty && !catchUpSync.logDiverges)
        #expect(try await Self.bucketBatches(client, fixture) == [1, 2])
        #expect(try await client.get(Self.checkpointKey) == (try first.localCheckpoint()))
        #expect(Set(try fixture.publishedIDs()).count == 80, "every id of both uploads, once")
    }

    // A batch named by an index but in neither the directory nor the bucket (batchNowhere) is
    // gone with the batch files: each instance's log appends what the batches published from
    // the database, whichever instance recorded them (above).
}
