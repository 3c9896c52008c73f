import Foundation
import IDRotation
import PositiveListFormat
import PositiveListServer
import Testing
import TestTiers
import TracerCore
import ServerTestSupport
import TracerTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// Issue 29, the server's half of "a verdict within minutes": a real `serve` publishes soon
/// after an accepted upload (not at its hourly tick), spaces publications out under a stream of
/// uploads, and answers the long poll `GET /v1/generation` when it publishes, after its timeout,
/// or not at all over the connection limit.
@Suite(.tags(.integration)) struct PublishSoonTests {
    /// A fixture's `serve` (hourly schedule unless `extra` says otherwise), once it has
    /// published its first, empty log; `body` gets its port and the running serve (its debug
    /// log, its metrics listener).
    static func withServer(_ extra: String = "", _ body: (ServerFixture, Int, RunningServe) async throws -> Void) async throws {
        let fixture = try ServerFixture()
        defer { fixture.remove() }
        let metricsPort = try LoopbackPort.free()
        try fixture.writeConfiguration(extra: extra + Self.metricsListener(metricsPort))
        let port = try LoopbackPort.free()
        let log = try ServerLog()
        defer { log.remove() }
        let server = try await ServerCLI.serveWithOpenFileLimit(
            1_024, port: port, fixture: fixture, stderr: log.handle, environment: ["TRACER_SERVER_LOG_LEVEL": "debug"])
        defer {
            server.terminate()
            server.waitUntilExit()
        }
        _ = await eventually(every: .milliseconds(50)) { FileManager.default.fileExists(atPath: fixture.paths.published.logCheckpointPath) }
        // The long poll learns the log's size after the publication wrote the checkpoint: when
        // the log holds anything, a poll for anything newer than nothing returns once it has
        // (404 where the route is off). A test polling after the checkpoint's size before then
        // was woken by that catching up and answered 204 at once. (An empty log, as at a first
        // start, has nothing to catch up on: the watch starts at 0.)
        if try fixture.logTreeSize() > 0 {
            let caughtUp = try Self.longPoll(port: port, after: (0, 0))
            _ = try await caughtUp.receiveResponse(timeout: .seconds(10))
            caughtUp.leave()
        }
        try await body(fixture, port, RunningServe(log: log, metricsPort: metricsPort))
    }

    /// A running `serve`: its debug log, and its metrics listener, whose gauge of held long polls
    /// is the sign a test waits for before it counts on a poll being held.
    struct RunningServe {
        let log: ServerLog
        let metricsPort: Int

        /// Waits until the server holds exactly `count` long polls; false after 10 s.
        func hold(_ count: Int) async -> Bool { await PublishSoonTests.hold(count, metricsPort: metricsPort) }
    }

    static func metricsListener(_ port: Int) -> String { #", "metrics": {"listen": "127.0.0.1:\#(port)"}"# }

    /// Waits until `tracer_server_long_polls_held` on the metrics listener (set from the long poll's
    /// watch at each scrape) reads `count`; false after 10 s.
    static func hold(_ count: Int, metricsPort: Int) async -> Bool {
        await eventually(timeout: .seconds(10), every: .milliseconds(20)) {
            (try? await Exposition.scrape(port: metricsPort))?.value("tracer_server_long_polls_held") == Double(count)
        }
    }

    /// What the long poll announces: the log's tree size, and a key generation of 0 (the
    /// retired key index's; the log holds keys and ids alike).
    static func generations(_ fixture: ServerFixture) throws -> (ids: UInt64, keys: UInt64) {
        (try fixture.logTreeSize(), 0)
    }

    static func longPoll(port: Int, after held: (ids: UInt64, keys: UInt64), from source: String = "127.0.0.1") throws -> RawConnection {
        let connection = try RawConnection(port: port, from: source)
        connection.send("GET /v1/generation?after=\(held.ids)&keys=\(held.keys) HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        return connection
    }

    /// Ids whose windows ended 10 minutes ago and earlier: past their validity and the
    /// clock-skew allowance (300 s), so the server may publish them at once.
    static func upload(port: Int, seed: UInt64, endingIn secondsFromNow: UnixSeconds = -600) async throws -> RawConnection.Response {
        let now = UnixSeconds(Date().timeIntervalSince1970)
        let entries = Histories.entries(count: 8, endingAt: now + secondsFromNow, seed: seed)
        let body = String(decoding: Histories.body(entries).readableBytesView, as: UTF8.self)
        let connection = try RawConnection(port: port)
        connection.send(
            "POST /v1/histories HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer \(ServerFixture.authorityToken)\r\n"
                + "Content-Type: application/json\r\nContent-Length: \(body.utf8.count)\r\nConnection: close\r\n\r\n" + body)
        return try await connection.receiveResponse()
    }

    @Test(.timeLimit(.minutes(1))) func anUploadIsPublishedAtOnceAndTheLongPollAnswers() async throws {
        try await Self.withServer(#", "longPollSeconds": 30"#) { fixture, port, serve in
            let log = serve.log
            let before = try Self.generations(fixture)
            let poll = try Self.longPoll(port: port, after: before)
            // Held before the upload, so that the answer below is the publication's wake-up.
            #expect(await serve.hold(1), "the server never held the poll")
            #expect(try await !poll.waitForClose(within: .milliseconds(1)))

            let uploaded = ContinuousClock.now
            #expect(try await Self.upload(port: port, seed: 1).status == 201)
            let answer = try await poll.receiveResponse(timeout: .seconds(10))
            #expect(answer.status == 200, "\(answer.text)")
            #expect(ContinuousClock.now - uploaded < .seconds(5), "published \(ContinuousClock.now - uploaded) after the upload")
            let told = try #require(try JSONSerialization.jsonObject(with: Data(answer.body.utf8)) as? [String: UInt64])
            let after = try Self.generations(fixture)
            #expect(told["generation"] == after.ids && after.ids > before.ids, "\(told) \(after)")
            #expect(try fixture.verifiedBatches().map(\.number) == [1])
            #expect(try fixture.verifiedBatches().first?.count == 8)

            // A second upload inside the spacing (300 s by default) waits: no batch per upload. The
            // scheduler says so once it has taken the request, which is when a publication
            // would otherwise have begun.
            let waiting = "publication requested; waiting for the spacing"
            let waitedBefore = log.text.components(separatedBy: waiting).count
            #expect(try await Self.upload(port: port, seed: 2).status == 201)
            #expect(await eventually(every: .milliseconds(20)) { log.text.components(separatedBy: waiting).count > waitedBefore },
                    "the scheduler never took the second upload's request: \(log.text.suffix(2_000))")
            // It waits for the spacing, not a moment (1 s is the shortest gap between any two publications).
            let line = log.text.split(separator: "\n").last { $0.contains(waiting) } ?? ""
            let seconds = line.firstMatch(of: #/seconds=(\d+)/#).flatMap { Int($0.1) } ?? 0
            #expect(seconds > 60, "the next publication comes \(seconds) s after the upload: \(line)")
            #expect(try fixture.verifiedBatches().map(\.number) == [1])
        }
    }

    /// Ids still valid when uploaded are held; the scheduler wakes when they become due (past
    /// their validity plus the clock-skew allowance), not at its hourly tick.
    @Test(.timeLimit(.minutes(1))) func heldIDsArePublishedWhenTheyBecomeDue() async throws {
        try await Self.withServer(#", "clockSkewSeconds": 1"#) { fixture, port, _ in
            let uploaded = ContinuousClock.now
            let uploadedAt = UnixSeconds(Date().timeIntervalSince1970)
            // The newest id is valid 3 s more, so due 4 s after the upload (past its validity and the skew).
            #expect(try await Self.upload(port: port, seed: 3, endingIn: 3).status == 201)
            var published: [UInt64] = []
            _ = try await eventually(every: .milliseconds(100)) {
                published = try fixture.verifiedBatches().map(\.number)
                return !published.isEmpty
            }
            #expect(published == [1], "not published \(ContinuousClock.now - uploaded) after the upload")
            // Not before they were due: the checkpoint the batch came with was signed after then.
            let publishedAt = UnixSeconds(try fixture.verifiedLog().signedAt)
            #expect(publishedAt >= uploadedAt + 4, "published \(publishedAt - uploadedAt) s after the upload, before the ids were due")
            #expect(try fixture.verifiedBatches().first?.count == 8)
            #expect(ContinuousClock.now - uploaded < .seconds(8))
        }
    }

    @Test(.timeLimit(.minutes(1))) func theLongPollTimesOutCleanlyAndIsOffByDefault() async throws {
        try await Self.withServer(#", "longPollSeconds": 1"#) { fixture, port, _ in
            let held = try Self.generations(fixture)
            let started = ContinuousClock.now
            let poll = try Self.longPoll(port: port, after: held)
            let answer = try await poll.receiveResponse(timeout: .seconds(5))
            #expect(answer.status == 204, "\(answer.text)")
            #expect(ContinuousClock.now - started >= .milliseconds(900))
            // The connection stays usable: the same client polls again on it, as a node that last
            // followed a server with the retired key index (its key generation nonzero), which
            // is answered at once since that generation says nothing of the log.
            poll.send("GET /v1/generation?after=0&keys=1 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            #expect(try await poll.receiveResponse(timeout: .seconds(2)).status == 200)
            let bad = try RawConnection(port: port)
            bad.send("GET /v1/generation?after=latest HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            let refused = try await bad.receiveResponse()
            #expect(refused.status == 400 && refused.apiError == "invalid_generation", "\(refused.text)")
        }
        try await Self.withServer { fixture, port, _ in
            let poll = try Self.longPoll(port: port, after: try Self.generations(fixture))
            #expect(try await poll.receiveResponse(timeout: .seconds(2)).status == 404)
        }
    }

    @Test(.timeLimit(.minutes(1))) func longPollsOverTheAddressLimitAreRefused() async throws {
        try await Self.withServer(#", "longPollSeconds": 3, "maxConnectionsPerAddress": 2"#) { fixture, port, serve in
            let held = try Self.generations(fixture)
            let polls = try (0..<2).map { _ in try Self.longPoll(port: port, after: held, from: "127.0.0.5") }
            // The two polls are held before the third comes.
            #expect(await serve.hold(2), "the server never held both polls")
            let third = try Self.longPoll(port: port, after: held, from: "127.0.0.5")
            let refused = try await third.receiveResponse(timeout: .seconds(2))
            #expect(refused.status == 503 && refused.apiError == "too_many_connections", "\(refused.text)")
            // Another address is served meanwhile, and the held polls end with 204.
            // (A key generation the log never announces: answered at once.)
            #expect(try await Self.longPoll(port: port, after: (0, 1), from: "127.0.0.6").receiveResponse(timeout: .seconds(2)).status == 200)
            for poll in polls { #expect(try await poll.receiveResponse(timeout: .seconds(6)).status == 204) }
        }
    }

    /// Polls whose clients hung up keep their connections until their timeout (the server does
    /// not notice), so a quarter of the connections at most may wait: the rest stay for uploads
    /// and downloads.
    @Test(.timeLimit(.minutes(1))) func atMostAQuarterOfTheConnectionsWaitInLongPolls() async throws {
        try await Self.withServer(#", "longPollSeconds": 3, "maxConnections": 16"#) { fixture, port, serve in
            let held = try Self.generations(fixture)
            let polls = try (0..<4).map { try Self.longPoll(port: port, after: held, from: "127.0.0.\(20 + $0)") }
            // The four are held before the fifth comes.
            #expect(await serve.hold(4), "the server never held the four polls")
            let fifth = try Self.longPoll(port: port, after: held, from: "127.0.0.30")
            let refused = try await fifth.receiveResponse(timeout: .seconds(2))
            #expect(refused.status == 503 && refused.apiError == "long_polls_full", "\(refused.text)")
            for poll in polls { #expect(try await poll.receiveResponse(timeout: .seconds(6)).status == 204) }
        }
    }

    /// A stopping server ends its held polls rather than waiting for their timeout (a minute
    /// here): before, SIGTERM left `serve` running until the last poll timed out.
    @Test(.timeLimit(.minutes(1))) func aStoppingServerEndsItsHeldPolls() async throws {
        let fixture = try ServerFixture()
        defer { fixture.remove() }
        let metricsPort = try LoopbackPort.free()
        try fixture.writeConfiguration(extra: #", "longPollSeconds": 60"# + Self.metricsListener(metricsPort))
        let port = try LoopbackPort.free()
        let server = try await ServerCLI.serveWithOpenFileLimit(1_024, port: port, fixture: fixture)
        defer { if server.isRunning { kill(server.processIdentifier, SIGKILL) } }
        _ = await eventually(every: .milliseconds(50)) { FileManager.default.fileExists(atPath: fixture.paths.published.logCheckpointPath) }
        let poll = try Self.longPoll(port: port, after: try Self.generations(fixture))
        // Held when the server is told to stop (a poll that came after would find it stopping and
        // end at once, and the check would hold without testing it).
        #expect(await Self.hold(1, metricsPort: metricsPort), "the server never held the poll")
        let stopping = ContinuousClock.now
        server.terminate()
        _ = await eventually(timeout: .seconds(30), every: .milliseconds(50)) { !server.isRunning }
        #expect(!server.isRunning, "serve still runs 30 s after SIGTERM with a poll held")
        #expect(ContinuousClock.now - stopping < .seconds(10), "serve took \(ContinuousClock.now - stopping) to stop")
        _ = poll
    }
}
