import CurlHTTP
import Foundation
import IDRotation
import Matching
import PositiveListFormat
import Testing
import TestTiers
import TracerCore
import TracerTestSupport
import TransparencyLog

/// The list as a log across real processes (issue 39): `tracer-server serve` publishes it, Debian's
/// nginx serves the published directory with the repository's configuration, and the node's
/// follower fetches it through libcurl, Range requests included. A stale mirror that puts an
/// older checkpoint back is refused, and the node keeps the list it holds.
@Suite(.tags(.integration)) struct ListLogOverNginxTests {
    /// A key history of one key per day `daysAgo`, appended and published.
    static func publishKeys(_ server: ListServerProcess, daysAgo: [Int64], now: UnixSeconds) throws -> [DailyKeyRecord] {
        let today = UTCDay(containing: now).number
        let records = daysAgo.map { DailyKeyRecord(day: UTCDay(number: today - $0), intervalSeconds: 900, key: DailyKey.random()) }
        try server.appendKeys(records)
        try server.publish()
        return records
    }

    /// The keys the log's new entries carry.
    static func keys(in entries: [Data]) throws -> Set<DailyKey> {
        var keys: Set<DailyKey> = []
        for entry in entries {
            guard case .keys(let records) = try ListLogEntry(decoding: [UInt8](entry)).payload else { continue }
            keys.formUnion(records.map(\.key))
        }
        return keys
    }

    @Test(.timeLimit(.minutes(2)))
    func aNodeFollowsTheServersLogThroughNginxAndRefusesAnOlderCheckpoint() async throws {
        try RequiredTool.nginx.require()
        let scratch = try Scratch()
        defer { scratch.remove() }
        let server = try ListServerProcess(scratch: scratch)
        defer { server.stop() }
        let published = server.dataDirectory + "/public"
        let nginx = try await NginxProcess(
            prefix: scratch.file("nginx"), publishedDirectory: published, upstreamPort: server.port,
            repositoryRoot: RequiredTool.repositoryRoot, workerProcesses: "1", captureErrors: true)
        defer { nginx.stop() }

        // What an operator hands to nodes: the log's verifier key, as `tracer-server status` prints it.
        let status = try server.runServer(["status"])
        let keyLine = try #require(status.stdout.split(separator: "\n").first { $0.hasPrefix("Log verifier key:") }, "\(status)")
        let logKey = try NoteVerifierKey(text: String(keyLine.dropFirst("Log verifier key:".count)).trimmingCharacters(in: .whitespaces))
        let source = FollowedLogSource(origin: logKey.name, logKey: logKey)
        let files = HTTPLogFiles(baseURL: "http://127.0.0.1:\(nginx.port)/log", http: CurlHTTPClient())
        let store = FollowedLogStore(directory: scratch.file("node-log"))

        let now = UnixSeconds(Date().timeIntervalSince1970)
        let firstKeys = try Self.publishKeys(server, daysAgo: [2, 3, 4], now: now)
        let first = try await LogFollower.advance(nil, source: source, fetcher: files)
        try store.save(first.state, appending: first.newEntries)
        #expect(try Self.keys(in: first.newEntries) == Set(firstKeys.map(\.key)))
        // The server's own timestamp on the checkpoint: what tells a node its list is current.
        let signedAt = try #require(first.signedAt, "the checkpoint carries no timestamp the node can verify")
        #expect(abs(Int64(signedAt) - now) < 120)
        let olderCheckpoint = try Data(contentsOf: URL(fileURLWithPath: published + "/log/checkpoint"))

        // The second publication: only its entries come down, the first bundle's held start by Range.
        let secondKeys = try Self.publishKeys(server, daysAgo: [2, 5], now: now)
        let second = try await LogFollower.advance(first.state, source: source, fetcher: files)
        try store.save(second.state, appending: second.newEntries)
        #expect(try Self.keys(in: second.newEntries) == Set(secondKeys.map(\.key)))
        #expect(second.state.treeSize > first.state.treeSize)
        let held = try #require(try store.load())
        #expect(try held.state == second.state && held.entries.read() == first.newEntries + second.newEntries)

        // A mirror serves the older checkpoint again: refused as older, the held list stays, and
        // it is no evidence (a cache that has not caught up does the same).
        try olderCheckpoint.write(to: URL(fileURLWithPath: published + "/log/checkpoint"))
        do {
            _ = try await LogFollower.advance(held.state, source: source, fetcher: files)
            Issue.record("an older checkpoint was accepted")
        } catch {
            guard case .olderTree(let heldSize, let offered) = error else {
                Issue.record("not refused as older: \(error)")
                return
            }
            #expect(heldSize == second.state.treeSize && offered == first.state.treeSize)
            #expect(try store.keepEvidence(of: error, at: now) == nil)
            #expect(try store.load()?.state == second.state)
        }
    }
}
