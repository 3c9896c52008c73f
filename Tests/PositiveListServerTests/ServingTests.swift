import Crypto
import Foundation
import Hummingbird
import HummingbirdTesting
import IDRotation
import PositiveListFormat
@testable import PositiveListServer
import Testing
import TestTiers
import ServerTestSupport

@Suite(.tags(.unit)) struct ServingTests {
    static let now = ServerFixture.start

    func append(_ fixture: ServerFixture, count: Int, seed: UInt64) async throws {
        try await fixture.appendIDs(Histories.entries(count: count, endingAt: fixture.clock.now(), seed: seed))
    }

    @Test func filesCarryETagsAndCacheControlAndRevalidateWith304() async throws {
        let fixture = try ServerFixture()
        defer { fixture.remove() }
        try await append(fixture, count: 100, seed: 1)
        try await fixture.makePublisher().publish()
        // One entry: the bundle is the partial 000.p/1.
        let bundlePath = "/log/tile/entries/000.p/1"
        try await fixture.withServer { client in
            let checkpoint = try await client.send("/log/checkpoint", .get)
            #expect(checkpoint.status == .ok)
            #expect(checkpoint.headers[.cacheControl] == "public, max-age=60")
            #expect(checkpoint.headers[.contentType] == "application/octet-stream")
            let checkpointTag = try #require(checkpoint.headers[.eTag])
            #expect(checkpointTag.hasPrefix("\"") && checkpointTag.hasSuffix("\""))
            #expect(checkpoint.bytes == Array(try Data(contentsOf: URL(fileURLWithPath: fixture.paths.published.logCheckpointPath))))

            let bundle = try await client.send(bundlePath, .get)
            #expect(bundle.status == .ok)
            #expect(bundle.headers[.cacheControl] == "public, max-age=31536000, immutable")
            let bundleTag = try #require(bundle.headers[.eTag])
            #expect(bundle.bytes == Array(try Data(contentsOf: URL(fileURLWithPath: fixture.paths.published.path + bundlePath))))

            for (path, tag) in [("/log/checkpoint", checkpointTag), (bundlePath, bundleTag)] {
                for condition in [tag, "W/\(tag)", "\"other\", \(tag)", "*"] {
                    let revalidated = try await client.send(path, .get, headers: [.ifNoneMatch: condition])
                    #expect(revalidated.status == .notModified, "\(path) \(condition)")
                    #expect(revalidated.body.readableBytes == 0)
                    #expect(revalidated.headers[.eTag] == tag)
                }
                let changed = try await client.send(path, .get, headers: [.ifNoneMatch: "\"not-the-tag\""])
                #expect(changed.status == .ok)
            }

            let head = try await client.send(bundlePath, .head)
            #expect(head.status == .ok)
            #expect(head.headers[.eTag] == bundleTag)
            #expect(head.body.readableBytes == 0)
        }
    }

    /// Issue 39 item 6 step 4: the index and batch files of formats 1 and 2 have no route, even
    /// while an upgrade keeps them on disk (a live batch's content not yet copied in). What a
    /// node fetched there (and whether its content verified) is now the log's: ListLogServingTests,
    /// and the node's ListLogTrustTests for a tampered file.
    @Test func theRetiredFilesAreNotServedEvenWhileTheyAreOnDisk() async throws {
        let fixture = try ServerFixture()
        defer { fixture.remove() }
        try await append(fixture, count: 10, seed: 1)
        try await fixture.makePublisher().publish()
        let published = fixture.paths.published
        for folder in ["batches", "keys"] { try FileManager.default.createDirectory(atPath: published.path + "/" + folder, withIntermediateDirectories: true) }
        for name in ["index.tpli", "batches/1.tplb", "keys/index.tpki", "keys/1.tpkb"] {
            #expect(FileManager.default.createFile(atPath: published.path + "/" + name, contents: Data("retired".utf8), attributes: [.posixPermissions: 0o644]))
        }
        try await fixture.withServer { client in
            for name in ["index.tpli", "batches/1.tplb", "keys/index.tpki", "keys/1.tpkb"] {
                for method in [HTTPRequest.Method.get, .head] {
                    let response = try await client.send("/" + name, method)
                    #expect(response.status == .notFound, "\(method) \(name)")
                }
            }
            let checkpoint = try await client.send("/log/checkpoint", .get)
            #expect(checkpoint.status == .ok)
        }
    }
}
