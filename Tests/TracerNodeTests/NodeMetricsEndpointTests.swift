import Foundation
import Testing
import TestTiers
import TracerTestSupport
@testable import TracerNode
#if canImport(Glibc)
import Glibc
#endif

/// Issue 41, item 2: the node's metrics endpoint (`node.metrics_listen`): its setting, its HTTP
/// as a function of bytes, and the listener on a loopback socket against slow, silent, large and
/// too many clients.
@Suite(.tags(.unit)) struct NodeMetricsEndpointTests {
    static let exposition = "# HELP tracer_node_running 1 while tracer run runs.\n# TYPE tracer_node_running gauge\ntracer_node_running 1.0\n"

    static func answer(_ request: String, exposition: String? = Self.exposition) -> NodeMetricsHTTP.Answer? {
        NodeMetricsHTTP.answer(to: Array(request.utf8), exposition: { exposition.map { Array($0.utf8) } })
    }

    // MARK: The setting

    @Test func aPortAloneListensOnLoopbackAndAnIPv4HostIsKept() {
        #expect(NodeMetricsListenAddress(parsing: "9465") == .init(host: "127.0.0.1", port: 9465))
        #expect(NodeMetricsListenAddress(parsing: "localhost:9465") == .init(host: "127.0.0.1", port: 9465))
        #expect(NodeMetricsListenAddress(parsing: "0.0.0.0:9465") == .init(host: "0.0.0.0", port: 9465))
        #expect(NodeMetricsListenAddress(parsing: "10.1.2.3:65535")?.description == "10.1.2.3:65535")
        for bad in ["", "0", "65536", "-1", "+9465", "kiosk.example:9465", "::1:9465", "[::1]:9465", "127.0.0.1:", ":9465", "127.0.0.1:9465:1", "9465 ", "１２３"] {
            #expect(NodeMetricsListenAddress(parsing: bad) == nil, "\(bad) was accepted")
            #expect(NodeMetricsListenAddress.problem(bad)?.contains("127.0.0.1:9465") == true)
        }
    }

    @Test func theSettingIsOffByDefaultAndReadFromFlagEnvironmentAndFile() throws {
        let home = NSTemporaryDirectory() + "/tracer-endpoint-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: home, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: home) }
        func resolve(flags: [String: String] = [:], environment: [String: String] = [:], file: String? = nil) throws -> NodeMetricsListenAddress? {
            if let file { try file.write(toFile: home + "/tracer.toml", atomically: true, encoding: .utf8) }
            return try NodeSettings.resolve(
                configFlag: file.map { _ in home + "/tracer.toml" }, flags: flags, environment: environment.merging(["HOME": home]) { $1 }
            ).settings.metricsListen
        }
        #expect(try resolve() == nil)
        #expect(try resolve(flags: ["node.metrics_listen": "9465"]) == .init(port: 9465))
        #expect(try resolve(environment: ["TRACER_METRICS_LISTEN": "0.0.0.0:9466"]) == .init(host: "0.0.0.0", port: 9466))
        #expect(try resolve(file: "[node]\nmetrics_listen = \"127.0.0.1:9467\"\n") == .init(port: 9467))
        #expect(SettingRegistry.definition("node.metrics_listen")?.flag == "--metrics-listen")
        do {
            _ = try resolve(flags: ["node.metrics_listen": "kiosk:9465"])
            Issue.record("a host name was accepted")
        } catch {
            #expect(UserMessage.describe(error).contains("node.metrics_listen must be a port"), "\(UserMessage.describe(error))")
        }
    }

    // MARK: HTTP, as bytes

    @Test func getMetricsIsAnsweredWithTheExpositionAsItIs() throws {
        let answer = try #require(Self.answer("GET /metrics HTTP/1.1\r\nHost: 127.0.0.1:9465\r\nAccept: text/plain\r\n\r\n"))
        #expect(answer.status == 200)
        #expect(answer.body == Array(Self.exposition.utf8))
        let text = String(decoding: answer.bytes, as: UTF8.self)
        #expect(text.hasPrefix("HTTP/1.1 200 OK\r\n"))
        #expect(text.contains("\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\n"))
        #expect(text.contains("\r\nContent-Length: \(Self.exposition.utf8.count)\r\n"))
        #expect(text.contains("\r\nConnection: close\r\n"))
        #expect(text.hasSuffix("\r\n\r\n" + Self.exposition))
        // A query string (Prometheus's params) and bare line feeds are still a scrape.
        #expect(Self.answer("GET /metrics?format=text HTTP/1.0\n\n")?.status == 200)
        // HEAD says the length and sends no body.
        let head = try #require(Self.answer("HEAD /metrics HTTP/1.1\r\n\r\n"))
        #expect(head.status == 200)
        #expect(String(decoding: head.bytes, as: UTF8.self).hasSuffix("Content-Length: \(Self.exposition.utf8.count)\r\nConnection: close\r\n\r\n"))
    }

    @Test func everythingElseIsRefused() {
        #expect(Self.answer("GET / HTTP/1.1\r\n\r\n")?.status == 404)
        #expect(Self.answer("GET /metrics/ HTTP/1.1\r\n\r\n")?.status == 404)
        #expect(Self.answer("GET /status HTTP/1.1\r\n\r\n")?.status == 404)
        #expect(Self.answer("GET /Metrics HTTP/1.1\r\n\r\n")?.status == 404)
        let post = Self.answer("POST /metrics HTTP/1.1\r\nContent-Length: 0\r\n\r\n")
        #expect(post?.status == 405)
        #expect(post?.headers.contains("Allow: GET, HEAD") == true)
        for malformed in ["GET /metrics\r\n\r\n", "GET metrics HTTP/1.1\r\n\r\n", "GET /metrics HTTP/2\r\n\r\n", "\r\n\r\n", "GET  /metrics HTTP/1.1\r\n\r\n", "\u{16}\u{03}\u{01}\r\n\r\n"] {
            #expect(Self.answer(malformed)?.status == 400, "\(malformed.debugDescription)")
        }
        // Not written yet (the node has just started): try again shortly.
        let early = Self.answer("GET /metrics HTTP/1.1\r\n\r\n", exposition: nil)
        #expect(early?.status == 503)
        #expect(early?.headers.contains("Retry-After: 1") == true)
        // Never the exposition on another path.
        let otherPath = Self.answer("GET /metricsx HTTP/1.1\r\n\r\n")?.bytes ?? []
        #expect(!String(decoding: otherPath, as: UTF8.self).contains("tracer_node"))
    }

    @Test func anIncompleteHeadWaitsAndAnOverlongOneIsRefused() {
        #expect(Self.answer("") == nil)
        #expect(Self.answer("GET /metrics HTTP/1.1\r\n") == nil)
        #expect(Self.answer("GET /metrics HTTP/1.1\r\nHost: x\r\n") == nil)
        let long = Array(("GET /metrics HTTP/1.1\r\nX-Filler: " + String(repeating: "a", count: NodeMetricsHTTP.maximumRequestSize)).utf8)
        func answer(_ bytes: [UInt8]) -> NodeMetricsHTTP.Answer? { NodeMetricsHTTP.answer(to: bytes, exposition: { Array(Self.exposition.utf8) }) }
        #expect(answer(long)?.status == 431)
        #expect(answer(Array(long.prefix(NodeMetricsHTTP.maximumRequestSize)))?.status == 431)
        #expect(answer(Array(long.prefix(NodeMetricsHTTP.maximumRequestSize - 1))) == nil)
        // A head of exactly the limit is answered.
        #expect(answer(Array(long.prefix(NodeMetricsHTTP.maximumRequestSize - 4)) + Array("\r\n\r\n".utf8))?.status == 200)
    }

    // MARK: The listener

    /// A connection to the endpoint (RawConnection, whose reads end after 10 s without a byte, so
    /// that a test never hangs).
    static func connect(_ port: UInt16) throws -> RawConnection { try RawConnection(port: Int(port)) }

    static func scrape(_ port: UInt16) async throws -> String {
        let client = try connect(port)
        #expect(client.send("GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"))
        return await client.readToEnd().text
    }

    @Test(.timeLimit(.minutes(1))) func aScrapeGetsWhatWasLastPublished() async throws {
        let endpoint = try NodeMetricsEndpoint(listeningOn: .init(port: UInt16(LoopbackPort.free())))
        defer { endpoint.stop() }
        #expect(endpoint.address.host == "127.0.0.1")
        #expect(try await Self.scrape(endpoint.address.port).hasPrefix("HTTP/1.1 503 "))
        endpoint.publish(Self.exposition)
        let first = try await Self.scrape(endpoint.address.port)
        #expect(first.hasPrefix("HTTP/1.1 200 OK\r\n") && first.hasSuffix("\r\n\r\n" + Self.exposition), "\(first)")
        endpoint.publish("tracer_node_running 0.0\n")
        #expect(try await Self.scrape(endpoint.address.port).hasSuffix("\r\n\r\ntracer_node_running 0.0\n"))
    }

    /// Clients that send nothing, too slowly or too much are closed, while a scrape beside them
    /// is answered at once. (The timeout applies to the scrape beside them too: 3 s, so that a
    /// loaded machine answers it in time; a wedged endpoint still leaves it unanswered.)
    @Test(.timeLimit(.minutes(1))) func hostileClientsCannotWedgeIt() async throws {
        let timeout = Duration.seconds(3)
        let endpoint = try NodeMetricsEndpoint(listeningOn: .init(port: UInt16(LoopbackPort.free())), requestTimeout: timeout, maximumConnections: 3)
        defer { endpoint.stop() }
        endpoint.publish(Self.exposition)
        let port = endpoint.address.port

        // Silent, and dribbling a head that never ends: both closed at the timeout, unanswered.
        let silent = try Self.connect(port)
        let dribbling = try Self.connect(port)
        #expect(dribbling.send("GET /metrics HTTP/1.1\r\n"))
        let scrapeBeside = try await Self.scrape(port)
        #expect(scrapeBeside.hasPrefix("HTTP/1.1 200 OK"), "a scrape beside two idle clients: \(scrapeBeside)")
        // More of the head, too late or not: it never ends.
        _ = dribbling.send("X-A: 1\r\n")
        let silentEnd = await silent.readToEnd()
        #expect(silentEnd.text.isEmpty)
        // Under the connection's 10 s wait for a byte, so that an endpoint that never closes it fails.
        #expect(silentEnd.closedAfter < .seconds(9), "a silent client was held \(silentEnd.closedAfter)")
        let dribblingEnd = await dribbling.readToEnd()
        #expect(dribblingEnd.text.isEmpty, "\(dribblingEnd.text)")

        // Too large a head: 431, and the connection closed.
        let large = try Self.connect(port)
        _ = large.send("GET /metrics HTTP/1.1\r\nX-Filler: " + String(repeating: "a", count: 3 * NodeMetricsHTTP.maximumRequestSize))
        #expect(await large.readToEnd().text.hasPrefix("HTTP/1.1 431 "))
    }

    /// Past the connection limit a connection is closed at once, unanswered, while the held ones
    /// stay; once one of them goes, scrapes are answered again. (A long timeout, so that under a
    /// loaded machine no held connection times out during the test.)
    @Test(.timeLimit(.minutes(1))) func pastTheConnectionLimitAConnectionIsClosedAtOnce() async throws {
        let endpoint = try NodeMetricsEndpoint(listeningOn: .init(port: UInt16(LoopbackPort.free())), requestTimeout: .seconds(30), maximumConnections: 3)
        defer { endpoint.stop() }
        endpoint.publish(Self.exposition)
        let port = endpoint.address.port
        var held = try (0..<3).map { _ in try Self.connect(port) }
        // Each held connection sent half a head, so each was accepted and is waiting.
        for client in held { #expect(client.send("GET /metrics HTTP/1.1\r\n")) }
        try await Task.sleep(for: .milliseconds(200))
        let extra = try Self.connect(port)
        _ = extra.send("GET /metrics HTTP/1.1\r\n\r\n")
        let refused = await extra.readToEnd()
        #expect(refused.text.isEmpty && refused.closedAfter < .seconds(10), "past the limit: \(refused)")
        // One held connection finishes its request: answered, and its place is free again.
        #expect(held[0].send("\r\n"))
        #expect(await held[0].readToEnd().text.hasPrefix("HTTP/1.1 200 OK"))
        held.removeFirst()
        // Its place is given back when the endpoint has closed it: a scrape before that is
        // refused (closed at once), so one is tried until answered.
        let answered = await eventually(timeout: .seconds(10), every: .milliseconds(20)) {
            guard let client = try? Self.connect(port), client.send("GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n") else { return false }
            return await client.readToEnd().text.hasPrefix("HTTP/1.1 200 OK")
        }
        #expect(answered, "no scrape was answered after a held connection finished")
    }

    @Test(.timeLimit(.minutes(1))) func aPortInUseIsAClearErrorWithANextStep() throws {
        let first = try NodeMetricsEndpoint(listeningOn: .init(port: UInt16(LoopbackPort.free())))
        defer { first.stop() }
        do {
            let second = try NodeMetricsEndpoint(listeningOn: first.address)
            second.stop()
            Issue.record("a second endpoint listened on \(first.address)")
        } catch {
            #expect(error.errno == EADDRINUSE)
            let message = UserMessage.describe(error)
            #expect(message.contains("cannot listen on \(first.address) (node.metrics_listen)"), "\(message)")
            #expect(message.contains("another program already uses that port") && message.contains("ss -ltnp"), "\(message)")
        }
        let unavailable = NodeMetricsEndpointError(address: .init(host: "192.0.2.7", port: 9465), operation: "bind", errno: EADDRNOTAVAIL)
        #expect(UserMessage.describe(unavailable).contains("192.0.2.7 is not an address of this machine"))
        #expect(UserMessage.describe(NodeMetricsEndpointError(address: .init(port: 80), operation: "bind", errno: EACCES)).contains("from 1024 up"))
    }

    /// After `stop()` nothing listens any more.
    @Test(.timeLimit(.minutes(1))) func stopClosesTheListener() async throws {
        let endpoint = try NodeMetricsEndpoint(listeningOn: .init(port: UInt16(LoopbackPort.free())))
        let port = Int(endpoint.address.port)
        #expect(LoopbackPort.isListening(port))
        endpoint.stop()
        endpoint.stop()
        let closed = await eventually(timeout: .seconds(5), every: .milliseconds(20)) { !LoopbackPort.isListening(port) }
        #expect(closed)
    }
}
