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

/// A list log signed too long ago is reported as outdated, whether the server sends a new
/// checkpoint or confirms the held one with a 304: a frozen mirror must not look current. The
/// node still holds the newest list it could get, since an old list is better than an older one.
@Suite(.tags(.unit)) struct ListFreshnessTests {
    static let now: UnixSeconds = 1_800_000_000
    static let day: UnixSeconds = 86_400

    struct FixedClock: WallClock {
        let time: UnixSeconds
        func now() -> UnixSeconds { time }
        func sleep(until time: UnixSeconds) async throws {}
    }

    /// Serves files under http://list.test/ from memory, answering 304 to a file's ETag.
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
            if response.status == 200 { _ = FileManager.default.createFile(atPath: path, contents: Data(response.body)) }
            return HTTPResponse(status: response.status)
        }
    }

    typealias Node = ListLogUpdaterTests.Node
    static let signedAt = ListLogUpdaterTests.signedAt

    /// Updates `node` at `time`, holding its lock, with `maximumAge` as check.max_list_age.
    func update(_ node: Node, at time: UnixSeconds, maximumAge: UnixSeconds? = 2 * day) async throws(ListUpdateError) -> LogUpdate {
        let lock = try await node.cache.lock()
        defer { lock.release() }
        return try await node.updater(now: time, maximumListAge: maximumAge).update(holding: lock)
    }

    /// `entries` as the server publishes them in a checkpoint signed at `time`.
    func publish(_ node: Node, _ entries: Range<Int>, signedAt time: UnixSeconds) throws {
        node.server.serve(try node.published(LogFollowerTests.entries(entries), signedAt: UInt64(time)))
    }

    func expectOutdated(_ update: () async throws(ListUpdateError) -> LogUpdate, signedAt: UnixSeconds) async {
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
        let node = try Node()
        defer { node.remove() }
        let now = Self.signedAt + 2 * Self.day + 1
        try publish(node, 0..<3, signedAt: Self.signedAt)
        await expectOutdated({ () async throws(ListUpdateError) in try await update(node, at: now) }, signedAt: Self.signedAt)
        #expect(try node.log.store.load()?.state.treeSize == 3, "the only list there is, with its entries")
        #expect(node.cache.state.lastFailure?.contains("stopped updating") == true)
        #expect(node.cache.state.lastUpdated == nil)
        // Exactly at the limit it is still current; and without a limit any age is.
        try publish(node, 0..<4, signedAt: now - 2 * Self.day)
        #expect(try await update(node, at: now).treeSize == 4)
        try publish(node, 0..<5, signedAt: now - 30 * Self.day)
        #expect(try await update(node, at: now, maximumAge: nil).treeSize == 5)
    }

    @Test func aNewerListIsTakenEvenWhenItIsOutdated() async throws {
        // A node that was off for a week, while the server froze three days ago.
        let node = try Node()
        defer { node.remove() }
        try publish(node, 0..<3, signedAt: Self.signedAt)
        _ = try await update(node, at: Self.signedAt)
        try publish(node, 0..<6, signedAt: Self.signedAt + 4 * Self.day)
        await expectOutdated({ () async throws(ListUpdateError) in try await update(node, at: Self.signedAt + 7 * Self.day) },
                             signedAt: Self.signedAt + 4 * Self.day)
        #expect(try node.log.store.load()?.state.treeSize == 6)
    }

    @Test func aFrozenServerConfirmingTheHeldListIsNoticed() async throws {
        let node = try Node()
        defer { node.remove() }
        try publish(node, 0..<3, signedAt: Self.signedAt)
        #expect(try await update(node, at: Self.signedAt).changed)
        let held = try #require(try node.log.store.load())

        // A day later the server answers 304: fine. Three days later still 304: outdated.
        let aDayLater = try await update(node, at: Self.signedAt + Self.day)
        #expect(!aDayLater.changed)
        #expect(node.server.checkpointRequests.last?.headers.contains { $0.name == "If-None-Match" } == true, "confirmed by a 304")
        await expectOutdated({ () async throws(ListUpdateError) in try await update(node, at: Self.signedAt + 3 * Self.day) }, signedAt: Self.signedAt)
        #expect(try node.log.store.load()?.entries.read() == held.entries.read(), "the last good list stays")
        #expect(node.cache.state.lastUpdated == Self.signedAt + Self.day)

        // The server signs a fresh checkpoint over the same tree: current again, nothing new fetched.
        try publish(node, 0..<3, signedAt: Self.signedAt + 3 * Self.day - 60)
        let refreshed = try await update(node, at: Self.signedAt + 3 * Self.day)
        #expect(refreshed.treeSize == 3 && refreshed.newEntries == 0)
        #expect(node.cache.state.lastUpdated == Self.signedAt + 3 * Self.day)
    }
}
