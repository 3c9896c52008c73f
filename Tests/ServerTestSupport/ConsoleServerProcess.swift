import Foundation
import Testing
import TracerTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// A real `tracer-server serve` with the console on a port of its own, and accounts created by
/// `tracer-server console add-account` as an operator would.
package final class ConsoleServerProcess {
    package static let password = "correct horse battery staple"

    package let fixture: ServerFixture
    package let apiPort: Int
    package let consolePort: Int
    /// The database of the `postgres` back end, started for this server alone.
    private let postgres: PostgresProcess?
    private var process: Process?
    /// Further `serve` instances on the same data directory and database.
    private var otherInstances: [Process] = []
    private var stopped = false

    /// `console` is further members of the console section, such as `"sessionIdleSeconds": 3`;
    /// `settings` further top-level members.
    package init(console: String = "", settings: String = "", backEnd: StoreBackend = .sqlite) async throws {
        fixture = try ServerFixture()
        apiPort = try LoopbackPort.free()
        consolePort = try LoopbackPort.free()
        var settings = settings
        if backEnd == .postgres {
            let postgres = try PostgresProcess()
            self.postgres = postgres
            let url = try postgres.createDatabase("tracer")
            settings += (settings.isEmpty ? "" : ", ") + #""database": {"url": "\#(url)"}"#
        } else {
            postgres = nil
        }
        let more = console.isEmpty ? "" : ", " + console
        try fixture.writeConfiguration(extra: """
            , "console": {"enabled": true, "listen": "127.0.0.1:\(consolePort)", "authority": "Health Authority A"\(more)}\(settings.isEmpty ? "" : ", " + settings)
            """)
        do {
            for (name, role) in [("olga", "operator"), ("sam", "staff")] {
                let added = try addAccount(name, role: role)
                guard added.exitCode == 0 else { throw HarnessFailure(description: "console add-account \(name) failed: \(added)") }
            }
            let process = try ServerCLI.start(["serve", "--bind", "127.0.0.1:\(apiPort)"], fixture: fixture)
            self.process = process
            try await LoopbackPort.waitUntilListening(consolePort, orExit: process)
            try await LoopbackPort.waitUntilListening(apiPort, orExit: process)
        } catch {
            stop()
            throw error
        }
    }

    deinit { stop() }

    /// Stops `serve` and starts it again on the same ports, data and database.
    package func restart() async throws {
        if let process {
            process.terminate()
            process.waitUntilExit()
        }
        let process = try ServerCLI.start(["serve", "--bind", "127.0.0.1:\(apiPort)"], fixture: fixture)
        self.process = process
        try await LoopbackPort.waitUntilListening(consolePort, orExit: process)
        try await LoopbackPort.waitUntilListening(apiPort, orExit: process)
    }

    /// Starts another `serve` on the same data directory and configuration but its own ports,
    /// as a second instance behind a load balancer; returns its console port.
    package func startAnotherInstance() async throws -> Int {
        let apiPort = try LoopbackPort.free()
        let consolePort = try LoopbackPort.free()
        let configuration = try String(contentsOfFile: fixture.paths.configuration, encoding: .utf8)
            .replacingOccurrences(of: "127.0.0.1:\(self.consolePort)", with: "127.0.0.1:\(consolePort)")
        let path = fixture.paths.dataDirectory + "/config-\(otherInstances.count + 2).json"
        try configuration.write(toFile: path, atomically: true, encoding: .utf8)
        let process = try ServerCLI.start(["serve", "--bind", "127.0.0.1:\(apiPort)", "--config", path], fixture: fixture)
        otherInstances.append(process)
        try await LoopbackPort.waitUntilListening(consolePort, orExit: process)
        return consolePort
    }

    /// Stops the server and its database and removes their files; again, it does nothing.
    package func stop() {
        guard !stopped else { return }
        stopped = true
        for process in otherInstances + [process].compactMap({ $0 }) {
            if process.isRunning { process.terminate() }
            process.waitUntilExit()
        }
        postgres?.stop()
        fixture.remove()
    }

    @discardableResult
    package func addAccount(_ name: String, role: String, password: String = ConsoleServerProcess.password) throws -> ProcessResult {
        try Self.addAccount(name, role: role, password: password, fixture: fixture)
    }

    /// `console add-account --password-stdin`, the password sent on standard input.
    package static func addAccount(_ name: String, role: String, password: String, fixture: ServerFixture) throws -> ProcessResult {
        try console(["add-account", "--role", role, "--password-stdin", name], input: password + "\n", fixture: fixture)
    }

    /// `tracer-server console ARGUMENTS` with `input` on standard input.
    package func console(_ arguments: [String], input text: String = "") throws -> ProcessResult {
        try Self.console(arguments, input: text, fixture: fixture)
    }

    package static func console(_ arguments: [String], input text: String, fixture: ServerFixture) throws -> ProcessResult {
        try ProcessResult.collect(try ServerCLI.process(["console"] + arguments, fixture: fixture), input: text)
    }

    package func browser(from source: String = "127.0.0.1") -> ConsoleClient { ConsoleClient(port: consolePort, source: source) }

    /// A sign-in from a browser with no cookies yet.
    package func signInFromANewBrowser(_ name: String, password: String = ConsoleServerProcess.password) async throws -> RawConnection.Response {
        var browser = browser()
        return try await browser.signIn(name, password: password)
    }
}

