import CurlHTTP
import Foundation
@testable import PositiveListServer
@testable import ServerApplication
import Testing
import TestTiers
import TracerCore
import ServerTestSupport
import TracerTestSupport

/// Issue 41, the server's metrics: a real `tracer-server serve` with its metrics listener counts
/// known actions (an upload, refusals, a publication), keeps `/metrics` off the API's address,
/// is scraped by a real Prometheus whose query API gives the values back, passes `promtool check
/// metrics`, and never puts a value a client chose into a label.
@Suite(.tags(.integration)) struct MetricsTests {
    /// A `serve` process with `"metrics": {"listen": ...}` on a port of its own, once both
    /// listeners answer and the start's publication is counted.
    final class MetricsServerProcess {
        let fixture: ServerFixture
        let apiPort: Int
        let metricsPort: Int
        private let process: Process

        /// `fixture` (a new one if nil) with `configuration` added to its config.json, such as
        /// a PostgreSQL `database` section.
        init(fixture: ServerFixture? = nil, configuration: String = "") async throws {
            self.fixture = try fixture ?? ServerFixture()
            apiPort = try LoopbackPort.free()
            metricsPort = try LoopbackPort.free()
            try self.fixture.writeConfiguration(extra: configuration + #", "metrics": {"listen": "127.0.0.1:\#(metricsPort)"}"#)
            process = try ServerCLI.start(["serve", "--bind", "127.0.0.1:\(apiPort)"], fixture: self.fixture, stderr: nil)
            do {
                try await LoopbackPort.waitUntilListening(apiPort, orExit: process)
                try await LoopbackPort.waitUntilListening(metricsPort, orExit: process)
                let published = await eventually(timeout: .seconds(30), every: .milliseconds(50)) {
                    (try? await self.scrape().value("tracer_server_publication_last_success_timestamp_seconds")).map { $0 > 0 } ?? false
                }
                guard published else { throw HarnessFailure(description: "serve never counted its first publication") }
            } catch {
                stop()
                throw error
            }
        }

        deinit { stop() }

        func stop() {
            if process.isRunning {
                process.terminate()
                process.waitUntilExit()
            }
            fixture.remove()
        }

        func scrape() async throws -> Exposition { try await Exposition.scrape(port: metricsPort) }

        static func get(_ path: String, port: Int, method: String = "GET") async throws -> RawConnection.Response {
            let connection = try RawConnection(port: port)
            connection.send("\(method) \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
            return try await connection.receiveResponse()
        }

        /// An id history (8 ids past their validity, publishable at once) with `credential`'s
        /// header: `Authorization: Bearer ...` or `Upload-Code: ...`.
        func upload(seed: UInt64, credential: String) async throws -> RawConnection.Response {
            let now = UnixSeconds(Date().timeIntervalSince1970)
            let body = String(decoding: Histories.body(Histories.entries(count: 8, endingAt: now - 600, seed: seed)).readableBytesView, as: UTF8.self)
            let connection = try RawConnection(port: apiPort)
            connection.send(
                "POST /v1/histories HTTP/1.1\r\nHost: 127.0.0.1\r\n\(credential)\r\n"
                    + "Content-Type: application/json\r\nContent-Length: \(body.utf8.count)\r\nConnection: close\r\n\r\n" + body)
            return try await connection.receiveResponse()
        }

        func issueCode() async throws -> String {
            let connection = try RawConnection(port: apiPort)
            connection.send(
                "POST /v1/codes HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer \(ServerFixture.authorityToken)\r\n"
                    + "Content-Length: 0\r\nConnection: close\r\n\r\n")
            let response = try await connection.receiveResponse()
            let object = try JSONSerialization.jsonObject(with: Data(response.body.utf8)) as? [String: Any]
            return try #require(object?["code"] as? String, "POST /v1/codes: \(response.text)")
        }
    }

    /// The samples of a text exposition: name, labels, value.
    // MARK: (a) Counted actions

    @Test(.timeLimit(.minutes(2))) func anUploadRefusalsAndAPublicationAreCounted() async throws {
        let server = try await MetricsServerProcess()
        defer { server.stop() }
        let before = try await server.scrape()
        let treeSize = try #require(before.value("tracer_server_publication_log_tree_size"))
        #expect(before.value("tracer_server_uploads_total", ["kind": "ids", "outcome": "stored"]) == 0)
        #expect(before.value("tracer_server_store_up") == 1)

        #expect(try await server.upload(seed: 1, credential: "Authorization: Bearer \(ServerFixture.authorityToken)").status == 201)
        #expect(try await server.upload(seed: 2, credential: "Authorization: Bearer not-the-token-0123456789abcdef").status == 401)
        #expect(try await server.upload(seed: 3, credential: "Upload-Code: ABCD-EFGH-JKMN").status == 401)
        let code = try await server.issueCode()
        #expect(try await server.upload(seed: 4, credential: "Upload-Code: \(code)").status == 201)
        #expect(try await server.upload(seed: 5, credential: "Upload-Code: \(code)").status == 401)

        let after = try await server.scrape()
        #expect(after.value("tracer_server_uploads_total", ["kind": "ids", "outcome": "stored"]) == 2, "\(after.text)")
        #expect(after.value("tracer_server_uploads_total", ["kind": "ids", "outcome": "invalid_token"]) == 1)
        #expect(after.value("tracer_server_uploads_total", ["kind": "ids", "outcome": "invalid_code"]) == 1)
        #expect(after.value("tracer_server_uploads_total", ["kind": "ids", "outcome": "used_code"]) == 1)
        #expect(after.value("tracer_server_upload_codes_total", ["event": "issued"]) == 1)
        #expect(after.value("tracer_server_upload_codes_total", ["event": "used"]) == 1)
        // Sampled from the store at the scrape (a used code is neither open nor expired unused).
        #expect(after.value("tracer_server_upload_codes_open") == 0 && after.value("tracer_server_upload_codes_expired_unused") == 0, "\(after.text)")
        #expect(after.value("tracer_server_http_requests_total", ["route": "/v1/histories", "method": "POST", "status": "201"]) == 2)
        #expect(after.value("tracer_server_http_requests_total", ["route": "/v1/histories", "method": "POST", "status": "401"]) == 3)
        #expect(after.value("tracer_server_http_requests_total", ["route": "/v1/codes", "method": "POST", "status": "201"]) == 1)
        #expect(after.value("tracer_server_http_request_duration_seconds_count", ["route": "/v1/histories", "method": "POST"]) == 5)

        // The first upload asks for a publication at once (none cut a batch before): a batch of
        // its 8 ids, a longer log, and the second's 8 in the next batch or still pending.
        var published: Exposition?
        let counted = await eventually(timeout: .seconds(30), every: .milliseconds(100)) {
            published = try? await server.scrape()
            return (published?.value("tracer_server_publication_log_tree_size") ?? 0) > treeSize
                && (published?.value("tracer_server_publication_live_batches", ["kind": "ids"]) ?? 0) >= 1
        }
        #expect(counted, "no publication counted: \(published?.text ?? "")")
        #expect((published?.value("tracer_server_publication_duration_seconds_count") ?? 0) >= 2)
        #expect(published?.value("tracer_server_publication_failures_total") == 0)
        #expect((published?.value("tracer_server_publication_log_tree_size") ?? 0) >= 1, "the log holds the batch")
        let lastSuccess = published?.value("tracer_server_publication_last_success_timestamp_seconds") ?? 0
        #expect(abs(lastSuccess - Date().timeIntervalSince1970) < 120, "last publication at \(lastSuccess)")

        // Only the metrics listener answers /metrics; the public API's address knows no such path.
        let onAPI = try await MetricsServerProcess.get("/metrics", port: server.apiPort)
        #expect(onAPI.status == 404 && onAPI.apiError == "not_found", "\(onAPI.text)")
        #expect(!onAPI.body.contains("tracer_server_"))
        // And the metrics listener answers nothing else.
        #expect(try await MetricsServerProcess.get("/healthz", port: server.metricsPort).status == 404)
    }

    @Test(.timeLimit(.minutes(1))) func serveRefusesMetricsOnTheAPIAddress() throws {
        let fixture = try ServerFixture()
        defer { fixture.remove() }
        let port = try LoopbackPort.free()
        try fixture.writeConfiguration(extra: #", "metrics": {"listen": "127.0.0.1:\#(port)"}"#)
        // Bounded: a serve that started after all would otherwise run until the time limit,
        // which cannot end a blocked synchronous wait.
        let result = try ServerCLI.run(["serve", "--bind", "127.0.0.1:\(port)"], fixture: fixture, timeout: .seconds(30))
        #expect(result.exitCode != 0 && result.output.contains("metrics.listen (127.0.0.1:\(port)) is the address of 127.0.0.1:\(port)"), "\(result)")
        let wildcard = try ServerCLI.run(["serve", "--bind", "0.0.0.0:\(port)"], fixture: fixture, timeout: .seconds(30))
        #expect(wildcard.exitCode != 0 && wildcard.output.contains("metrics.listen"), "\(wildcard)")
    }

    @Test(.timeLimit(.minutes(1))) func serveSaysWhenTheMetricsPortIsInUse() throws {
        let fixture = try ServerFixture()
        defer { fixture.remove() }
        // Another program listening on the metrics port.
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(listener) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
        }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let named = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(listener, $0, &length) == 0 }
        }
        try #require(bound && named && listen(listener, 1) == 0, "cannot listen: errno \(errno)")
        let port = Int(UInt16(bigEndian: address.sin_port))
        try fixture.writeConfiguration(extra: #", "metrics": {"listen": "127.0.0.1:\#(port)"}"#)
        let result = try ServerCLI.run(["serve", "--bind", "127.0.0.1:\(try LoopbackPort.free())"], fixture: fixture, timeout: .seconds(30))
        #expect(result.exitCode != 0 && result.output.contains("metrics.listen 127.0.0.1:\(port) is in use"), "\(result)")
    }

    @Test(.tags(.unit)) func theSectionIsReadAndCheckedAsTheConsoleIs() throws {
        func parse(_ section: String) throws(ConfigurationError) -> ServerConfiguration {
            try ServerConfiguration.parse(
                Data(#"{"authorities": [{"name": "A", "token": "0123456789abcdef0123456789"}]\#(section)}"#.utf8), path: "config.json")
        }
        #expect(try parse("").metrics == nil)
        let defaults = try #require(try parse(#", "metrics": {}"#).metrics)
        #expect(defaults.enabled && defaults.host == "127.0.0.1" && defaults.port == 9_464)
        let given = try #require(try parse(#", "metrics": {"listen": "[::1]:9100"}"#).metrics)
        #expect(given.host == "::1" && given.port == 9_100)
        #expect(try parse(#", "metrics": {"enabled": false, "listen": "127.0.0.1:9100"}"#).metrics?.enabled == false)
        #expect(throws: ConfigurationError.unknownSetting(path: "config.json", name: "metrics.port")) { try parse(#", "metrics": {"port": 9100}"#) }
        #expect(throws: ConfigurationError.invalidValue(path: "config.json", detail: "metrics.listen must be HOST:PORT, for example 127.0.0.1:9464")) {
            try parse(#", "metrics": {"listen": "9100"}"#)
        }
        #expect(MetricsSettings().overlaps(host: "0.0.0.0", port: 9_464) && !MetricsSettings().overlaps(host: "127.0.0.1", port: 8_080))
    }

    // MARK: (b) A real Prometheus

    /// Prometheus and promtool, as every tier's tools are required: in CI (`CI=true`) their
    /// absence fails the test, elsewhere it skips it, saying how to install them (scripts/setup does).
    static func requireTools() throws {
        try RequiredTool.prometheus.require()
    }

    @Test(.timeLimit(.minutes(3))) func aRealPrometheusScrapesTheServerAndGivesTheValuesBack() async throws {
        try Self.requireTools()
        let server = try await MetricsServerProcess()
        defer { server.stop() }
        let prometheus = try await PrometheusProcess(scraping: server.metricsPort)
        defer { prometheus.stop() }

        // Scraped and healthy before anything happened.
        let up = await eventually(timeout: .seconds(60), every: .milliseconds(250)) { await prometheus.value(#"up{job="tracer-server"}"#) == 1 }
        #expect(up, "Prometheus never scraped the server: \(prometheus.log.suffix(2_000))")
        let stored = #"tracer_server_uploads_total{job="tracer-server",kind="ids",outcome="stored"}"#
        // Every read of Prometheus goes through `eventually`: on a loaded machine a query may
        // come before the scrape that holds its answer.
        let zero = await eventually(timeout: .seconds(30), every: .milliseconds(250)) { await prometheus.value(stored) == 0 }
        #expect(zero, "\(stored) is not 0 before the upload")

        #expect(try await server.upload(seed: 1, credential: "Authorization: Bearer \(ServerFixture.authorityToken)").status == 201)
        #expect(try await server.upload(seed: 2, credential: "Upload-Code: ABCD-EFGH-JKMN").status == 401)

        for (query, expected) in [
            (stored, 1.0),
            (#"tracer_server_uploads_total{kind="ids",outcome="invalid_code"}"#, 1),
            (#"tracer_server_http_requests_total{route="/v1/histories",method="POST",status="201"}"#, 1),
            (#"tracer_server_publication_live_batches{kind="ids"}"#, 1),
            (#"tracer_server_store_up"#, 1),
        ] {
            var last: Double?
            let seen = await eventually(timeout: .seconds(60), every: .milliseconds(250)) {
                last = await prometheus.value(query)
                return last == expected
            }
            #expect(seen, "\(query) is \(last.map { "\($0)" } ?? "absent") in Prometheus, not \(expected)")
            if query == stored {
                // A rate over the scrapes, as an alert would ask, at once (the 0 sampled before
                // the upload is still in its window; 5 minutes outlasts the test's time limit,
                // however slow the waits after this are).
                var increase: Double?
                let rises = await eventually(timeout: .seconds(30), every: .milliseconds(250)) {
                    increase = await prometheus.value(#"sum(increase(tracer_server_uploads_total{outcome="stored"}[5m]))"#)
                    return (increase ?? 0) > 0
                }
                #expect(rises, "increase() sees no upload: \(increase.map { "\($0)" } ?? "absent")")
            }
        }

        // promtool, from the same package, finds nothing wrong with the exposition.
        let text = try await server.scrape().text
        let checked = try PrometheusTools.checkMetrics(text)
        #expect(checked.exitCode == 0 && checked.output.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty, "promtool check metrics: \(checked)")
    }

    // MARK: (c) Cardinality

    /// What each label may hold: small sets fixed in the code, never a value a client chose.
    static func allowedValues(_ label: String) -> ((String) -> Bool)? {
        switch label {
        case "kind": return { ["ids", "keys"].contains($0) }
        case "outcome":
            return { ServerMetrics.uploadOutcomes.contains($0) || ["accepted", "refused", "limited", "failed"].contains($0) }
        case "event": return { ["issued", "used"].contains($0) }
        case "reason": return { ["address_at_limit", "server_full", "idle_evicted"].contains($0) }
        case "state": return { ["idle", "busy"].contains($0) }
        case "method": return { ServerMetrics.httpMethods.contains($0) || $0 == "other" }
        case "status": return { $0.wholeMatch(of: #/[1-5][0-9][0-9]/#) != nil }
        case "le":
            let buckets = Set((ServerMetrics.httpBuckets + ServerMetrics.publicationBuckets).map {
                Double($0.components.seconds) + Double($0.components.attoseconds) / 1e18
            })
            return { $0 == "+Inf" || Double($0).map(buckets.contains) == true }
        case "route":
            // The router's patterns: literal words, {parameter}s and **, never a path's values.
            return { value in
                value == ServerMetrics.unmatchedRoute
                    || value.split(separator: "/").allSatisfy { $0.wholeMatch(of: #/[a-z0-9.\-]*[a-z.\-][a-z0-9.\-]*|\{[a-z]+\}|\*\*/#) != nil }
                    && value.wholeMatch(of: #/.*[0-9a-f]{6,}.*/#) == nil
            }
        default: return nil
        }
    }

    @Test(.timeLimit(.minutes(2))) func noLabelTakesAValueAClientChose() async throws {
        let server = try await MetricsServerProcess()
        defer { server.stop() }
        let code = try await server.issueCode()
        let junk = UUID().uuidString.lowercased()
        // Paths with ids, hex and junk on every route and off them, odd methods, every credential.
        for path in [
            "/batches/\(junk).tpl", "/batches/0123456789abcdef0123", "/keys/\(junk)", "/log/tile/0/x001/\(junk)", "/log/checkpoint",
            "/index.tpl", "/healthz", "/v1/generation?after=\(junk)", "/\(junk)", "/v1/\(junk)/histories", "/v1/codes/\(code)",
        ] {
            for method in ["GET", "HEAD", "DELETE", "PROPFIND", "PURGE", "BREW"] {
                _ = try? await MetricsServerProcess.get(path, port: server.apiPort, method: method)
            }
        }
        for credential in [
            "Authorization: Bearer \(junk)", "Upload-Code: \(code)", "Upload-Code: \(junk)", "Upload-Code: ABCD-EFGH-JKMN",
            "Authorization: Bearer \(ServerFixture.authorityToken)", "Authorization: \(junk)",
        ] {
            _ = try await server.upload(seed: 7, credential: credential)
        }
        let exposition = try await server.scrape()
        var seen: [String: Set<String>] = [:]
        for sample in exposition.samples {
            #expect(sample.name.hasPrefix("tracer_server_"), "\(sample.name) has not the server's prefix")
            for (label, value) in sample.labels {
                seen[label, default: []].insert(value)
                let allowed = try #require(Self.allowedValues(label), "\(sample.name) has a label \(label) no fixed set describes")
                #expect(allowed(value), "\(sample.name){\(label)=\"\(value)\"} is not one of its label's fixed values")
                for secret in [junk, code, ServerFixture.authorityToken, "127.0.0.1", "Health Authority"] {
                    #expect(!value.contains(secret), "\(sample.name){\(label)=\"\(value)\"} holds what a client sent")
                }
            }
        }
        // Bounded by the code, not by the traffic: the router's own patterns (those of this
        // configuration, which only adds the metrics listener) and "unmatched", nothing else.
        let patterns = PositiveListHTTPServer.routePatterns(server.fixture.components).union([ServerMetrics.unmatchedRoute])
        #expect(patterns.count > 5, "patterns: \(patterns)")
        #expect((seen["route"] ?? []).isSubset(of: patterns), "routes: \(seen["route"] ?? []), the router's: \(patterns)")
        #expect(seen["route"]?.contains(ServerMetrics.unmatchedRoute) == true && seen["method"]?.contains("other") == true)
        #expect(Set(exposition.samples.filter { $0.name == "tracer_server_http_requests_total" }.map(\.labels)).count <= 80)
    }
}
