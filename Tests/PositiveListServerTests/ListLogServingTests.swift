import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import IDRotation
import ObjectStore
import PositiveListFormat
@testable import PositiveListServer
@testable import ServerHTTPAPI
import Testing
import TestTiers
import TracerCore
import ServerTestSupport
import TracerTestSupport
import TransparencyLog

/// The log's files (format version 3) as nginx, `serve` and the object store serve them: the
/// checkpoint revalidated briefly, tiles immutable, only canonical names, Range on bundles.
@Suite(.tags(.integration), .serialized) struct ListLogServingTests {
    static let immutable = "public, max-age=31536000, immutable"

    /// Three publications: the log's partial bundle grows from 2 to 4 to 6 entries.
    static func publishThreeTimes(_ fixture: ServerFixture) async throws {
        for round in 0..<3 {
            try await ListLogPublicationTests.addIDs(fixture, count: 20, seed: UInt64(50 + round))
            try await ListLogPublicationTests.addKeys(fixture, count: 2, seed: UInt64(60 + round))
            try await fixture.makePublisher().publish()
            fixture.clock.advance(by: 3_600)
        }
    }

    static func body(_ response: TestClient.Response) -> [UInt8] { response.body.map { Array($0.readableBytesView) } ?? [] }

    static func file(_ fixture: ServerFixture, _ relative: String) throws -> [UInt8] {
        Array(try #require(FileManager.default.contents(atPath: fixture.paths.published.path + "/" + relative), "\(relative) missing"))
    }

    @Test func nginxServesTheLogWithItsHeadersAndRanges() async throws {
        let fixture = try ServerFixture()
        defer { fixture.remove() }
        try await Self.publishThreeTimes(fixture)
        let nginx = try await NginxInstance(publishedDirectory: fixture.paths.published.path, upstreamPort: 9)
        defer { nginx.stop() }

        let checkpoint = try await nginx.get("/log/checkpoint")
        #expect(checkpoint.status == .ok)
        #expect(checkpoint.headers[.cacheControl] == "public, max-age=60")
        #expect(Self.body(checkpoint) == (try Self.file(fixture, "log/checkpoint")))
        let tag = try #require(checkpoint.headers[.eTag])
        #expect(try await nginx.get("/log/checkpoint", headers: [.ifNoneMatch: tag]).status == .notModified)
        let policy = try await nginx.get("/log/uploads")
        #expect(policy.status == .ok && policy.headers[.cacheControl] == "public, max-age=60")
        #expect(Self.body(policy) == (try Self.file(fixture, "log/uploads")))

        // The partial versions of the last two checkpoints (6 and 4 entries); the first (2) was pruned.
        #expect(try await nginx.get("/log/tile/0/000.p/2").status == .notFound)
        for relative in ["log/tile/entries/000.p/6", "log/tile/entries/000.p/4", "log/tile/0/000.p/6", "log/tile/0/000.p/4"] {
            let response = try await nginx.get("/" + relative)
            #expect(response.status == .ok, "\(relative)")
            #expect(response.headers[.cacheControl] == Self.immutable, "\(relative)")
            #expect(Self.body(response) == (try Self.file(fixture, relative)), "\(relative)")
        }
        // A node holding 4 entries fetches only the bytes the 6-entry bundle adds.
        let held = try Self.file(fixture, "log/tile/entries/000.p/4")
        let whole = try Self.file(fixture, "log/tile/entries/000.p/6")
        #expect(Array(whole.prefix(held.count)) == held, "a wider bundle extends the narrower one")
        let range = try await nginx.get("/log/tile/entries/000.p/6", headers: [.range: "bytes=\(held.count)-"])
        #expect(range.status == .partialContent)
        #expect(range.headers[.contentRange] == "bytes \(held.count)-\(whole.count - 1)/\(whole.count)")
        #expect(range.headers[.cacheControl] == Self.immutable)
        #expect(Self.body(range) == Array(whole.suffix(from: held.count)))

        // Only canonical tile names; no temporary files, no listings, no state.
        #expect(FileManager.default.createFile(atPath: fixture.paths.published.logPath + "/.tmp-checkpoint-x", contents: Data([1])))
        for path in ["/log/", "/log/tile/", "/log/.tmp-checkpoint-x", "/log/tile/0/0", "/log/tile/0/000.p/0", "/log/tile/0/000.p/256",
                     "/log/tile/00/000", "/log/tile/64x/000", "/log/tile/entries/000.p/06", "/log-state.json"] {
            #expect(try await nginx.get(path).status == .notFound, "\(path)")
        }
    }

    @Test func serveServesTheLogWithTheSameHeaders() async throws {
        let fixture = try ServerFixture()
        defer { fixture.remove() }
        try await Self.publishThreeTimes(fixture)
        try await fixture.withServer { client in
            let checkpoint = try await client.send("/log/checkpoint", .get)
            #expect(checkpoint.status == .ok)
            #expect(checkpoint.headers[.cacheControl] == "public, max-age=60")
            #expect(checkpoint.bytes == (try Self.file(fixture, "log/checkpoint")))
            let tag = try #require(checkpoint.headers[.eTag])
            #expect(try await client.send("/log/checkpoint", .get, headers: [.ifNoneMatch: tag]).status == .notModified)
            let policy = try await client.send("/log/uploads", .get)
            #expect(policy.status == .ok && policy.headers[.cacheControl] == "public, max-age=60")
            #expect(policy.bytes == (try Self.file(fixture, "log/uploads")))
            let bundle = try await client.send("/log/tile/entries/000.p/6", .get)
            #expect(bundle.status == .ok)
            #expect(bundle.headers[.cacheControl] == Self.immutable)
            #expect(bundle.bytes == (try Self.file(fixture, "log/tile/entries/000.p/6")))
            // One byte range, as nginx answers it: the bytes a wider bundle adds.
            let held = try Self.file(fixture, "log/tile/entries/000.p/4")
            let whole = try Self.file(fixture, "log/tile/entries/000.p/6")
            let range = try await client.send("/log/tile/entries/000.p/6", .get, headers: [.range: "bytes=\(held.count)-"])
            #expect(range.status == .partialContent)
            #expect(range.headers[.contentRange] == "bytes \(held.count)-\(whole.count - 1)/\(whole.count)")
            #expect(range.bytes == Array(whole.suffix(from: held.count)))
            let beyond = try await client.send("/log/tile/entries/000.p/6", .get, headers: [.range: "bytes=\(whole.count)-"])
            #expect(beyond.status == .rangeNotSatisfiable && beyond.headers[.contentRange] == "bytes */\(whole.count)", "\(beyond.status) \(beyond.headers)")
            let stale = try await client.send("/log/tile/entries/000.p/6", .get, headers: [.range: "bytes=1-", .ifRange: "\"other\""])
            #expect(stale.status == .ok && stale.bytes == whole, "If-Range that does not match: the whole file")
            #expect(PublishedFileServer.byteRange("bytes=-3", size: 10) == .some(7..<10))
            #expect(PublishedFileServer.byteRange("bytes=2-4", size: 10) == .some(2..<5))
            #expect(PublishedFileServer.byteRange("bytes=2-40", size: 10) == .some(2..<10))
            #expect(PublishedFileServer.byteRange("bytes=0-1,3-4", size: 10) == nil)
            #expect(PublishedFileServer.byteRange("bytes=5-2", size: 10) == nil)
            #expect(PublishedFileServer.byteRange("items=0-1", size: 10) == nil)
            for path in ["/log/tile/0/0", "/log/tile/0/000.p/0", "/log/tile/entries/000.p/06", "/log/tile/x/000", "/log/state"] {
                #expect(try await client.send(path, .get).status == .notFound, "\(path)")
            }
        }
    }

    /// `tracer-server sync` uploads the log after the indexes: the tiles the bucket lacks (flat:
    /// only what the local tree adds to the bucket's), then the checkpoint, with nginx's headers.
    @Test func syncUploadsOnlyTheTilesTheBucketLacksThenTheCheckpoint() async throws {
        let moto = try await MotoS3Server(buckets: ["log"])
        let fixture = try ServerFixture()
        defer { fixture.remove() }
        try await ListLogPublicationTests.addIDs(fixture, count: 20, seed: 1)
        try await fixture.makePublisher().publish()
        let client = try ObjectStoreSyncTests.client(moto, bucket: "log")
        let first = try await ObjectStoreSyncTests.sync(fixture, client).sync()
        // Size 1: the bundle and the level-0 tile.
        #expect(first.uploadedLogTiles == 2 && first.uploadedLogCheckpoint && first.uploadedUploadPolicy)
        for (relative, cacheControl) in [("log/checkpoint", "public, max-age=60"), ("log/uploads", "public, max-age=60"), ("log/tile/entries/000.p/1", Self.immutable), ("log/tile/0/000.p/1", Self.immutable)] {
            let headers = try #require(try await client.head(relative), "\(relative)")
            #expect(headers.cacheControl == cacheControl, "\(relative)")
            #expect(headers.contentType == "application/octet-stream")
            #expect(try await client.get(relative) == (try Self.file(fixture, relative)))
        }
        let again = try await ObjectStoreSyncTests.sync(fixture, client).sync()
        #expect(again.uploadedLogTiles == 0 && !again.uploadedLogCheckpoint && !again.uploadedUploadPolicy)

        fixture.clock.advance(by: 3_600)
        try await ListLogPublicationTests.addIDs(fixture, count: 20, seed: 2)
        try await ListLogPublicationTests.addKeys(fixture, count: 2, seed: 3)
        try await fixture.makePublisher().publish()
        let second = try await ObjectStoreSyncTests.sync(fixture, client).sync()
        #expect(second.uploadedLogTiles == 2, "the new partial bundle and tile of size 3, nothing else")
        #expect(try await client.get("log/checkpoint") == (try Self.file(fixture, "log/checkpoint")))
        #expect(try await client.get("log/tile/entries/000.p/3") == (try Self.file(fixture, "log/tile/entries/000.p/3")))

        // A sync that lags: three publications without one. The tiles the bucket's tree of 3 was
        // read from are pruned here by now; the bucket is still seen as a prefix and catches up.
        for round in 0..<3 {
            fixture.clock.advance(by: 3_600)
            try await ListLogPublicationTests.addKeys(fixture, count: 2, seed: UInt64(10 + round))
            try await fixture.makePublisher().publish()
        }
        #expect(!FileManager.default.fileExists(atPath: fixture.paths.published.logPath + "/tile/0/000.p/3"), "pruned")
        let lagging = try await ObjectStoreSyncTests.sync(fixture, client).sync()
        #expect(!lagging.logDiverges && lagging.uploadedLogCheckpoint)
        #expect(try await client.get("log/checkpoint") == (try Self.file(fixture, "log/checkpoint")))

        // The same values as the nginx example gives the same files.
        let nginx = try String(contentsOfFile: NginxInstance.repositoryRoot + "/deploy/nginx/tracer-server.conf", encoding: .utf8)
        #expect(ObjectStoreSyncTests.cacheControl(in: nginx, after: "location = /log/checkpoint {") == PublishedFileHeaders.indexCacheControl)
        #expect(ObjectStoreSyncTests.cacheControl(in: nginx, after: "location = /log/uploads {") == PublishedFileHeaders.indexCacheControl)
        #expect(ObjectStoreSyncTests.cacheControl(in: nginx, after: #"location ~ "^/log/tile/"#) == PublishedFileHeaders.batchCacheControl)
    }
}
