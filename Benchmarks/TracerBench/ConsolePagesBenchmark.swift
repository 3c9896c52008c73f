import Foundation
import TracerTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// Issue 28's page figures: each console page's weight (its HTML, and the stylesheet every page
/// loads, which `no-store` makes the browser fetch each time) and time to first byte, from a real
/// `tracer-server serve` with the console on, signed in as an operator, over loopback.
struct ConsolePagesBenchmark {
    let directory: String
    let serverPath: String
    let rounds: Int

    static let password = "benchmark password 0123"

    func run() async throws {
        say("# Console pages (\(Date())), \(serverPath), \(rounds) rounds each")
        let data = directory + "/console-server"
        try FileManager.default.createDirectory(atPath: data, withIntermediateDirectories: true)
        let port = try LoopbackPort.free()
        let apiPort = try LoopbackPort.free()
        try Data("""
            {"authorities": [{"name": "Bench", "token": "bench-authority-token-0123456789"}],
             "console": {"enabled": true, "listen": "127.0.0.1:\(port)", "timeZone": "Europe/Berlin"}}
            """.utf8).write(to: URL(fileURLWithPath: data + "/config.json"))
        _ = try ProcessResult.run(serverPath, ["keygen", "--data-dir", data])
        try addAccount(data: data)
        let server = Process()
        server.executableURL = URL(fileURLWithPath: serverPath)
        server.arguments = ["serve", "--data-dir", data, "--bind", "127.0.0.1:\(apiPort)"]
        server.standardOutput = FileHandle.nullDevice
        server.standardError = FileHandle.nullDevice
        try server.run()
        defer { server.terminate(); server.waitUntilExit() }
        try await LoopbackPort.waitUntilListening(port, orExit: server)

        let form = "&name=olga&password=" + Self.password.replacingOccurrences(of: " ", with: "+")
        var signInTimes: [Double] = []
        for _ in 0..<rounds {
            var fresh = PageClient(port: port)
            let answer = try fresh.post("/sign-in", "csrf=" + (try PageClient.formToken(try fresh.request("GET /sign-in").body)) + form)
            guard answer.status == 303 else { throw BenchmarkFailure("sign-in answered \(answer.status)") }
            signInTimes.append(answer.firstByteMilliseconds)
        }
        var client = PageClient(port: port)
        let signedIn = try client.post("/sign-in", "csrf=" + (try PageClient.formToken(try client.request("GET /sign-in").body)) + form)
        guard signedIn.status == 303 else { throw BenchmarkFailure("sign-in answered \(signedIn.status)") }
        let csrf = try PageClient.formToken(try client.request("GET /codes").body)
        let issued = try client.post("/codes", "csrf=\(csrf)")
        guard issued.status == 303, let issuedPath = issued.location else { throw BenchmarkFailure("issuing answered \(issued.status)") }

        let css = try client.request("GET /console.css")
        say("\n| page | HTML bytes | with stylesheet | time to first byte, median (min-max) |")
        say("|---|---:|---:|---|")
        var signedOut = PageClient(port: port)
        let pages: [(String, () throws -> PageClient.Answer)] = [
            ("sign-in", { try signedOut.request("GET /sign-in") }),
            ("upload codes (1 issued)", { try client.request("GET /codes") }),
            ("issued code", { try client.request("GET \(issuedPath)") }),
            ("publication status", { try client.request("GET /operator/status") }),
            ("accounts", { try client.request("GET /operator/accounts") }),
            ("audit log (\(rounds + 3) events)", { try client.request("GET /operator") }),
            ("stylesheet", { try client.request("GET /console.css") }),
        ]
        for (name, fetch) in pages {
            var times: [Double] = []
            var bytes = 0
            for _ in 0..<rounds {
                let answer = try fetch()
                guard answer.status == 200 else { throw BenchmarkFailure("\(name) answered \(answer.status)") }
                times.append(answer.firstByteMilliseconds)
                bytes = answer.body.utf8.count
            }
            times.sort()
            let total = name == "stylesheet" ? bytes : bytes + css.body.utf8.count
            say(String(format: "| %@ | %d | %d | %.2f ms (%.2f-%.2f) |", name, bytes, total, times[times.count / 2], times.first!, times.last!))
        }
        signInTimes.sort()
        say(String(
            format: "| sign-in (POST, scrypt check) | | | %.1f ms (%.1f-%.1f) |", signInTimes[signInTimes.count / 2], signInTimes.first!, signInTimes.last!))
    }

