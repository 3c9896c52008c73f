import Crypto
import CurlHTTP
import Foundation
import Matching
import Synchronization
import TestTiers
import Testing
import PositiveListFormat
import TracerCore
import TransparencyLog

/// A node following the list log over HTTP (issue 39, item 2): a conditional request for the
/// checkpoint, the new entries only, the outcome recorded where `tracer status` reads it, and the
/// refusals a node must make without losing the list it holds. The log is built with the
/// server's appender and served from memory as a web server serves static files.
@Suite(.tags(.unit)) struct ListLogUpdaterTests {
    typealias PublishedLog = LogFollowerTests.PublishedLog
    static let signedAt: UnixSeconds = 1_764_000_000

    struct FixedClock: WallClock {
        let time: UnixSeconds
        func now() -> UnixSeconds { time }
        func sleep(until time: UnixSeconds) async throws {}
    }

    /// Static files under http://list.test/log/: the checkpoint with an ETag of its bytes and a
    /// 304 to it, bundles with Range; 404 for anything else or while `publishesLog` is false.
    final class StaticLogServer: HTTPTransferring {
        let log = Mutex<PublishedLog?>(nil)
        let requests = Mutex<[HTTPRequest]>([])

        func serve(_ published: PublishedLog?) { log.withLock { $0 = published } }

        func perform(_ request: HTTPRequest) async throws(HTTPClientError) -> HTTPResponse {
            requests.withLock { $0.append(request) }
            guard let log = log.withLock({ $0 }), request.url.hasPrefix("http://list.test/log/") else { return HTTPResponse(status: 404) }
            let path = String(request.url.dropFirst("http://list.test/log/".count))
            if path == "checkpoint" {
                // Of every byte: Data's hashValue reads only a prefix, the same for two notes of one tree.
                let etag = "\"" + SHA256.hash(data: log.checkpoint).prefix(8).map { String(format: "%02x", $0) }.joined() + "\""
                if request.headers.contains(HTTPHeaderField(name: "If-None-Match", value: etag)) {
                    return HTTPResponse(status: 304, headers: ["etag": etag])
                }
                return HTTPResponse(status: 200, headers: ["etag": etag], body: Array(log.checkpoint))
            }
            guard let bytes = log.files[path] else { return HTTPResponse(status: 404) }
            if let range = request.headers.first(where: { $0.name == "Range" }), let offset = Int(range.value.dropFirst(6).dropLast()) {
                return HTTPResponse(status: 206, headers: ["content-range": "bytes \(offset)-\(bytes.count - 1)/\(bytes.count)"],
                                    body: Array(bytes.dropFirst(offset)))
            }
            return HTTPResponse(status: 200, body: Array(bytes))
        }

        func download(_ request: HTTPRequest, to path: String, progress: (@Sendable (DownloadProgress) -> Void)?) async throws(HTTPClientError) -> HTTPResponse {
            HTTPResponse(status: 500)
        }

        var checkpointRequests: [HTTPRequest] { requests.withLock { $0.filter { $0.url.hasSuffix("/checkpoint") } } }
    }

    struct Node {
        let directory: String
        let server = StaticLogServer()
        let signer: NoteSigner
        /// The log's own timestamp (the same key as a cosignature/v1 signer), as the server signs it.
        let timestamp: NoteSigner

        init() throws {
            directory = FileManager.default.temporaryDirectory.appendingPathComponent("log-updater-\(UUID().uuidString)").path
            let key = Curve25519.Signing.PrivateKey()
            signer = try NoteSigner(name: LogFollowerTests.origin, privateKey: key)
            timestamp = try NoteSigner(name: LogFollowerTests.origin, type: .cosignatureV1, privateKey: key)
        }

        /// A log this node's server publishes: signed and timestamped with its key.
        func published(_ entries: [Data], signer other: NoteSigner? = nil) throws -> PublishedLog {
            var log = PublishedLog(signer: other ?? signer)
            try log.append(entries, cosigners: other == nil ? [timestamp] : [])
            return log
        }

        var cache: ListCacheDirectory { ListCacheDirectory(directory: directory) }
        var log: FollowedListLog {
            FollowedListLog(source: LogFollowerTests.source(signer), store: FollowedLogStore(directory: directory + "/log"))
        }

        func updater(now: UnixSeconds = ListLogUpdaterTests.signedAt + 60, maximumListAge: UnixSeconds? = 172_800) -> ListLogUpdater {
            ListLogUpdater(log: log, files: HTTPLogFiles(baseURL: "http://list.test/log", http: server), cache: cache,
                           maximumListAge: maximumListAge, clock: FixedClock(time: now))
        }

        /// A log whose checkpoint the server signed at `time`.
        func published(_ entries: [Data], signedAt time: UInt64) throws -> PublishedLog {
            var log = PublishedLog(signer: signer)
            try log.append(entries, cosigners: [timestamp], timestamp: time)
            return log
        }

        func update(now: UnixSeconds = ListLogUpdaterTests.signedAt + 60) async throws(ListUpdateError) -> LogUpdate {
            let lock = try await cache.lock()
            defer { lock.release() }
            return try await updater(now: now).update(holding: lock)
        }

        func remove() { try? FileManager.default.removeItem(atPath: directory) }
    }

    @Test func whileNothingChangesARevalidationIsOneConditionalRequestAnsweredWithA304() async throws {
        let node = try Node()
        defer { node.remove() }
        var published = try node.published(LogFollowerTests.entries(0..<300))
        node.server.serve(published)

        let first = try await node.update()
        #expect(first == LogUpdate(changed: true, treeSize: 300, newEntries: 300, signedAt: Self.signedAt))
        #expect(try node.log.store.load()?.entries.read() == published.entries)
        let before = node.server.requests.withLock { $0.count }

        let second = try await node.update()
        #expect(second == LogUpdate(changed: false, treeSize: 300, newEntries: 0, signedAt: Self.signedAt))
        let asked = node.server.requests.withLock { Array($0.dropFirst(before)) }
        #expect(asked.count == 1, "one request while nothing changed")
        #expect(asked.first?.headers.first?.name == "If-None-Match")
        #expect(node.cache.state.lastUpdated == Self.signedAt + 60)
        #expect(node.cache.state.lastFailure == nil)

        // A change costs the checkpoint and the new entries only.
        try published.append(LogFollowerTests.entries(300..<305), cosigners: [node.timestamp])
        node.server.serve(published)
        let third = try await node.update()
        #expect(third.newEntries == 5 && third.changed)
        #expect(try node.log.store.load()?.entries.read() == published.entries)
    }

    /// A server without a log (one from before it) is a failed update that says so; once the
    /// node has followed the log, a 404 is a failing server or cache, said as such.
    @Test func aServerWithoutALogIsAFailedUpdateThatSaysSo() async throws {
        let node = try Node()
        defer { node.remove() }
        await #expect(throws: ListUpdateError.logNotPublished(url: "http://list.test/log/checkpoint")) { try await node.update() }
        #expect(node.cache.state.lastFailure?.contains("publishes no list log") == true, "\(node.cache.state)")

        let published = try node.published(LogFollowerTests.entries(0..<3))
        node.server.serve(published)
        _ = try await node.update()
        #expect(node.cache.state.lastFailure == nil)
        node.server.serve(nil)
        await #expect(throws: ListUpdateError.unexpectedStatus(url: "http://list.test/log/checkpoint", status: 404)) { try await node.update() }
        #expect(node.cache.state.lastFailure != nil)
        #expect(try node.log.store.load()?.state.treeSize == 3)
    }

    /// A cache an older tracer filled while it followed the signed index: its index, batch and
    /// key files stay untouched until the log has been followed, then go, so no stale copy of
    /// an old list stays on disk. The log, its state and lock stay.
    @Test func theFirstFollowedLogRemovesTheIndexFilesOfAnOlderTracer() async throws {
        let node = try Node()
        defer { node.remove() }
        let old = ["index.tpli", "index.etag", "batches/1.tplb", "batches/2.tplb.tmp", "keys/index.tpki", "keys/index.etag", "keys/1.tpkb"]
        for path in old {
            try FileManager.default.createDirectory(atPath: node.directory + "/" + (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
            try Data("held by an older tracer".utf8).write(to: URL(fileURLWithPath: node.directory + "/" + path))
        }
        // A failed update removes nothing.
        await #expect(throws: ListUpdateError.self) { try await node.update() }
        #expect(old.allSatisfy { FileManager.default.fileExists(atPath: node.directory + "/" + $0) })

        node.server.serve(try node.published(LogFollowerTests.entries(0..<3)))
        _ = try await node.update()
        let left = try FileManager.default.contentsOfDirectory(atPath: node.directory).sorted()
        #expect(left == ["lock", "log", "state.json"], "\(left)")
        #expect(try node.log.store.load()?.state.treeSize == 3)
    }

    @Test func aSplitViewIsKeptAsEvidenceOnceAndTheHeldListStays() async throws {
        let node = try Node()
        defer { node.remove() }
        let shown = try node.published(LogFollowerTests.entries(0..<5))
        node.server.serve(shown)
        _ = try await node.update()

        let other = try node.published(LogFollowerTests.entries(0..<5, tag: "b"))
        node.server.serve(other)
        for _ in 0..<2 {
            do {
                _ = try await node.update()
                Issue.record("a fork was accepted")
            } catch {
                guard case .logForked(5, let directory?) = error else {
                    Issue.record("expected a fork with evidence, got \(error)")
                    continue
                }
                #expect(FileManager.default.contents(atPath: directory + "/held-checkpoint") == shown.checkpoint)
                #expect(FileManager.default.contents(atPath: directory + "/offered-checkpoint") == other.checkpoint)
                #expect(error.description.contains("two different lists"))
            }
        }
        #expect(node.log.store.evidence().count == 1, "the same fork shown again fills no disk")
        #expect(try node.log.store.load()?.entries.read() == shown.entries)
        #expect(node.cache.state.lastFailure?.contains("two different lists") == true)
    }

    @Test func anOutdatedLogIsFollowedAndSaidToBeOutdated() async throws {
        let node = try Node()
        defer { node.remove() }
        let published = try node.published(LogFollowerTests.entries(0..<4))
        node.server.serve(published)
        let now = Self.signedAt + 3 * 86_400
        await #expect(throws: ListUpdateError.outdated(publishedAt: Self.signedAt, ageSeconds: 3 * 86_400)) { try await node.update(now: now) }
        // Newer than nothing: held all the same, and matched while the check says it is outdated.
        #expect(try node.log.store.load()?.state.treeSize == 4)
        #expect(node.cache.state.lastFailure?.contains("72 hours ago") == true)
        #expect(node.cache.state.lastUpdated == nil, "an outdated log is not confirmed current")
    }

    @Test func aDamagedCopyIsFollowedAfreshFromTheLog() async throws {
        let node = try Node()
        defer { node.remove() }
        let published = try node.published(LogFollowerTests.entries(0..<20))
        node.server.serve(published)
        _ = try await node.update()
        // The entries file loses its tail (a disk error, a user's editor).
        let entriesPath = node.directory + "/log/entries"
        let bytes = try #require(FileManager.default.contents(atPath: entriesPath))
        try bytes.prefix(bytes.count - 30).write(to: URL(fileURLWithPath: entriesPath))

        let update = try await node.update()
        #expect(update.newEntries == 20 && update.treeSize == 20)
        #expect(try node.log.store.load()?.entries.read() == published.entries)
        let last = try #require(node.server.checkpointRequests.last)
        #expect(last.headers.isEmpty, "nothing held: the checkpoint is not asked for conditionally")
    }

    @Test func aCheckpointTheNodeCannotOpenLeavesTheListAsItWas() async throws {
        let node = try Node()
        defer { node.remove() }
        let published = try node.published(LogFollowerTests.entries(0..<6))
        node.server.serve(published)
        _ = try await node.update()

        let forged = try node.published(LogFollowerTests.entries(0..<9), signer: try NoteSigner.generate(name: LogFollowerTests.origin))
        node.server.serve(forged)
        do {
            _ = try await node.update()
            Issue.record("a checkpoint signed by another key was accepted")
        } catch {
            guard case .logRefused(let reason) = error else { throw error }
            #expect(reason.contains("checkpoint"))
        }
        #expect(try node.log.store.load()?.state.treeSize == 6)
        #expect(node.log.store.evidence().isEmpty, "another key's note proves nothing about this log")
    }

    /// Log entries of one id each, batch `number`, valid until `until`.
    static func idEntries(_ numbers: Range<Int>, until: UnixSeconds) throws -> [Data] {
        try numbers.map { number in
            let id = PositiveListEntry(id: UserID(rawValue: UInt64(number) &* 0x9E37_79B9_7F4A_7C15), validFrom: until - 900, validUntil: until)
            return Data(try ListLogEntry(batchNumber: UInt64(number + 1), part: 0, partCount: 1, payload: .ids([id])).encode())
        }
    }

    /// Retention (issue 39, item 3): a fresh node downloads only the bundles holding entries it
    /// can still match, and a following node drops bundles whose entries have all expired.
    @Test func aNodeKeepsOnlyTheBundlesItCanStillMatch() async throws {
        let node = try Node()
        defer { node.remove() }
        let now = Self.signedAt + 60
        let day: UnixSeconds = 86_400
        // 600 entries that ended 60 days ago, then 300 that ended yesterday.
        let old = try Self.idEntries(0..<600, until: now - 60 * day)
        let recent = try Self.idEntries(600..<900, until: now - day)
        var published = try node.published(old + recent, signedAt: UInt64(Self.signedAt))
        node.server.serve(published)
        _ = try await node.update(now: now)
        let fresh = try #require(try node.log.store.load())
        #expect(fresh.firstIndex == 512, "bundle 1 is all expired (fetched to find that out), bundle 2 holds live entries")
        #expect(try fresh.entries.read() == Array((old + recent)[512...]))
        #expect(!node.server.requests.withLock { $0 }.contains { $0.url.hasSuffix("/tile/entries/000") }, "older history is never downloaded")

        // Forty days on, with ten new entries: every bundle before the newest live one goes.
        let later = now + 40 * day
        let newer = try Self.idEntries(900..<910, until: later - day)
        try published.append(newer, cosigners: [node.timestamp], timestamp: UInt64(later - 60))
        node.server.serve(published)
        let update = try await node.update(now: later)
        #expect(update.newEntries == 10)
        let kept = try #require(try node.log.store.load())
        #expect(kept.firstIndex == 768)
        #expect(try kept.entries.read() == Array((old + recent + newer)[768...]))
        #expect(kept.state.treeSize == 910)
    }

    /// A node that followed the log takes a 404 for the checkpoint as a failing server even
    /// after its copy was forgotten: never as a server from before the log.
    @Test func aNodeThatFollowedTheLogRemembersItAfterItsCopyIsForgotten() async throws {
        let node = try Node()
        defer { node.remove() }
        node.server.serve(try node.published(LogFollowerTests.entries(0..<3)))
        _ = try await node.update()
        try node.log.store.reset()
        #expect(node.log.store.hasFollowed, "a forgotten copy does not make the node forget that it followed the log")
        node.server.serve(nil)
        await #expect(throws: ListUpdateError.unexpectedStatus(url: "http://list.test/log/checkpoint", status: 404)) { try await node.update() }
    }

    /// A damaged copy is replaced only by a tree at least as large, and at its size by the same
    /// root: a cache cannot use the node's damaged copy to roll it back or show it another list.
    @Test func aDamagedCopyIsNeverReplacedByLess() async throws {
        let node = try Node()
        defer { node.remove() }
        let honest = try node.published(LogFollowerTests.entries(0..<20))
        node.server.serve(honest)
        _ = try await node.update()
        let entriesPath = node.directory + "/log/entries"
        func damage() throws {
            let bytes = try #require(FileManager.default.contents(atPath: entriesPath))
            try bytes.prefix(bytes.count - 30).write(to: URL(fileURLWithPath: entriesPath))
        }
        try damage()

        // An older tree (a rollback) and another tree of the same size (a split view).
        node.server.serve(try node.published(LogFollowerTests.entries(0..<10)))
        do {
            _ = try await node.update()
            Issue.record("a damaged copy was replaced by a smaller tree")
        } catch {
            guard case .logRefused(let reason) = error else { throw error }
            #expect(reason.contains("older than the 20"), "\(reason)")
        }
        #expect(node.log.store.holdsState, "the damaged copy stays until something at least as large is proved")
        node.server.serve(try node.published(LogFollowerTests.entries(0..<20, tag: "b")))
        await #expect(throws: ListUpdateError.self) { try await node.update() }
        #expect(node.log.store.evidence().count == 1)

        // The honest log again: followed afresh, the damaged copy replaced.
        node.server.serve(honest)
        let update = try await node.update()
        #expect(update.treeSize == 20)
        #expect(try node.log.store.load()?.entries.read() == honest.entries)
    }

    /// A node off longer than the server keeps history: every entry it holds has expired and the
    /// bundle after them is gone from the server, so it follows the log afresh, as a new node.
    @Test func aNodeOffLongerThanTheServerKeepsHistoryStartsAfresh() async throws {
        let node = try Node()
        defer { node.remove() }
        let day: UnixSeconds = 86_400
        let first = Self.signedAt + 60
        let later = first + 40 * day
        let old = try Self.idEntries(0..<1_500, until: first - day)
        let recent = try Self.idEntries(1_500..<2_000, until: later - day)
        node.server.serve(try node.published(Array(old.prefix(300)), signedAt: UInt64(Self.signedAt)))
        _ = try await node.update(now: first)
        #expect(try node.log.store.load()?.firstIndex == 0)

        // Forty days on: the server deleted the bundles before the one preceding the first live
        // one (0 to 3; entry 1,500 is in bundle 5).
        var grown = try node.published(old + recent, signedAt: UInt64(later - 60))
        for path in grown.files.keys where ["000", "001", "002", "003"].contains(where: { path.hasPrefix("tile/entries/" + $0) }) {
            grown.files[path] = nil
        }
        node.server.serve(grown)
        let update = try await node.update(now: later)
        #expect(update.treeSize == 2_000)
        let held = try #require(try node.log.store.load())
        #expect(held.firstIndex == 1_280, "from the bundle holding the first live entry")
        #expect(try held.entries.read() == Array((old + recent)[1_280...]))
    }
}
