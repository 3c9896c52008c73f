import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
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

/// Issue 25, the server's side: connection floods, bodies sent a byte at a time, HTTP/1.0,
/// CONNECT, ids still valid, key intervals no node uses, files that cannot be opened. The
/// floods run against a real `tracer-server serve` with a low open-file limit (as systemd's
/// default limit was the one that fell), on 127.0.0.0/8 only, bounded in count and time.
extension HostileClientTests {
    static let healthz = "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
    static let checkpoint = "GET /log/checkpoint HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
    static let issueCodeRequest =
        "POST /v1/codes HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer \(ServerFixture.authorityToken)\r\nContent-Length: 0\r\n\r\n"

    /// A fixture's `serve` with at most `openFiles` descriptors; `body` gets its port and process.
    static func withLimitedServer(
        openFiles: Int, configuration extra: String = "", _ body: (Int, Process) async throws -> Void
    ) async throws {
        let fixture = try ServerFixture()
        defer { fixture.remove() }
        try fixture.writeConfiguration(extra: extra)
        let port = try LoopbackPort.free()
        let server = try await ServerCLI.serveWithOpenFileLimit(openFiles, port: port, fixture: fixture)
        defer {
            server.terminate()
            server.waitUntilExit()
        }
        // The first publication (at start) writes the checkpoint the tests ask for.
        _ = await eventually(every: .milliseconds(50)) { FileManager.default.fileExists(atPath: fixture.paths.published.logCheckpointPath) }
        try await body(port, server)
    }

    /// What a client away from the flood gets: `/healthz`, the checkpoint and an upload code, each
    /// within `timeout`.
    static func expectServedFromElsewhere(port: Int, source: String, timeout: Duration = .seconds(3)) async throws {
        for (request, expected) in [(healthz, 200), (checkpoint, 200), (issueCodeRequest, 201)] {
            let connection = try RawConnection(port: port, from: source)
            connection.send(request)
            let start = ContinuousClock.now
            let response = try await connection.receiveResponse(timeout: timeout)
            #expect(response.status == expected, "\(request.prefix(20)) from \(source): \(response.text.prefix(300))")
            #expect(ContinuousClock.now - start < timeout)
        }
    }