/// What a browser does with the console, over plain sockets: cookies kept from `Set-Cookie`
/// and sent back, forms posted as `application/x-www-form-urlencoded`. Each request on its own
/// connection from `source` (a 127.0.0.0/8 address, so that one test can be many computers).
package struct ConsoleClient {
    package let port: Int
    package let source: String
    package var cookies: [String: String] = [:]

    package init(port: Int, source: String) {
        self.port = port
        self.source = source
    }

    package mutating func get(_ path: String) async throws -> RawConnection.Response {
        try await send("GET \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\(cookieLine)\r\n")
    }

    package mutating func post(_ path: String, _ fields: [(String, String)]) async throws -> RawConnection.Response {
        let body = fields.map { "\(Self.encode($0.0))=\(Self.encode($0.1))" }.joined(separator: "&")
        return try await post(path, body: body)
    }

    package mutating func post(_ path: String, body: String, contentType: String = "application/x-www-form-urlencoded") async throws -> RawConnection.Response {
        try await send(
            "POST \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\(cookieLine)Content-Type: \(contentType)\r\nContent-Length: \(body.utf8.count)\r\n\r\n\(body)")
    }

    /// Signs in through the sign-in page as a browser does.
    package mutating func signIn(_ name: String, password: String = ConsoleServerProcess.password) async throws -> RawConnection.Response {
        let page = try await get("/sign-in")
        let token = try #require(Self.formToken(page.body), "no token on the sign-in page: \(page.text.prefix(2000))")
        return try await post("/sign-in", [("csrf", token), ("name", name), ("password", password)])
    }

    /// The session's form token from a signed-in page.
    package mutating func sessionToken() async throws -> String {
        let page = try await get("/codes")
        return try #require(Self.formToken(page.body), "no token on /codes: \(page.text.prefix(2000))")
    }

    /// Issues a code through the page's form, follows the redirect to the page that shows it
    /// (POST-redirect-GET) and returns it as shown, grouped.
    package mutating func issueCode() async throws -> String {
        let response = try await post("/codes", [("csrf", try await sessionToken())])
        let location = try #require(response.header("location"), "issuing failed: \(response.text.prefix(2000))")
        try #require(response.status == 303 && location.hasPrefix("/codes/issued/"), "\(response.head)")
        let page = try await get(location)
        return try #require(Self.issuedCode(page.body), "no code on the page: \(page.body.prefix(2000))")
    }

    /// Posts an operator form on `path` with the session's token and `fields`.
    package mutating func postForm(_ path: String, _ fields: [(String, String)]) async throws -> RawConnection.Response {
        try await post(path, [("csrf", try await sessionToken())] + fields)
    }

    package static func formToken(_ html: String) -> String? {
        value(in: html, after: #"name="csrf" value=""#)
    }

    package static func issuedCode(_ html: String) -> String? {
        value(in: html, after: #"id="issued-code" data-code=""#)
    }

    private static func value(in html: String, after marker: String) -> String? {
        guard let start = html.range(of: marker) else { return nil }
        return String(html[start.upperBound...].prefix { $0 != "\"" })
    }

    private var cookieLine: String {
        cookies.isEmpty ? "" : "Cookie: " + cookies.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: "; ") + "\r\n"
    }

    private mutating func send(_ request: String) async throws -> RawConnection.Response {
        let connection = try RawConnection(port: port, from: source)
        connection.send(request)
        let response = try await connection.receiveResponse()
        for cookie in Self.setCookies(response) {
            let pair = cookie.split(separator: ";").first ?? ""
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            guard parts.count == 2 else { continue }
            let name = parts[0].trimmingCharacters(in: .whitespaces)
            if cookie.contains("Max-Age=0") { cookies[name] = nil } else { cookies[name] = String(parts[1]) }
        }
        return response
    }

    package static func setCookies(_ response: RawConnection.Response) -> [String] {
        response.head.components(separatedBy: "\r\n").dropFirst().compactMap { line in
            let parts = line.split(separator: ":", maxSplits: 1)
            guard parts.count == 2, parts[0].lowercased() == "set-cookie" else { return nil }
            return parts[1].trimmingCharacters(in: .whitespaces)
        }
    }

    private static func encode(_ text: String) -> String {
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "-._~")
        return text.addingPercentEncoding(withAllowedCharacters: allowed) ?? text
    }
}

/// The headers every console response must carry, whatever its status.
package func expectConsoleHeaders(_ response: RawConnection.Response, sourceLocation: SourceLocation = #_sourceLocation) {
    #expect(response.header("content-security-policy")?.contains("default-src 'self'") == true, "\(response.head)", sourceLocation: sourceLocation)
    #expect(response.header("x-frame-options") == "DENY", "\(response.head)", sourceLocation: sourceLocation)
    #expect(response.header("referrer-policy") == "no-referrer", "\(response.head)", sourceLocation: sourceLocation)
    #expect(response.header("cache-control") == "no-store", "\(response.head)", sourceLocation: sourceLocation)
}
