import Foundation
import Testing
import TestTiers
import ServerTestSupport
import TracerTestSupport

/// The nginx server block of docs/console.md, taken from the document itself (so the document
/// cannot drift from what is tested) with only its ADJUST values replaced, in front of a real
/// console: staff sign in and issue a code over HTTPS through it, with curl as the browser.
@Suite(.tags(.integration), .serialized) struct ConsoleNginxTests {
    static let serverName = "console.health-authority.example"

    /// The indented block after "An nginx server block for it" in docs/console.md, unindented.
    static func documentedBlock() throws -> String {
        let document = try String(contentsOfFile: NginxInstance.repositoryRoot + "/docs/console.md", encoding: .utf8)
        let lines = document.split(separator: "\n", omittingEmptySubsequences: false)
        guard let start = lines.firstIndex(where: { $0.hasPrefix("An nginx server block for it") }) else {
            throw HarnessFailure(description: "docs/console.md has no line starting \"An nginx server block for it\"; update ConsoleNginxTests.")
        }
        var block: [Substring] = []
        for line in lines[(start + 1)...] {
            if line.hasPrefix("    ") {
                block.append(line.dropFirst(4))
            } else if !line.isEmpty && !block.isEmpty {
                break
            } else if line.isEmpty && !block.isEmpty {
                block.append("")
            }
        }
        return block.joined(separator: "\n")
    }

    @Test func theDocumentedServerBlockServesTheConsoleOverHTTPS() async throws {
        try RequiredTool.openssl.require()
        try RequiredTool.curl.require()
        let server = try await ConsoleServerProcess(settings: #""trustForwardedFor": true"#)
        defer { server.stop() }
        let prefix = NSTemporaryDirectory() + "/tracer-console-nginx-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: prefix, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: prefix) }
        try ProcessResult.run("/usr/bin/openssl", [
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=\(Self.serverName)",
            "-keyout", prefix + "/console.key", "-out", prefix + "/console.crt",
        ]).succeeded("openssl req")
        let tlsPort = try LoopbackPort.free()
        let plainPort = try LoopbackPort.free()
        var block = try Self.documentedBlock()
        for (original, replacement) in [
            ("listen 10.0.0.5:443 ssl;", "listen 127.0.0.1:\(tlsPort) ssl;"),
            ("listen 10.0.0.5:80;", "listen 127.0.0.1:\(plainPort);"),
            ("/etc/ssl/console.crt", prefix + "/console.crt"),
            ("/etc/ssl/console.key", prefix + "/console.key"),
            ("proxy_pass http://127.0.0.1:8081;", "proxy_pass http://127.0.0.1:\(server.consolePort);"),
        ] {
            try #require(block.contains(original), "docs/console.md's block no longer contains `\(original)`; update ConsoleNginxTests")
            block = block.replacingOccurrences(of: original, with: replacement)
        }
        try NginxProcess.writeConfiguration(prefix: prefix, server: block, workerProcesses: "1")
        let nginx = try await NginxProcess(prefix: prefix, configuredToListenOn: tlsPort, captureErrors: true)
        defer { nginx.stop() }

        let browser = CurlBrowser(jar: prefix + "/cookies", base: "https://\(Self.serverName):\(tlsPort)", resolve: "\(Self.serverName):\(tlsPort):127.0.0.1")
        let signInPage = try browser.request("/sign-in")
        #expect(signInPage.status == 200, "\(signInPage.head)")
        let signInToken = try #require(ConsoleClient.formToken(signInPage.body), "\(signInPage.body.prefix(2000))")
        let signIn = try browser.request("/sign-in", form: ["csrf": signInToken, "name": "sam", "password": ConsoleServerProcess.password])
        #expect(signIn.status == 303 && signIn.header("location") == "/codes", "\(signIn.head)")
        let session = try #require(signIn.setCookies.first { $0.hasPrefix("__Host-console_session=") }, "\(signIn.head)")
        #expect(session.contains("Secure") && session.contains("HttpOnly") && session.contains("SameSite=Strict"))
        #expect(signIn.header("cache-control") == "no-store")

        let codes = try browser.request("/codes")
        #expect(codes.status == 200, "\(codes.head)")
        let sessionToken = try #require(ConsoleClient.formToken(codes.body))
        let issue = try browser.request("/codes", form: ["csrf": sessionToken])
        let location = try #require(issue.header("location"), "\(issue.head)")
        #expect(issue.status == 303 && location.hasPrefix("/codes/issued/"))
        let shown = try browser.request(location)
        let code = try #require(ConsoleClient.issuedCode(shown.body), "\(shown.body.prefix(2000))")
        #expect(code.count == 14)

        // Plain HTTP only redirects to HTTPS.
        let plain = CurlBrowser(jar: prefix + "/plain-cookies", base: "http://\(Self.serverName):\(plainPort)", resolve: "\(Self.serverName):\(plainPort):127.0.0.1")
        let redirect = try plain.request("/sign-in")
        #expect(redirect.status == 301 && redirect.header("location") == "https://\(Self.serverName)/sign-in", "\(redirect.head)")
    }

}

/// curl as a browser: a cookie jar it keeps and sends (Secure cookies only over HTTPS, as
/// browsers do), the server's name resolved to 127.0.0.1, the self-signed certificate accepted.
struct CurlBrowser {
    struct Response {
        let head: String
        let body: String
        var status: Int { Int(head.split(separator: " ").dropFirst().first ?? "") ?? 0 }
        func header(_ name: String) -> String? {
            head.split(separator: "\r\n").first { $0.lowercased().hasPrefix(name.lowercased() + ":") }
                .map { String($0.dropFirst(name.count + 1)).trimmingCharacters(in: .whitespaces) }
        }
        var setCookies: [String] {
            head.split(separator: "\r\n").filter { $0.lowercased().hasPrefix("set-cookie:") }.map { String($0.dropFirst(11)).trimmingCharacters(in: .whitespaces) }
        }
    }

    let jar: String
    let base: String
    let resolve: String

    func request(_ path: String, form: [String: String]? = nil) throws -> Response {
        let head = jar + ".head"
        var arguments = ["--silent", "--show-error", "--insecure", "--resolve", resolve, "--cookie", jar, "--cookie-jar", jar, "--dump-header", head]
        if let form {
            for (name, value) in form.sorted(by: { $0.key < $1.key }) { arguments += ["--data-urlencode", "\(name)=\(value)"] }
        }
        let body = try ProcessResult.run("/usr/bin/curl", arguments + [base + path]).succeeded("curl \(path)").stdout
        return Response(head: try String(contentsOfFile: head, encoding: .utf8), body: body)
    }
}