    /// Opens `count` connections from `source` and sends `request` on each; returns those the
    /// server kept and answered 200, and how many it refused (503 or closed).
    static func flood(port: Int, from source: String, count: Int, request: String = healthz) async throws -> (kept: [RawConnection], refused: Int) {
        var connections: [RawConnection] = []
        for _ in 0..<count {
            // A refused connect (the backlog full) is a refusal too.
            guard let connection = try? RawConnection(port: port, from: source) else { continue }
            connection.send(request)
            connections.append(connection)
        }
        var kept: [RawConnection] = []
        var refused = count - connections.count
        for connection in connections {
            let response = try? await connection.receiveResponse(timeout: .seconds(5))
            if response?.status == 200 {
                kept.append(connection)
            } else {
                #expect(response == nil || response?.status == 503, "\(response?.text.prefix(200) ?? "")")
                if let response { #expect(response.apiError == "too_many_connections") }
                refused += 1
            }
        }
        return (kept, refused)
    }

    // MARK: 7. Connection floods (issue 25, item 2)

    @Test(.timeLimit(.minutes(1))) func aFloodFromOneAddressHoldsOnlyItsShareWhileOthersAreServed() async throws {
        // 256 descriptors: 192 connections at most, 12 from one address (the derived defaults).
        try await Self.withLimitedServer(openFiles: 256) { port, server in
            let (kept, refused) = try await Self.flood(port: port, from: "127.0.0.2", count: 400)
            #expect(kept.count == 12, "the flood kept \(kept.count) connections")
            #expect(refused == 400 - kept.count)
            try await Self.expectServedFromElsewhere(port: port, source: "127.0.0.1")
            // The flood's kept connections still work: it was shed, not broken.
            kept[0].send(Self.healthz)
            #expect(try await kept[0].receiveResponse().status == 200)
            #expect(server.isRunning)
        }
    }

    @Test(.timeLimit(.minutes(1))) func aFloodFromFiftyAddressesIsShedWhileOthersAreServed() async throws {
        try await Self.withLimitedServer(openFiles: 256) { port, server in
            var kept: [RawConnection] = []
            // 50 clients, 10 connections each: 500 against room for 192. Every one gets an
            // answer and stays open, idle, as a keep-alive client's would.
            for client in 0..<50 {
                kept += try await Self.flood(port: port, from: "127.0.1.\(client + 1)", count: 10).kept
            }
            // The server closed idle connections to make room: no more than its limit are open.
            var open = 0
            for connection in kept where !(try await connection.waitForClose(within: .milliseconds(1))) { open += 1 }
            #expect(open <= 192, "\(open) flood connections still open")
            try await Self.expectServedFromElsewhere(port: port, source: "127.0.0.1")
            #expect(server.isRunning)
        }
    }

    @Test func serveRefusesAConnectionLimitThatLeavesNoReserve() async throws {
        let fixture = try ServerFixture()
        defer { fixture.remove() }
        try fixture.writeConfiguration(extra: #", "maxConnections": 250"#)
        let port = try LoopbackPort.free()
        let errors = Pipe()
        do {
            let server = try await ServerCLI.serveWithOpenFileLimit(256, port: port, fixture: fixture, stderr: errors)
            server.terminate()
            server.waitUntilExit()
            Issue.record("serve started with maxConnections 250 and 256 descriptors")
        } catch {
            // It exited before listening, as it should.
        }
        let log = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        #expect(log.contains("maxConnections is 250") && log.contains("LimitNOFILE"), "\(log)")
    }

    // MARK: 8. Bodies the server does not read through (issue 25, item 5)

    /// `count` one-byte chunks after `head` (whose blank line is left to this), as fast as the
    /// server takes them; returns the server's CPU seconds spent meanwhile and its answer.
    static func oneByteChunks(port: Int, server: Process, head: String, count: Int) async throws -> (cpu: Double, response: RawConnection.Response?) {
        let before = ProcessFigures.cpuSeconds(server.processIdentifier)
        let connection = try RawConnection(port: port)
        connection.send(head + "Transfer-Encoding: chunked\r\n\r\n")
        let chunks = String(repeating: "1\r\na\r\n", count: count) + "0\r\n\r\n"
        let sender = Task.detached { connection.send(chunks) }
        let response = try? await connection.receiveResponse(timeout: .seconds(20))
        _ = await sender.value
        _ = try await connection.waitForClose(within: .seconds(5))
        // Pacing a measurement: the kernel's CPU counts for the process lag behind its work a little.
        try await Task.sleep(for: .milliseconds(200))
        return (ProcessFigures.cpuSeconds(server.processIdentifier) - before, response)
    }

    @Test(.timeLimit(.minutes(1))) func oneByteChunksCostTheServerLittleCPU() async throws {
        try await Self.withLimitedServer(openFiles: 1_024) { port, server in
            // An authority's upload in 300,000 one-byte chunks (1.8 MB on the wire): refused past
            // 4,096 parts, as a failed attempt.
            let upload = try await Self.oneByteChunks(port: port, server: server, head: Self.authorityUploadHead, count: 300_000)
            #expect(upload.response?.status == 413, "\(upload.response?.text.prefix(300) ?? "no answer")")
            #expect(upload.response?.apiError == "too_many_chunks")
            #expect(upload.cpu < 1.0, "the server spent \(upload.cpu) s of CPU on one upload")
            // Unauthenticated (401) and on a route that takes no body: answered, not read through.
            let refused = try await Self.oneByteChunks(
                port: port, server: server, head: "POST /v1/histories HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n",
                count: 300_000)
            #expect(refused.response?.status == 401)
            #expect(refused.response?.header("connection") == "close")
            #expect(refused.cpu < 1.0, "the server spent \(refused.cpu) s of CPU on a refused request")
            let healthz = try await Self.oneByteChunks(
                port: port, server: server, head: "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n", count: 300_000)
            #expect(healthz.response?.status == 200)
            #expect(healthz.cpu < 1.0, "the server spent \(healthz.cpu) s of CPU on /healthz with a body")
        }
    }

    @Test func aRefusedRequestsBodyIsNotReadAndTheConnectionCloses() async throws {
        let fixture = try ServerFixture()
        defer { fixture.remove() }
        try await fixture.withServer { client in
            // A body announced as 10 MB, of which 10 bytes come: the 401 comes at once, and the
            // server closes instead of waiting for the rest.
            let (connection, response) = try await Self.exchange(
                client, "POST /v1/histories HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 10000000\r\n\r\n0123456789")
            #expect(response.status == 401)
            #expect(response.header("connection") == "close")
            #expect(try await connection.waitForClose(within: .seconds(3)))
        }
    }

    // MARK: 9. HTTP/1.0 and CONNECT (issue 25, item 6)

    @Test func anHTTP10RequestWithoutKeepAliveGetsConnectionCloseAndIsClosed() async throws {
        let fixture = try ServerFixture()
        defer { fixture.remove() }
        try await fixture.withServer { client in
            let (connection, response) = try await Self.exchange(client, "GET /healthz HTTP/1.0\r\n\r\n")
            #expect(response.status == 200)
            #expect(response.header("connection") == "close")
            #expect(try await connection.waitForClose(within: .seconds(3)))
            // With keep-alive it stays open for the next request.
            let (kept, again) = try await Self.exchange(client, "GET /healthz HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
            #expect(again.status == 200)
            kept.send(Self.healthz)
            #expect(try await kept.receiveResponse().status == 200)
        }
    }

    @Test func connectGets501WithABodyAndALength() async throws {
        let fixture = try ServerFixture()
        defer { fixture.remove() }
        try await fixture.withServer { client in
            let (connection, response) = try await Self.exchange(
                client, "CONNECT 127.0.0.1:443 HTTP/1.1\r\nHost: 127.0.0.1:443\r\n\r\n")
            #expect(response.status == 501, "\(response.text)")
            #expect(response.apiError == "method_not_implemented")
            #expect(response.header("content-length").flatMap(Int.init) == response.body.utf8.count)
            #expect(try await connection.waitForClose(within: .seconds(3)))
        }
    }

    // MARK: 10. Published files that cannot be opened (issue 25, items 1 and 2)

    @Test func aPublishedFileThatCannotBeOpenedIs503NotNotFound() async throws {
        let fixture = try ServerFixture()
        defer { fixture.remove() }
        // A socket where the checkpoint belongs: open() fails with ENXIO, not ENOENT. The file is
        // not absent, so the answer must not tell a node or a CDN that it is.
        let path = fixture.paths.published.logCheckpointPath
        try FileManager.default.createDirectory(atPath: fixture.paths.published.logPath, withIntermediateDirectories: true)
        unlink(path)
        let listener = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(listener) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (offset, byte) in path.utf8.prefix(raw.count - 1).enumerated() { raw[offset] = byte }
        }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) == 0 }
        }
        try #require(bound, "cannot bind a socket at \(path)")
        try await fixture.withServer { client in
            let response = try await client.send("/log/checkpoint", .get)
            #expect(response.status == .serviceUnavailable)
            #expect(response.headers[.retryAfter] == "5")
            #expect(response.apiError?.error == "file_unavailable")
            #expect(try await client.send("/log/tile/0/000", .get).status == .notFound)
            // The retired files have no route at all.
            #expect(try await client.send("/batches/1.tplb", .get).status == .notFound)
        }
    }

    // MARK: 11. Ids still valid wait (issue 25, item 4)

    @Test func idsStillValidAreAcceptedButPublishedOnlyOnceExpiredPlusSkew() async throws {
        let fixture = try ServerFixture()
        defer { fixture.remove() }
        let skew = fixture.configuration.clockSkewSeconds
        let now = Self.now
        // Valid for another 11 minutes; and one starting in 5 minutes, lasting an hour.
        var entries = Histories.entries(count: 4, endingAt: now + 660, seed: 21)
        entries.append(SubmittedEntry(id: UserID.random().hex, validFrom: now + 300, validUntil: now + 3_900))
        let past = Histories.entries(count: 4, endingAt: now - 900, seed: 22)
        let current = entries
        try await fixture.withServer { client in
            for history in [past, current] {
                let response = try await client.send("/v1/histories", .post, headers: .authority(), body: Histories.body(history))
                #expect(response.status == .created)
            }
        }
        let publisher = fixture.makePublisher(idPublicationDelaySeconds: skew)
        let first = try await publisher.publish()
        #expect(first.newBatch?.idCount == past.count, "only the expired history is published")
        #expect(first.waitingIDs == entries.count)
        // A history is published whole: the scheduler wakes when its last id is due.
        #expect(first.nextDueAt == now + 3_900 + skew)
        fixture.clock.advance(by: 660 + skew - 1)
        let early = try await publisher.publish()
        #expect(early.newBatch == nil, "an id was published less than the skew allowance after it expired")
        fixture.clock.advance(by: 3_900 - 660 + 1)
        let due = try await publisher.publish()
        #expect(due.newBatch?.idCount == entries.count)
        #expect(due.waitingIDs == 0)
        #expect(due.nextDueAt == nil)
        let published = try fixture.verifiedBatches().flatMap(\.entries)
        #expect(published.allSatisfy { $0.validUntil + skew <= fixture.clock.now() })
        #expect(Set(published.map(\.id.hex)) == Set((past + entries).map(\.id)))
    }
}

