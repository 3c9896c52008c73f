import Crypto
import CurlHTTP
import Foundation
import IDRotation
@testable import Matching
import PositiveListFormat
import Synchronization
import Testing
import TestTiers
import TracerCore

/// A list signed too long ago is reported as outdated, whether the server sends it or confirms
/// the held one with a 304: a frozen mirror must not look current. The node still holds the
/// newest list it could get, since an old list is better than an older one.
@Suite(.tags(.unit)) struct ListFreshnessTests {
    static let now: UnixSeconds = 1_800_000_000
    static let day: UnixSeconds = 86_400

    struct FixedClock: WallClock {
        let time: UnixSeconds
        func now() -> UnixSeconds { time }
        func sleep(until time: UnixSeconds) async throws {}
    }

    /// Serves an index and its batches from memory, answering 304 to the index's ETag.
    final class StaticServer: HTTPTransferring {
        private let files = Mutex<[String: [UInt8]]>([:])

        func publish(_ path: String, _ bytes: [UInt8]) { files.withLock { $0["http://list.test/" + path] = bytes } }

        func remove(_ path: String) { _ = files.withLock { $0.removeValue(forKey: "http://list.test/" + path) } }

        private static func etag(_ bytes: [UInt8]) -> String { "\"" + SHA256.hash(data: bytes).map { String(format: "%02x", $0) }.joined() + "\"" }

        func perform(_ request: HTTPRequest) async throws(HTTPClientError) -> HTTPResponse {
            guard let bytes = files.withLock({ $0[request.url] }) else { return HTTPResponse(status: 404) }
            let etag = Self.etag(bytes)
            if request.headers.contains(where: { $0.name == "If-None-Match" && $0.value == etag }) { return HTTPResponse(status: 304) }
            return HTTPResponse(status: 200, headers: ["etag": etag], body: bytes)
        }

        func download(_ request: HTTPRequest, to path: String, progress: (@Sendable (DownloadProgress) -> Void)?) async throws(HTTPClientError) -> HTTPResponse {
            let response = try await perform(request)
            if response.status == 200 { FileManager.default.createFile(atPath: path, contents: Data(response.body)) }
            return HTTPResponse(status: response.status)
        }
    }

    let signer = BatchSigner()
    let server = StaticServer()

    /// Publishes batch 1 under an index of `generation` signed at `signedAt`.
    func publish(generation: UInt64, signedAt: UnixSeconds) throws {
        let batch = try signer.batch(number: 1, [listed(42, from: Self.now - 900, to: Self.now)])
        server.publish("batches/1.tplb", batch)
        let listing = PositiveListIndex.BatchListing(
            number: 1, timeRange: PublishedTimeRange(start: Self.now - 900, end: Self.now), byteCount: batch.count,
            sha256: Array(SHA256.hash(data: batch)))
        server.publish(PositiveListIndex.relativePath, try PositiveListIndex(generation: generation, publishedAt: signedAt, batches: [listing])
            .encode(signingKey: signer.key))
    }

    func updater(_ cache: PositiveListCache, at time: UnixSeconds, maximumAge: UnixSeconds? = 2 * day) -> PositiveListUpdater {
        PositiveListUpdater(
            source: PositiveListSource(baseURL: "http://list.test/", publicKey: signer.publicKey), cache: cache, http: server,
            maximumListAge: maximumAge, clock: FixedClock(time: time))
    }

    func expectOutdated(_ update: () async throws(ListUpdateError) -> ListUpdate, signedAt: UnixSeconds) async {
        do {
            _ = try await update()
            Issue.record("an outdated list was accepted")
        } catch {
            guard case .outdated(let publishedAt, _) = error else {
                Issue.record("expected outdated, got \(error)")
                return
            }
            #expect(publishedAt == signedAt)
            #expect(error.description.contains("stopped updating"))
        }
    }

    @Test func aListSignedTooLongAgoIsHeldButReportedOutdated() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let cache = PositiveListCache(directory: directory.path)
        try publish(generation: 1, signedAt: Self.now - 2 * Self.day - 1)
        await expectOutdated({ () async throws(ListUpdateError) in try await updater(cache, at: Self.now).update() }, signedAt: Self.now - 2 * Self.day - 1)
        #expect(cache.index(publicKey: signer.publicKey)?.generation == 1, "the only list there is, with its batch")
        #expect(cache.holds(try #require(cache.index(publicKey: signer.publicKey)?.batches.first)))
        #expect(cache.state.lastFailure?.contains("stopped updating") == true)
        #expect(cache.state.lastUpdated == nil)
        // Exactly at the limit it is still current; and without a limit any age is.
        try publish(generation: 2, signedAt: Self.now - 2 * Self.day)
        #expect(try await updater(cache, at: Self.now).update().index.generation == 2)
        try publish(generation: 3, signedAt: Self.now - 30 * Self.day)
        #expect(try await updater(cache, at: Self.now, maximumAge: nil).update().index.generation == 3)
    }

    @Test func aNewerListIsTakenEvenWhenItIsOutdated() async throws {
        // A node that was off for a week, while the server froze three days ago.
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let cache = PositiveListCache(directory: directory.path)
        try publish(generation: 1, signedAt: Self.now)
        _ = try await updater(cache, at: Self.now).update()
        try publish(generation: 2, signedAt: Self.now + 4 * Self.day)
        await expectOutdated({ () async throws(ListUpdateError) in try await updater(cache, at: Self.now + 7 * Self.day).update() }, signedAt: Self.now + 4 * Self.day)
        #expect(cache.index(publicKey: signer.publicKey)?.generation == 2)
    }

    @Test func aFrozenServerConfirmingTheHeldListIsNoticed() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let cache = PositiveListCache(directory: directory.path)
        try publish(generation: 1, signedAt: Self.now)
        #expect(try await updater(cache, at: Self.now).update().changed)
        let held = try #require(cache.index(publicKey: signer.publicKey))

        // A day later the server answers 304: fine. Three days later still 304: outdated.
        let aDayLater = try await updater(cache, at: Self.now + Self.day).update()
        #expect(!aDayLater.changed)
        await expectOutdated({ () async throws(ListUpdateError) in try await updater(cache, at: Self.now + 3 * Self.day).update() }, signedAt: Self.now)
        #expect(cache.index(publicKey: signer.publicKey) == held, "the last good list stays")
        #expect(cache.state.lastUpdated == Self.now + Self.day)

        // The server signs a fresh index over the same batch: current again.
        try publish(generation: 2, signedAt: Self.now + 3 * Self.day - 60)
        let refreshed = try await updater(cache, at: Self.now + 3 * Self.day).update()
        #expect(refreshed.index.generation == 2)
        #expect(refreshed.downloadedBatches == 0)
    }
}
