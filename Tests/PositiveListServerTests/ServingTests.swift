import Crypto
import Foundation
import Hummingbird
import HummingbirdTesting
import IDRotation
import PositiveListFormat
@testable import PositiveListServer
import Testing
import TestTiers

/// What a node does: fetch the index, verify it, fetch the batches it does not have yet.
struct NodeFetcher {
    let publicKey: PositiveListPublicKey
    var indexTag: String?
    var batches: [UInt64: PositiveListBatch] = [:]
    var requests: [String] = []

    /// One check; returns the numbers of the batches downloaded this time.
    mutating func check(_ get: (String, HTTPFields) async throws -> (HTTPResponse.Status, HTTPFields, [UInt8])) async throws -> [UInt64] {
        var headers: HTTPFields = [:]
        if let indexTag { headers[.ifNoneMatch] = indexTag }
        requests.append(PositiveListIndex.relativePath)
        let (status, responseHeaders, body) = try await get("/" + PositiveListIndex.relativePath, headers)
        if status == .notModified { return [] }
        try #require(status == .ok)
        let index = try PositiveListIndex(verifying: body, publicKey: publicKey)
        indexTag = responseHeaders[.eTag]
        var downloaded: [UInt64] = []
        for listing in index.batches where batches[listing.number] == nil {
            requests.append(listing.relativePath)
            let (batchStatus, _, batchBody) = try await get("/" + listing.relativePath, [:])
            try #require(batchStatus == .ok)
            batches[listing.number] = try PositiveListBatch(verifying: batchBody, listedAs: listing, publicKey: publicKey)
            downloaded.append(listing.number)
        }
        // Batches that left the index are forgotten, as their ids are past retention.
        batches = batches.filter { entry in index.batches.contains { $0.number == entry.key } }
        return downloaded
    }
}

@Suite(.tags(.unit)) struct ServingTests {
    static let now = ServerFixture.start

    func append(_ fixture: ServerFixture, count: Int, seed: UInt64) async throws {
        let entries = try HistoryRules(fixture.configuration)
            .validate(SubmittedHistory(ids: Histories.entries(count: count, endingAt: fixture.clock.now(), seed: seed)), now: fixture.clock.now())
        _ = try await fixture.store.appendHistory(entries, credential: .authority(name: "Health Authority A"), idempotencyKey: nil, now: fixture.clock.now())
    }

    @Test func filesCarryETagsAndCacheControlAndRevalidateWith304() async throws {
        let fixture = try ServerFixture()
        defer { fixture.remove() }
        try await append(fixture, count: 100, seed: 1)
        try await fixture.makePublisher().publish()
        try await fixture.withServer { client in
            let index = try await client.send("/index.tpli", .get)
            #expect(index.status == .ok)
            #expect(index.headers[.cacheControl] == "public, max-age=60")
            #expect(index.headers[.contentType] == "application/octet-stream")
            let indexTag = try #require(index.headers[.eTag])
            #expect(indexTag.hasPrefix("\"") && indexTag.hasSuffix("\""))
            #expect(index.bytes == Array(try Data(contentsOf: URL(fileURLWithPath: fixture.paths.published.indexPath))))

            let batch = try await client.send("/batches/1.tplb", .get)
            #expect(batch.status == .ok)
            #expect(batch.headers[.cacheControl] == "public, max-age=31536000, immutable")
            let batchTag = try #require(batch.headers[.eTag])
            _ = try PositiveListBatch(verifying: batch.bytes, publicKey: fixture.publicKey)

            for (path, tag) in [("/index.tpli", indexTag), ("/batches/1.tplb", batchTag)] {
                for condition in [tag, "W/\(tag)", "\"other\", \(tag)", "*"] {
                    let revalidated = try await client.send(path, .get, headers: [.ifNoneMatch: condition])
                    #expect(revalidated.status == .notModified, "\(path) \(condition)")
                    #expect(revalidated.body.readableBytes == 0)
                    #expect(revalidated.headers[.eTag] == tag)
                }
                let changed = try await client.send(path, .get, headers: [.ifNoneMatch: "\"not-the-tag\""])
                #expect(changed.status == .ok)
            }

            let head = try await client.send("/batches/1.tplb", .head)
            #expect(head.status == .ok)
            #expect(head.headers[.eTag] == batchTag)
            #expect(head.body.readableBytes == 0)
        }
    }

    @Test func aNodeUpToDateDownloadsOnlyTheIndexThenOnlyNewBatches() async throws {
        let fixture = try ServerFixture()
        defer { fixture.remove() }
        let publisher = fixture.makePublisher()
        try await append(fixture, count: 100, seed: 1)
        try await publisher.publish()
        fixture.clock.advance(by: 3_600)
        try await append(fixture, count: 50, seed: 2)
        try await publisher.publish()

        try await fixture.withServer { client in
            var node = NodeFetcher(publicKey: fixture.publicKey)
            let get: (String, HTTPFields) async throws -> (HTTPResponse.Status, HTTPFields, [UInt8]) = { path, headers in
                let response = try await client.send(path, .get, headers: headers)
                return (response.status, response.headers, response.bytes)
            }
            // A new node: the index and every live batch.
            #expect(try await node.check(get) == [1, 2])
            // Up to date: one conditional request, answered 304.
            node.requests = []
            #expect(try await node.check(get) == [])
            #expect(node.requests == ["index.tpli"])

            // A new batch: the changed index, then only that batch.
            fixture.clock.advance(by: 3_600)
            try await append(fixture, count: 20, seed: 3)
            try await publisher.publish()
            node.requests = []
            #expect(try await node.check(get) == [3])
            #expect(node.requests == ["index.tpli", "batches/3.tplb"])
            #expect(node.batches.values.reduce(0) { $0 + $1.count } == 170)
        }
    }

    @Test func aTamperedFileOnTheServerIsCaughtByTheNode() async throws {
        let fixture = try ServerFixture()
        defer { fixture.remove() }
        try await append(fixture, count: 10, seed: 1)
        try await fixture.makePublisher().publish()
        // Someone with write access to the web root flips one byte of a batch.
        let path = fixture.paths.published.batchPath(number: 1)
        var bytes = Array(try Data(contentsOf: URL(fileURLWithPath: path)))
        bytes[PositiveListBatch.headerByteCount + 3] ^= 0x10
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        try await fixture.withServer { client in
            var node = NodeFetcher(publicKey: fixture.publicKey)
            await #expect(throws: PositiveListFormatError.digestMismatch(batchNumber: 1)) {
                try await node.check { path, headers in
                    let response = try await client.send(path, .get, headers: headers)
                    return (response.status, response.headers, response.bytes)
                }
            }
        }
    }
}
