import Crypto
import Foundation
import Hummingbird
import HummingbirdTesting
import IDRotation
import PositiveListFormat
@testable import PositiveListServer
import Testing
import TestTiers
import TracerCore
import TracerTestSupport

/// nginx from Debian's package (TracerTestSupport's NginxProcess), started by the test over a
/// scratch copy of deploy/nginx/tracer-server.conf, with its pid file, logs and temporary files in
/// a scratch directory that `stop()` removes. Missing nginx fails the test: CI installs it through
/// scripts/setup.
final class NginxInstance {
    private let nginx: NginxProcess

    var port: Int { nginx.port }

    init(publishedDirectory: String, upstreamPort: Int) async throws {
        let prefix = NSTemporaryDirectory() + "/tracer-nginx-" + UUID().uuidString
        do {
            nginx = try await NginxProcess(
                prefix: prefix, publishedDirectory: publishedDirectory, upstreamPort: upstreamPort,
                repositoryRoot: Self.repositoryRoot, workerProcesses: "1", captureErrors: true)
        } catch {
            try? FileManager.default.removeItem(atPath: prefix)
            throw error
        }
    }

    func stop() {
        nginx.stop()
        try? FileManager.default.removeItem(atPath: nginx.prefix)
    }

    static let repositoryRoot: String = {
        var url = URL(fileURLWithPath: #filePath)
        while url.pathComponents.count > 1 {
            url.deleteLastPathComponent()
            if FileManager.default.fileExists(atPath: url.path + "/Package.swift") { return url.path }
        }
        return FileManager.default.currentDirectoryPath
    }()

    func get(_ path: String, headers: HTTPFields = [:]) async throws -> TestClient.Response {
        try await TestClient.withClient(host: "127.0.0.1", port: port) { client in
            try await client.execute(TestClient.Request(path, method: .get, authority: "127.0.0.1", headers: headers))
        }
    }

    func send(_ request: TestClient.Request) async throws -> TestClient.Response {
        try await TestClient.withClient(host: "127.0.0.1", port: port) { client in try await client.execute(request) }
    }
}

@Suite(.tags(.integration), .serialized) struct NginxTests {
    @Test func nginxServesThePublishedDirectoryUnchangedAndNodesVerifyIt() async throws {
        let fixture = try ServerFixture { $0.trustForwardedFor = true }
        defer { fixture.remove() }
        for seed in 1...2 {
            let entries = try HistoryRules(fixture.configuration)
                .validate(SubmittedHistory(ids: Histories.entries(count: 500, endingAt: fixture.clock.now(), seed: UInt64(seed))), now: fixture.clock.now())
            _ = try await fixture.store.appendHistory(entries, credential: .authority(name: "Health Authority A"), idempotencyKey: nil, now: fixture.clock.now())
            let yesterday = UTCDay(containing: fixture.clock.now()).number - 1
            let keys = [DailyKeyRecord(day: UTCDay(number: yesterday), intervalSeconds: 900, key: DailyKey.random())]
            _ = try await fixture.store.appendKeyHistory(keys, credential: .authority(name: "Health Authority A"), idempotencyKey: nil, now: fixture.clock.now())
            try await fixture.makePublisher().publish()
            fixture.clock.advance(by: 3_600)
        }

        try await fixture.withServer { apiClient in
            let nginx = try await NginxInstance(publishedDirectory: fixture.paths.published.path, upstreamPort: try #require(apiClient.port))
            defer { nginx.stop() }

            var node = NodeFetcher(publicKey: fixture.publicKey)
            let throughNginx: (String, HTTPFields) async throws -> (HTTPResponse.Status, HTTPFields, [UInt8]) = { path, headers in
                let response = try await nginx.get(path, headers: headers)
                return (response.status, response.headers, response.body.map { Array($0.readableBytesView) } ?? [])
            }
            #expect(try await node.check(throughNginx) == [1, 2])
            #expect(node.batches.values.reduce(0) { $0 + $1.count } == 1_000)
            // Up to date: nginx answers the conditional request with 304.
            node.requests = []
            #expect(try await node.check(throughNginx) == [])

            let index = try await nginx.get("/index.tpli")
            #expect(index.headers[.cacheControl] == "public, max-age=60")
            let batch = try await nginx.get("/batches/1.tplb")
            #expect(batch.headers[.cacheControl] == "public, max-age=31536000, immutable")
            let tag = try #require(batch.headers[.eTag])
            let revalidated = try await nginx.get("/batches/1.tplb", headers: [.ifNoneMatch: tag])
            #expect(revalidated.status == .notModified)

            // The same bytes as tracer-server itself serves.
            let direct = try await apiClient.send("/batches/2.tplb", .get)
            let proxied = try await nginx.get("/batches/2.tplb")
            #expect(proxied.body.map { Array($0.readableBytesView) } == direct.bytes)

            // Key files (format version 2) are served the same way, byte for byte.
            let keyIndex = try await nginx.get("/keys/index.tpki")
            #expect(keyIndex.headers[.cacheControl] == "public, max-age=60")
            let keyIndexBytes = try #require(keyIndex.body.map { Array($0.readableBytesView) })
            #expect(try PositiveListKeyIndex(verifying: keyIndexBytes, publicKey: fixture.publicKey).batches.map(\.number) == [1, 2])
            let keyBatch = try await nginx.get("/keys/2.tpkb")
            #expect(keyBatch.headers[.cacheControl] == "public, max-age=31536000, immutable")
            #expect(keyBatch.body.map { Array($0.readableBytesView) } == (try await apiClient.send("/keys/2.tpkb", .get)).bytes)
            #expect(try await nginx.get("/keys/").status == .notFound)

            // Nothing but the published files: no listings, no temporary files.
            #expect(FileManager.default.createFile(atPath: fixture.paths.published.batchesPath + "/.tmp-index.tpli-x", contents: Data([1])))
            for path in ["/", "/batches/", "/batches/.tmp-index.tpli-x", "/server.db"] {
                #expect(try await nginx.get(path).status == .notFound, "\(path)")
            }
            // Nor what a link in the published directory points to (disable_symlinks), even a
            // file nginx's user could read.
            let outside = fixture.paths.dataDirectory + "/readable-outside"
            #expect(FileManager.default.createFile(atPath: outside, contents: Data("not published".utf8), attributes: [.posixPermissions: 0o644]))
            try FileManager.default.createSymbolicLink(atPath: fixture.paths.published.batchPath(number: 9), withDestinationPath: outside)
            let linked = try await nginx.get("/batches/9.tplb")
            #expect(linked.status == .forbidden || linked.status == .notFound, "\(linked.status)")

            // The API through the proxy: health, and an upload whose client address comes from
            // X-Forwarded-For as nginx sets it.
            #expect(try await nginx.get("/healthz").status == .ok)
            let upload = try await nginx.send(TestClient.Request(
                "/v1/histories", method: .post, authority: "127.0.0.1", headers: .authority(),
                body: Histories.body(Histories.entries(count: 3, endingAt: fixture.clock.now(), seed: 9))))
            #expect(upload.status == .created)
        }
    }
}
