import Foundation
import Matching
import ObjectStore
import PositiveListFormat
@testable import PositiveListServer
import Testing
import TestTiers
import TracerCore
import ServerTestSupport
import TracerTestSupport
import TransparencyLog

/// The log's files in a bucket, as a node fetches them through a CDN in front of it.
struct BucketLogFetcher: LogFileFetching {
    let client: ObjectStoreClient

    struct NotFound: Error { let key: String }

    func checkpoint() async throws -> Data {
        guard let bytes = try await client.get(client.location.key(for: "log/checkpoint")) else { throw NotFound(key: "log/checkpoint") }
        return Data(bytes)
    }

    func file(_ path: String, fromByte offset: Int) async throws -> Data {
        guard let bytes = try await client.get(client.location.key(for: "log/" + path)) else { throw NotFound(key: path) }
        return bytes.count > offset ? Data(bytes[offset...]) : Data()
    }
}

/// `tracer-server sync` deletes from the bucket the log files the published directory deleted
/// (old history, superseded partial files), with the publisher's rules, against moto's S3.
@Suite(.tags(.integration), .serialized) struct ListLogHistorySyncTests {
    static let day = UnixSeconds.secondsPerDay

    static func sync(_ fixture: ServerFixture, _ client: ObjectStoreClient, fault: ObjectStoreSync.FaultInjection? = nil) -> ObjectStoreSync {
        var sync = ObjectStoreSync(
            client: client, directory: fixture.paths.published, lockPath: fixture.paths.publishLock, publicKey: fixture.publicKey,
            logger: fixture.logs.logger, faultInjection: fault)
        sync.logStatePath = fixture.paths.logState
        return sync
    }

    /// The bucket's objects below log/tile/, as paths below log/.
    static func bucketTiles(_ client: ObjectStoreClient) async throws -> Set<String> {
        let prefix = client.location.key(for: "log/")
        return Set(try await client.list(prefix: client.location.keyPrefix + "log").map(\.key).filter { $0.hasPrefix(prefix + "tile/") }
            .map { String($0.dropFirst(prefix.count)) })
    }

    static func isFull(_ path: String) -> Bool {
        (try? EntryBundleID(path: path)).map { !$0.isPartial } ?? (try? TileID(path: path)).map { !$0.isPartial } ?? false
    }

    /// After a sync: the bucket's full bundles and tiles are exactly the directory's; a partial
    /// file in the bucket is the directory's or one of the bucket's previous checkpoint; every
    /// tile of level 1 and above and the checkpoint's partial files are there.
    static func expectMirror(_ fixture: ServerFixture, _ client: ObjectStoreClient, previousBucketSize: UInt64) async throws {
        let bucket = try await bucketTiles(client)
        let local = Set(ListLogPublicationTests.tileFiles(fixture).keys)
        #expect(bucket.filter(isFull) == local.filter(isFull), "full files: bucket only \(bucket.filter(isFull).subtracting(local).sorted().prefix(4)), local only \(local.filter(isFull).subtracting(bucket).sorted().prefix(4))")
        let previousPartials = Set(Publisher.partialPaths(previousBucketSize))
        let strays = bucket.filter { !isFull($0) && !local.contains($0) && !previousPartials.contains($0) }
        #expect(strays.isEmpty, "superseded partial files left in the bucket: \(strays.sorted().prefix(4))")
        let size = try PublishedListLogHead.open(fixture).treeSize
        for path in TileLayout.tiles(treeSize: size).filter({ $0.level >= 1 || $0.isPartial }).map(\.path) + Publisher.partialPaths(size) {
            #expect(bucket.contains(path), "\(path) missing from the bucket")
        }
    }

    @Test func syncDeletesTheHistoryAndPartialFilesTheDirectoryNoLongerHas() async throws {
        let moto = try await MotoS3Server(buckets: ["history", "lagging"])
        defer { moto.stop() }
        let fixture = try ServerFixture()
        defer { fixture.remove() }
        let client = try ObjectStoreSyncTests.client(moto, bucket: "history")
        let lagging = try ObjectStoreSyncTests.client(moto, bucket: "lagging")
        let publisher = fixture.makePublisher()
        try await ListLogPublicationTests.addIDs(fixture, count: 20, seed: 1)
        try await publisher.publish()
        var all = try ListLogHistoryTests.newEntries(fixture, from: 0, to: try PublishedListLogHead.open(fixture).treeSize)
        var serial: UInt64 = 0
        var bucketSize: UInt64 = 0
        var deleted = 0
        try await Self.sync(fixture, lagging).sync()
        for day in 0..<45 {
            for _ in 0..<2 {
                let entries = ListLogHistoryTests.entries(count: 60, now: fixture.clock.now(), serial: &serial)
                try ListLogHistoryTests.append(entries, to: fixture)
                all += entries
                let report = try await publisher.publish()
                #expect(report.log?.appendedEntries == 0)
                fixture.clock.advance(by: 12 * 3_600)
            }
            if day == 30 {
                // A sync that stops after its first deletion is finished by the next.
                await #expect(throws: ObjectStoreError.self) {
                    try await Self.sync(fixture, client, fault: { if $0 == .logFileDeleted { throw CancellationError() } }).sync()
                }
                bucketSize = try PublishedListLogHead.open(fixture).treeSize
            }
            let report = try await Self.sync(fixture, client).sync()
            #expect(report.uploadedLogCheckpoint || day == 30)
            deleted += report.deletedLogFiles
            try await Self.expectMirror(fixture, client, previousBucketSize: bucketSize)
            bucketSize = try PublishedListLogHead.open(fixture).treeSize
        }
        let kept = try #require(Publisher.readLogState(at: fixture.paths.logState)?.history?.keptFromBundle)
        #expect(kept >= 4, "history kept from bundle \(kept)")
        #expect(!(try await Self.bucketTiles(client)).contains("tile/entries/000"))
        #expect(deleted >= Int(kept) * 2, "old bundles and tiles, and superseded partial files")
        // Nothing new: the partial files of the checkpoint before go, the bucket is the directory.
        let again = try await Self.sync(fixture, client).sync()
        #expect(!again.uploadedLogCheckpoint && again.uploadedLogTiles == 0)
        try await Self.expectMirror(fixture, client, previousBucketSize: bucketSize)
        #expect(try await Self.bucketTiles(client).filter { !Self.isFull($0) }.allSatisfy { FileManager.default.fileExists(atPath: fixture.paths.published.logPath + "/" + $0) })
        // A node starting afresh from the bucket reaches the root with every live entry.
        try await ListLogHistoryTests.expectFreshNodeGetsEveryLiveEntry(fixture, all: all, now: fixture.clock.now(), fetcher: BucketLogFetcher(client: client))

        // A bucket last synced 45 days ago: its tree's root needs a level-0 tile deleted here, so
        // it cannot be checked to be a prefix, and is left alone.
        let before = try await Self.bucketTiles(lagging)
        let refused = try await Self.sync(fixture, lagging).sync()
        #expect(refused.logOlderThanHistory && !refused.logDiverges && !refused.uploadedLogCheckpoint && refused.deletedLogFiles == 0)
        #expect(try await Self.bucketTiles(lagging) == before)
        #expect(fixture.logs.all.contains { $0.contains("older than the history this directory keeps") })
        // Its checkpoint deleted (what the message says to do), it is synced like a new bucket:
        // nothing of the deleted history is uploaded, and what it held of it goes.
        try await lagging.delete(lagging.location.key(for: "log/checkpoint"))
        let restarted = try await Self.sync(fixture, lagging).sync()
        #expect(restarted.uploadedLogCheckpoint && restarted.deletedLogFiles == before.count)
        try await Self.expectMirror(fixture, lagging, previousBucketSize: 0)
        try await ListLogHistoryTests.expectFreshNodeGetsEveryLiveEntry(fixture, all: all, now: fixture.clock.now(), fetcher: BucketLogFetcher(client: lagging))
    }
}
