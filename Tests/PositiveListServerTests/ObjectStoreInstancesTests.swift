import Foundation
import IDRotation
import ObjectStore
import PositiveListFormat
@testable import PositiveListServer
import Testing
import TestTiers
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

        func localIndex() throws -> [UInt8] {
            Array(try #require(FileManager.default.contents(atPath: directory.indexPath), "no index in \(directory.path)"))
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

    /// The ids index in the bucket, verified, and every batch it names there and intact.
    static func bucketIndex(_ client: ObjectStoreClient, _ fixture: PostgresFixture) async throws -> PositiveListIndex {
        let bytes = try #require(try await client.get(client.location.key(for: PositiveListIndex.relativePath)), "no index in the bucket")
        let index = try PositiveListIndex(verifying: bytes, publicKey: fixture.server.publicKey)
        for listing in index.batches {
            let batch = try #require(try await client.get(client.location.key(for: listing.relativePath)), "\(listing.relativePath) missing")
            _ = try PositiveListBatch(verifying: batch, listedAs: listing, publicKey: fixture.server.publicKey)
        }
        return index
    }

    @Test func instancesWithDirectoriesOfTheirOwnKeepOneValidBucket() async throws {
        let bed = try await TwoInstances.make()
        defer { bed.remove() }
        let (fixture, client, first, second) = (bed.fixture, bed.client, bed.first, bed.second)

        // The first instance publishes batch 1 and syncs it.
        try await Self.append(fixture, to: first, seed: 1)
        try await first.publisher(fixture).publish()
        try await first.sync(fixture, client).sync()
        #expect(try await Self.bucketIndex(client, fixture).batches.map(\.number) == [1])

        // The second publishes batch 2: its index names batch 1, which only the bucket holds.
        try await Self.append(fixture, to: second, seed: 2)
        let secondPublication = try await second.publisher(fixture).publish()
        #expect(secondPublication.newBatch?.number == 2)
        #expect(!FileManager.default.fileExists(atPath: second.directory.batchPath(number: 1)))
        let secondSync = try await second.sync(fixture, client).sync()
        #expect(secondSync.fetchedBatches == [client.location.key(for: "batches/1.tplb")])
        #expect(secondSync.uploadedBatches == [client.location.key(for: "batches/2.tplb")])
        #expect(try await Self.bucketIndex(client, fixture).batches.map(\.number) == [1, 2])
        #expect(try await client.get(client.location.key(for: PositiveListIndex.relativePath)) == (try second.localIndex()))
        #expect(FileManager.default.fileExists(atPath: second.directory.batchPath(number: 1)), "the fetched batch was not kept")

        // The first syncs again from its older index: the bucket's newer one stays, and batch 2,
        // which the first's index does not name, is not taken for an expired batch.
        let staleSync = try await first.sync(fixture, client).sync()
        #expect(staleSync.newerInBucket.contains(client.location.key(for: PositiveListIndex.relativePath)))
        #expect(staleSync.deletedBatches.isEmpty && staleSync.uploadedIndexes.isEmpty)
        #expect(try await Self.bucketIndex(client, fixture).batches.map(\.number) == [1, 2])
        #expect(try await client.get(client.location.key(for: PositiveListIndex.relativePath)) == (try second.localIndex()))

        // While the second holds the publication lock, the first's sync leaves the bucket to it.
        let held = try await second.store.lockPublication()
        let busySync = try await first.sync(fixture, client).sync()
        await held.release()
        #expect(busySync.anotherInstanceBusy)
        #expect(busySync.uploadedIndexes.isEmpty && busySync.uploadedBatches.isEmpty && busySync.deletedBatches.isEmpty)

        // The first's next publication catches up with the database, and its sync with the bucket.
        let catchUp = try await first.publisher(fixture).publish()
        #expect(catchUp.newBatch == nil && catchUp.liveBatches == 2)
        let catchUpSync = try await first.sync(fixture, client).sync()
        #expect(catchUpSync.fetchedBatches == [client.location.key(for: "batches/2.tplb")])
        #expect(catchUpSync.uploadedIndexes.contains(client.location.key(for: PositiveListIndex.relativePath)))
        let index = try await Self.bucketIndex(client, fixture)
        #expect(index.batches.map(\.number) == [1, 2])
        #expect(try await client.get(client.location.key(for: PositiveListIndex.relativePath)) == (try first.localIndex()))
        #expect(Set(try fixture.publishedIDs()).count == 80, "every id of both uploads, once")
    }

    /// A batch the index names that neither the directory nor the bucket holds is reported with
    /// what to do, and nothing in the bucket changes.
    @Test func aBatchMissingHereAndInTheBucketSaysWhereToSyncFrom() async throws {
        let bed = try await TwoInstances.make()
        defer { bed.remove() }
        let (fixture, client, first, second) = (bed.fixture, bed.client, bed.first, bed.second)

        // The first publishes but never syncs; the second publishes on top and tries to sync.
        try await Self.append(fixture, to: first, seed: 3)
        try await first.publisher(fixture).publish()
        try await Self.append(fixture, to: second, seed: 4)
        try await second.publisher(fixture).publish()
        do {
            try await second.sync(fixture, client).sync()
            Issue.record("the sync succeeded without batch 1")
        } catch {
            let text = "\(error)"
            #expect(text.contains("batches/1.tplb") && text.contains("run `tracer-server sync` there"), "\(text)")
        }
        #expect(try await client.get(client.location.key(for: PositiveListIndex.relativePath)) == nil, "an index went up without its batches")
    }
}