    private func addAccount(data: String) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: serverPath)
        process.arguments = ["console", "add-account", "--data-dir", data, "--role", "operator", "--password-stdin", "olga"]
        let input = Pipe()
        process.standardInput = input
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        input.fileHandleForWriting.write(Data((Self.password + "\n").utf8))
        try input.fileHandleForWriting.close()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else { throw BenchmarkFailure("console add-account failed") }
    }
}

/// One request per connection, as a browser's first visit; cookies kept.
private struct PageClient {
    struct Answer {
        var status: Int
        var head: String
        var body: String
        var firstByteMilliseconds: Double
        var location: String? {
            head.components(separatedBy: "\r\n").first { $0.lowercased().hasPrefix("location:") }.map { String($0.dropFirst(9)).trimmingCharacters(in: .whitespaces) }
        }
    }

    let port: Int
    var cookies: [String: String] = [:]

    init(port: Int) { self.port = port }

    mutating func request(_ line: String, body: String? = nil) throws -> Answer {
        var text = "\(line) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nConnection: close\r\n"
        if !cookies.isEmpty { text += "Cookie: " + cookies.map { "\($0.key)=\($0.value)" }.joined(separator: "; ") + "\r\n" }
        if let body { text += "Content-Type: application/x-www-form-urlencoded\r\nContent-Length: \(body.utf8.count)\r\n" }
        text += "\r\n" + (body ?? "")
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(descriptor) }
        guard LoopbackPort.connectSocket(descriptor, to: port) else { throw BenchmarkFailure("cannot connect to 127.0.0.1:\(port)") }
        let start = ContinuousClock.now
        let bytes = Array(text.utf8)
        guard bytes.withUnsafeBytes({ send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }) == bytes.count else {
            throw BenchmarkFailure("cannot send")
        }
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65_536)
        var firstByte: Duration?
        while true {
            let count = recv(descriptor, &buffer, buffer.count, 0)
            if count <= 0 { break }
            if firstByte == nil { firstByte = ContinuousClock.now - start }
            received += buffer[0..<count]
        }
        let response = String(decoding: received, as: UTF8.self)
        guard let split = response.range(of: "\r\n\r\n"), let elapsed = firstByte else { throw BenchmarkFailure("no answer to \(line)") }
        let head = String(response[..<split.lowerBound])
        for cookieLine in head.components(separatedBy: "\r\n") where cookieLine.lowercased().hasPrefix("set-cookie:") {
            let pair = cookieLine.dropFirst(11).split(separator: ";").first?.split(separator: "=", maxSplits: 1) ?? []
            guard pair.count == 2 else { continue }
            let name = pair[0].trimmingCharacters(in: .whitespaces)
            if cookieLine.contains("Max-Age=0") { cookies[name] = nil } else { cookies[name] = String(pair[1]) }
        }
        let status = Int(head.split(separator: " ").dropFirst().first ?? "") ?? 0
        return Answer(status: status, head: head, body: String(response[split.upperBound...]), firstByteMilliseconds: elapsed.seconds * 1_000)
    }

    mutating func post(_ path: String, _ body: String) throws -> Answer { try request("POST \(path)", body: body) }

    static func formToken(_ html: String) throws -> String {
        guard let start = html.range(of: #"name="csrf" value=""#) else { throw BenchmarkFailure("no form token on the page") }
        return String(html[start.upperBound...].prefix { $0 != "\"" })
    }
}
