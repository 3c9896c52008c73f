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
import ServerTestSupport
import TracerTestSupport

@Suite(.tags(.integration), .serialized) struct NginxTests {
    @Test func nginxServesThePublishedLogUnchangedAndNothingElse() async throws {
        let fixture = try ServerFixture { $0.trustForwardedFor = true }
        defer { fixture.remove() }
        for seed in 1...2 {
            try await fixture.appendIDs(Histories.entries(count: 500, endingAt: fixture.clock.now(), seed: UInt64(seed)))
            let yesterday = UTCDay(containing: fixture.clock.now()).number - 1
            let keys = [DailyKeyRecord(day: UTCDay(number: yesterday), intervalSeconds: 900, key: DailyKey.random())]
            _ = try await fixture.store.appendKeyHistory(keys, credential: .authority(name: "Health Authority A"), idempotencyKey: nil, now: fixture.clock.now())
            try await fixture.makePublisher().publish()
            fixture.clock.advance(by: 3_600)
        }

        try await fixture.withServer { apiClient in
            let nginx = try await NginxInstance(publishedDirectory: fixture.paths.published.path, upstreamPort: try #require(apiClient.port))
            defer { nginx.stop() }

            // The log's files, byte for byte and as tracer-server itself serves them (their
            // headers and ranges: ListLogServingTests).
            let bundlePath = "/log/tile/entries/000.p/4"
            for path in ["/log/checkpoint", "/log/uploads", bundlePath] {
                let proxied = try await nginx.get(path)
                #expect(proxied.status == .ok, "\(path)")
                let bytes = proxied.body.map { Array($0.readableBytesView) }
                #expect(bytes == Array(try Data(contentsOf: URL(fileURLWithPath: fixture.paths.published.path + path))), "\(path)")
                #expect(bytes == (try await apiClient.send(path, .get)).bytes, "\(path)")
            }
            let checkpoint = try await nginx.get("/log/checkpoint")
            #expect(checkpoint.headers[.cacheControl] == "public, max-age=60")
            let tag = try #require(checkpoint.headers[.eTag])
            #expect(try await nginx.get("/log/checkpoint", headers: [.ifNoneMatch: tag]).status == .notModified)

            // The retired files of formats 1 and 2 are not served, even while an upgrade keeps
            // them on disk.
            let published = fixture.paths.published.path
            for folder in ["batches", "keys"] { try FileManager.default.createDirectory(atPath: published + "/" + folder, withIntermediateDirectories: true) }
            for name in ["index.tpli", "batches/1.tplb", "keys/index.tpki", "keys/2.tpkb"] {
                #expect(FileManager.default.createFile(atPath: published + "/" + name, contents: Data("retired".utf8), attributes: [.posixPermissions: 0o644]))
                #expect(try await nginx.get("/" + name).status == .notFound, "\(name)")
            }
            #expect(try await nginx.get("/keys/").status == .notFound)

            // Nothing but the published files: no listings, no temporary files.
            #expect(FileManager.default.createFile(atPath: fixture.paths.published.logPath + "/tile/entries/.tmp-000-x", contents: Data([1])))
            for path in ["/", "/log/", "/log/tile/entries/", "/log/tile/entries/.tmp-000-x", "/server.db"] {
                #expect(try await nginx.get(path).status == .notFound, "\(path)")
            }
            // Nor what a link in the published directory points to (disable_symlinks), even a
            // file nginx's user could read.
            let outside = fixture.paths.dataDirectory + "/readable-outside"
            #expect(FileManager.default.createFile(atPath: outside, contents: Data("not published".utf8), attributes: [.posixPermissions: 0o644]))
            try FileManager.default.createSymbolicLink(atPath: fixture.paths.published.logPath + "/tile/entries/009", withDestinationPath: outside)
            let linked = try await nginx.get("/log/tile/entries/009")
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
