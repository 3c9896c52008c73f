import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import PositiveListServer
import ServerStorage
import Testing
import TestTiers
import ServerTestSupport
import TracerTestSupport

/// What a hostile client on 127.0.0.1 tried (issue 14), each answered as docs/openapi.yaml
/// says: a 4xx with a JSON error, no error in the log, nothing spent or served that should not be.
@Suite(.tags(.integration)) struct HostileClientTests {
    static let now = ServerFixture.start

    static func issueCode(_ client: any TestClientProtocol) async throws -> String {
        let response = try await client.send("/v1/codes", .post, headers: .authority())
        return try #require(response.json["code"] as? String)
    }

    /// An upload request as raw HTTP/1.1.
    static func upload(code: String, body: String = #"{"ids": []}"#) -> String {
        "POST /v1/histories HTTP/1.1\r\nHost: 127.0.0.1\r\nUpload-Code: \(code)\r\nContent-Type: application/json\r\n"
            + "Content-Length: \(body.utf8.count)\r\n\r\n\(body)"
    }

    /// The head of an authority's upload as raw HTTP/1.1, without its framing headers and the
    /// blank line: a test adds those as it needs them.
    static let authorityUploadHead =
        "POST /v1/histories HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer \(ServerFixture.authorityToken)\r\n"
        + "Content-Type: application/json\r\n"

    /// Sends `text` on a new connection and reads one response.
    static func exchange(_ client: any TestClientProtocol, _ text: String) async throws -> (RawConnection, RawConnection.Response) {
        let connection = try RawConnection(port: try #require(client.port))
        connection.send(text)
        return (connection, try await connection.receiveResponse())
    }

    static func errorLines(_ fixture: ServerFixture) -> [String] {
        fixture.logs.all.filter { $0.hasPrefix("error ") || $0.hasPrefix("critical ") }
    }

    // MARK: 1. The failed-attempt limit under concurrency

    @Test func wrongCodesReleasedAtOneInstantGetAtMostTheLimitOfCredentialChecks() async throws {
        let fixture = try ServerFixture()
        defer { fixture.remove() }
        let limit = fixture.configuration.failedAttemptsPerMinute
        try await fixture.withServer { client in
            let port = try #require(client.port)
            let requests = (0..<200).map { _ in Self.upload(code: UploadCode.generate().display) }
            let connections = try requests.map { _ in try RawConnection(port: port) }
            // Each head but its last byte first, then the last bytes together: the server gets
            // 200 whole requests within a moment, as if released at the same instant. Pacing:
            // the 300 ms let the server read the partial heads; heads it read late only make the
            // release less sudden, never the limit's check pass.
            let split = requests.map { request in request.range(of: "\r\n\r\n")!.upperBound }
            for (connection, (request, end)) in zip(connections, zip(requests, split)) {
                connection.send(String(request[..<request.index(before: end)]))
            }
            try await Task.sleep(for: .milliseconds(300))
            for (connection, (request, end)) in zip(connections, zip(requests, split)) {
                connection.send(String(request[request.index(before: end)...]))
            }
            var statuses: [Int] = []
            for connection in connections {
                statuses.append(try await connection.receiveResponse().status)
            }
            let checked = statuses.filter { $0 == 401 }.count
            #expect(checked >= 1 && checked <= limit, "\(checked) credential checks answered 401; the limit is \(limit)")
            #expect(statuses.filter { $0 == 429 }.count == 200 - checked, "\(Dictionary(grouping: statuses) { $0 }.mapValues(\.count))")
        }
    }

    @Test func concurrentValidRequestsFromOneAddressAreNotRefused() async throws {
        // Budget held by checks in flight makes later checks wait, not fail: an authority
        // issuing many codes at once is not turned away.
        let fixture = try ServerFixture { $0.failedAttemptsPerMinute = 2 }
        defer { fixture.remove() }
        try await fixture.withServer { client in
            let port = try #require(client.port)
            let request = "POST /v1/codes HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer \(ServerFixture.authorityToken)\r\nContent-Length: 0\r\n\r\n"
            let connections = try (0..<20).map { _ in try RawConnection(port: port) }
            for connection in connections { connection.send(request) }
            for connection in connections {
                #expect(try await connection.receiveResponse().status == 201)
            }
        }
        #expect(try await fixture.store.summary(now: Self.now).openUploadCodes == 20)
    }

    // MARK: 2. Read and idle timeout

    @Test func connectionsSendingNothingOrTheirHeadByteByByteAreClosed() async throws {
        let fixture = try ServerFixture { $0.idleTimeoutSeconds = 1 }
        defer { fixture.remove() }
        try await fixture.withServer { client in
            let port = try #require(client.port)
            let silent = try RawConnection(port: port)
            let trickling = try RawConnection(port: port)
            let head = "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: " + String(repeating: "a", count: 200) + "\r\n\r\n"
            let sender = Task {
                for character in head {
                    guard trickling.send(String(character)) else { return }
                    try await Task.sleep(for: .milliseconds(100))
                }
            }
            defer { sender.cancel() }
            let started = ContinuousClock.now
            #expect(try await silent.waitForClose(within: .seconds(15)), "a silent connection stayed open")
            #expect(try await trickling.waitForClose(within: .seconds(15)), "a connection trickling its head stayed open")
            #expect(ContinuousClock.now - started < .seconds(15))

            // A connection that keeps to time is served as before.
            let prompt = try RawConnection(port: port)
            prompt.send("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            #expect(try await prompt.receiveResponse().status == 200)
        }
    }

    @Test func aBodySentAByteAtATimeIsCutOffAtTheReadDeadline() async throws {
        // Each body part restarts the idle timeout; the read deadline bounds the whole body.
        let fixture = try ServerFixture { $0.requestReadTimeoutSeconds = 1 }
        defer { fixture.remove() }
        try await fixture.withServer { client in
            let connection = try RawConnection(port: try #require(client.port))
            connection.send(Self.authorityUploadHead + "Content-Length: 200\r\n\r\n")
            let sender = Task {
                for _ in 0..<200 {
                    guard connection.send(" ") else { return }
                    try await Task.sleep(for: .milliseconds(100))
                }
            }
            defer { sender.cancel() }
            #expect(try await connection.waitForClose(within: .seconds(15)), "a body sent a byte at a time kept its connection")
        }
        #expect(Self.errorLines(fixture).isEmpty, "\(Self.errorLines(fixture))")
    }

    // MARK: 3. Framing errors inside the body, and clients that leave

    @Test func aMalformedChunkSizeIsA400AndNotAnError() async throws {
        let fixture = try ServerFixture()
        defer { fixture.remove() }
        try await fixture.withServer { client in
            let (_, response) = try await Self.exchange(
                client, Self.authorityUploadHead + "Transfer-Encoding: chunked\r\n\r\n2\r\n{\"\r\nzz\r\nids\r\n0\r\n\r\n")
            #expect(response.status == 400, "\(response.text)")
            #expect(response.apiError == "malformed_request", "\(response.text)")
            #expect(response.header("content-type") == "application/json")
        }
        #expect(Self.errorLines(fixture).isEmpty, "\(Self.errorLines(fixture))")
    }

    @Test func oversizedTrailerFieldsAre413() async throws {
        let fixture = try ServerFixture()
        defer { fixture.remove() }
        try await fixture.withServer { client in
            let (_, response) = try await Self.exchange(
                client, Self.authorityUploadHead + "Transfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n"
                    + "X-Padding: \(String(repeating: "p", count: 100_000))\r\n\r\n")
            #expect(response.status == 413, "\(response.text.prefix(300))")
            #expect(response.apiError == "trailers_too_large", "\(response.text.prefix(300))")
        }
        #expect(Self.errorLines(fixture).isEmpty, "\(Self.errorLines(fixture))")
    }

    @Test func aClientLeavingMidBodyIsNotLoggedAsAnError() async throws {
        let fixture = try ServerFixture()
        defer { fixture.remove() }
        try await fixture.withServer { client in
            let connection = try RawConnection(port: try #require(client.port))
            connection.send(Self.authorityUploadHead + "Content-Length: 1000\r\n\r\n{\"ids\": [")
            // Pacing: the server is to be reading the body when the client leaves; the checks
            // below (it logged "client left", and no error) hold whenever it noticed.
            try await Task.sleep(for: .milliseconds(200))
            connection.leave()
            // The server notices when its read of the body fails; give it a moment.
            _ = await eventually(every: .milliseconds(20)) {
                fixture.logs.all.contains(where: { $0.contains("client left") || $0.hasPrefix("error ") })
            }
            // A request that still works afterwards: the server is fine.
            #expect(try await client.send("/healthz", .get).status == .ok)
        }
        #expect(Self.errorLines(fixture).isEmpty, "\(Self.errorLines(fixture))")
        #expect(fixture.logs.all.contains { $0.hasPrefix("debug client left") }, "\(fixture.logs.all)")
        #expect(try await fixture.store.summary(now: Self.now).storedIDs == 0)
    }

    // MARK: 4. The media type

    @Test func onlyApplicationJSONIsAcceptedAndARefusalLeavesTheCodeUnused() async throws {
        let fixture = try ServerFixture()
        defer { fixture.remove() }
        let body = Histories.body(Histories.entries(count: 3, endingAt: Self.now))
        try await fixture.withServer { client in
            let code = try await Self.issueCode(client)
            for type in [
                "application/jsonx", "application/json-seq", "application/json+x", "text/json", "application/json; charset=latin1",
                "application/json, text/plain", "application/json; charset", "application", "application/json; a=1; a=2",
            ] {
                var headers = HTTPFields.uploadCode(code)
                headers[.contentType] = type
                let response = try await client.send("/v1/histories", .post, headers: headers, body: body)
                #expect(response.status == .unsupportedMediaType, "\(type)")
                #expect(response.apiError?.error == "unsupported_media_type", "\(type)")
            }
            // Parameters, case and spacing as RFC 9110 allows them; and the code still works.
            var headers = HTTPFields.uploadCode(code)
            headers[.contentType] = #"Application/JSON ; Charset="UTF-8""#
            let accepted = try await client.send("/v1/histories", .post, headers: headers, body: body)
            #expect(accepted.status == .created)
        }
        #expect(try await fixture.store.summary(now: Self.now).storedIDs == 3)
    }

    // MARK: 5. Refusals by the HTTP layer

    @Test(arguments: [
        ("Content-Length: abc\r\n", 400, "malformed_request"),
        ("Content-Length: 2\r\nContent-Length: 3\r\n", 400, "malformed_request"),
        ("X-Huge: \(String(repeating: "h", count: 100_000))\r\n", 431, "headers_too_large"),
    ])
    func refusalsOfTheHTTPParserCarryTheJSONError(header: String, status: Int, code: String) async throws {
        let fixture = try ServerFixture()
        defer { fixture.remove() }
        try await fixture.withServer { client in
            let (connection, response) = try await Self.exchange(client, Self.authorityUploadHead + header + "\r\n{}")
            #expect(response.status == status, "\(response.text.prefix(300))")
            #expect(response.header("content-type") == "application/json")
            #expect(response.apiError == code, "\(response.text.prefix(300))")
            // Nothing after a framing error can be read as a request: the connection ends.
            #expect(try await connection.waitForClose(within: .seconds(5)))
        }
        #expect(Self.errorLines(fixture).isEmpty, "\(Self.errorLines(fixture))")
    }

    @Test func aKnownPathWithAnotherMethodIs405WithAllow() async throws {
        let fixture = try ServerFixture()
        defer { fixture.remove() }
        try await fixture.withServer { client in
            for (path, method, allowed) in [
                ("/v1/codes", HTTPRequest.Method.get, "POST"), ("/v1/histories", .put, "POST"), ("/log/checkpoint", .delete, "GET, HEAD"),
                ("/log/checkpoint", .post, "GET, HEAD"), ("/log/uploads", .patch, "GET, HEAD"), ("/healthz", .post, "GET"),
                // Under `/log/tile/**`: the rest of the path is one component or more.
                ("/log/tile/entries/000.p/1", .post, "GET, HEAD"), ("/log/tile/0/x001/002", .put, "GET, HEAD"),
            ] {
                let response = try await client.send(path, method)
                #expect(response.status == .methodNotAllowed, "\(method) \(path)")
                #expect(response.headers[.allow] == allowed, "\(method) \(path)")
                #expect(response.apiError?.error == "method_not_allowed", "\(method) \(path)")
            }
            let unknown = try await client.send("/v1/nothing", .get)
            #expect(unknown.status == .notFound)
            // A tile not there, asked with a method the path answers, is not found, not refused.
            for path in ["/log/tile/entries/999", "/log/tile/nothing"] {
                #expect(try await client.send(path, .get).status == .notFound, "\(path)")
            }
            // The retired files' paths are no routes any more, whatever the method.
            for (path, method) in [("/index.tpli", HTTPRequest.Method.delete), ("/batches/1.tplb", .post), ("/keys/index.tpki", .get)] {
                let retired = try await client.send(path, method)
                #expect(retired.status == .notFound, "\(method) \(path)")
            }
            #expect(unknown.apiError?.error == "not_found")
        }
    }

    // MARK: 6. The code request's shape

    @Test func aCodeRequestWithAnUnknownOrRepeatedMemberIsRefused() async throws {
        let fixture = try ServerFixture()
        defer { fixture.remove() }
        try await fixture.withServer { client in
            for (text, detail) in [
                (#"{"expiresInSeconds": 600, "expiresIn": 60}"#, #""expiresIn""#),
                (#"{"expiresIn": 60}"#, #""expiresIn""#),
                (#"{"expiresInSeconds": 600, "expiresInSeconds": 99999999}"#, "more than once"),
                (#"{"expiresInSeconds": "600"}"#, "wrong type"),
                (#"[600]"#, "expiresInSeconds"),
            ] {
                let response = try await client.send("/v1/codes", .post, headers: .authority(), body: ByteBuffer(string: text))
                #expect(response.status == .badRequest, "\(text)")
                #expect(response.apiError?.error == "invalid_json", "\(text)")
                #expect(response.apiError?.detail.contains(detail) == true, "\(text): \(response.apiError?.detail ?? "")")
            }
            let empty = try await client.send("/v1/codes", .post, headers: .authority(), body: ByteBuffer(string: " {} "))
            #expect(empty.status == .created)
        }
        #expect(try await fixture.store.summary(now: Self.now).openUploadCodes == 1)
    }

    // MARK: 7. X-Forwarded-For

    /// Sends `attempts` wrong codes with the given X-Forwarded-For lines, then one more, and
    /// returns that last answer's status.
    static func statusAfterFailures(
        _ client: any TestClientProtocol, attempts: Int, forwardedFor: (Int) -> [String]
    ) async throws -> HTTPResponse.Status {
        var last: HTTPResponse.Status = .ok
        for attempt in 0...attempts {
            var headers = HTTPFields.uploadCode(UploadCode.generate().display)
            for value in forwardedFor(attempt) { headers.append(HTTPField(name: HTTPField.Name("X-Forwarded-For")!, value: value)) }
            last = try await client.send("/v1/histories", .post, headers: headers, body: ByteBuffer(string: "{}")).status
        }
        return last
    }

    @Test func theClientChoosesNoHopTheLimitIsKeyedOn() async throws {
        let fixture = try ServerFixture {
            $0.trustForwardedFor = true
            $0.failedAttemptsPerMinute = 3
        }
        defer { fixture.remove() }
        try await fixture.withServer { client in
            // Behind one proxy (the test client, on loopback), the right-most entry is the one
            // the proxy wrote; whatever the client put before it does not matter.
            let status1 = try await Self.statusAfterFailures(client, attempts: 3) { ["198.51.100.\($0), 203.0.113.7"] }
            #expect(status1 == .tooManyRequests)
            // Several lines are one list: the client's own line first, the proxy's last.
            let status2 = try await Self.statusAfterFailures(client, attempts: 0) { ["192.0.2.\($0)", "203.0.113.7"] }
            #expect(status2 == .tooManyRequests)
            // Another client behind the same proxy has its own budget.
            let status3 = try await Self.statusAfterFailures(client, attempts: 0) { _ in ["203.0.113.8"] }
            #expect(status3 == .unauthorized)
        }
    }

    @Test func forwardedForIsIgnoredFromAPeerThatIsNotATrustedProxy() async throws {
        let fixture = try ServerFixture {
            $0.trustForwardedFor = true
            $0.trustedProxies = ["192.0.2.1"]
            $0.failedAttemptsPerMinute = 3
        }
        defer { fixture.remove() }
        try await fixture.withServer { client in
            // The test client, on 127.0.0.1, reaches the server past the proxy: a new address in
            // each X-Forwarded-For must not give it a new budget.
            let status4 = try await Self.statusAfterFailures(client, attempts: 3) { ["203.0.113.\($0)"] }
            #expect(status4 == .tooManyRequests)
        }
    }

    @Test func withTwoTrustedHopsTheSecondEntryFromTheRightIsTheClient() async throws {
        let fixture = try ServerFixture {
            $0.trustForwardedFor = true
            $0.trustedProxyHops = 2
            $0.failedAttemptsPerMinute = 3
        }
        defer { fixture.remove() }
        try await fixture.withServer { client in
            let status5 = try await Self.statusAfterFailures(client, attempts: 3) { ["198.51.100.\($0), 203.0.113.9, 10.0.0.\($0)"] }
            #expect(status5 == .tooManyRequests)
            let status6 = try await Self.statusAfterFailures(client, attempts: 0) { _ in ["203.0.113.10, 10.0.0.1"] }
            #expect(status6 == .unauthorized)
        }
    }

    // MARK: 8. Links out of the published directory

    @Test func linksInThePublishedDirectoryAreNeverFollowed() async throws {
        let fixture = try ServerFixture()
        defer { fixture.remove() }
        let published = fixture.paths.published
        let secret = try Data(contentsOf: URL(fileURLWithPath: fixture.paths.signingKey))
        let manager = FileManager.default
        let log = published.logPath
        for folder in ["/tile/0", "/tile/entries"] { try manager.createDirectory(atPath: log + folder, withIntermediateDirectories: true) }
        try manager.createSymbolicLink(atPath: published.logCheckpointPath, withDestinationPath: fixture.paths.signingKey)
        try manager.createSymbolicLink(atPath: log + "/tile/0/000", withDestinationPath: fixture.paths.signingKey)
        #expect(link(fixture.paths.signingKey, log + "/tile/entries/000") == 0)
        // A linked directory: tile/1 pointing at a directory outside with a tile in it.
        let outside = fixture.paths.dataDirectory + "/outside"
        try manager.createDirectory(atPath: outside, withIntermediateDirectories: true)
        try secret.write(to: URL(fileURLWithPath: outside + "/000"))
        try manager.createSymbolicLink(atPath: log + "/tile/1", withDestinationPath: outside)
        // And the retired files, which have no route, even where an upgrade keeps them.
        try secret.write(to: URL(fileURLWithPath: published.retiredIndexPath))
        try await fixture.withServer { client in
            for path in ["/log/checkpoint", "/log/tile/0/000", "/log/tile/entries/000", "/log/tile/1/000", "/index.tpli", "/batches/7.tplb", "/keys/index.tpki"] {
                for method in [HTTPRequest.Method.get, .head] {
                    let response = try await client.send(path, method)
                    #expect(response.status == .notFound, "\(method) \(path)")
                    #expect(response.bytes != Array(secret), "\(method) \(path)")
                }
            }
        }
    }
}
