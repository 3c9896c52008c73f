import Foundation
import TestTiers
#if canImport(Glibc)
import Glibc
#endif

/// A real headless Chromium driven through chromedriver's W3C WebDriver HTTP API: the few
/// commands a console test needs, as JSON over a loopback socket (no Selenium).
///
/// Debian's `chromium` and `chromium-driver` (scripts/setup). Runs as root need `--no-sandbox`;
/// the browser's profile lives in a temporary directory chromedriver removes at `quit()`.
public final class WebDriverBrowser {
    public struct Element: Sendable { public let id: String }

    private let driver: Process
    private let base: String
    private let session: String

    public static var isInstalled: Bool { RequiredTool.chromium.isInstalled }

    /// Starts chromedriver on a free loopback port and a headless browser session in it.
    public static func start(windowWidth: Int = 900, windowHeight: Int = 700, log: String) async throws -> WebDriverBrowser {
        try RequiredTool.chromium.require()
        let port = try LoopbackPort.free()
        let driver = Process()
        driver.executableURL = URL(fileURLWithPath: "/usr/bin/chromedriver")
        driver.arguments = ["--port=\(port)", "--allowed-ips=127.0.0.1"]
        _ = FileManager.default.createFile(atPath: log, contents: nil)
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: log))
        driver.standardOutput = handle
        driver.standardError = handle
        driver.standardInput = FileHandle.nullDevice
        try driver.run()
        try? handle.close()
        do {
            try await LoopbackPort.waitUntilListening(port, orExit: driver)
            let base = "http://127.0.0.1:\(port)"
            let answer = try await command(base + "/session", method: "POST", body: [
                "capabilities": ["alwaysMatch": [
                    "browserName": "chrome",
                    "goog:chromeOptions": [
                        "binary": "/usr/bin/chromium",
                        "args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=\(windowWidth),\(windowHeight)"],
                    ],
                ]],
            ])
            guard let value = answer as? [String: Any], let session = value["sessionId"] as? String else {
                throw HarnessFailure(description: "chromedriver started no session: \(answer)")
            }
            return WebDriverBrowser(driver: driver, base: base + "/session/" + session, session: session)
        } catch {
            stop(driver)
            throw error
        }
    }

    private init(driver: Process, base: String, session: String) {
        self.driver = driver
        self.base = base
        self.session = session
    }

    deinit {
        if driver.isRunning { driver.terminate() }
    }

    public func open(_ url: String) async throws {
        _ = try await Self.command(base + "/url", method: "POST", body: ["url": url])
    }

    public func currentURL() async throws -> String {
        try await Self.command(base + "/url", method: "GET") as? String ?? ""
    }

    /// The first element matching `cssSelector`, waiting up to `timeout` for it: a click that
    /// submits a form returns before the next page has loaded.
    public func find(_ cssSelector: String, timeout: Duration = .seconds(10)) async throws -> Element {
        let deadline = ContinuousClock.now + timeout
        while true {
            do {
                let value = try await Self.command(base + "/element", method: "POST", body: ["using": "css selector", "value": cssSelector])
                guard let object = value as? [String: Any], let id = object.values.first as? String else {
                    throw HarnessFailure(description: "no element for \(cssSelector): \(value)")
                }
                return Element(id: id)
            } catch {
                guard ContinuousClock.now < deadline else { throw error }
                try await Task.sleep(for: .milliseconds(100))
            }
        }
    }

    /// Waits up to `timeout` for the page's address to become `url`; returns the last one seen.
    public func waitForURL(_ url: String, timeout: Duration = .seconds(10)) async throws -> String {
        let deadline = ContinuousClock.now + timeout
        var current = try await currentURL()
        while current != url && ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(100))
            current = try await currentURL()
        }
        return current
    }

    public func type(_ text: String, into element: Element) async throws {
        _ = try await Self.command(base + "/element/\(element.id)/value", method: "POST", body: ["text": text])
    }

    public func click(_ element: Element) async throws {
        _ = try await Self.command(base + "/element/\(element.id)/click", method: "POST", body: [:])
    }

    public func text(of element: Element) async throws -> String {
        try await Self.command(base + "/element/\(element.id)/text", method: "GET") as? String ?? ""
    }

    public func pageSource() async throws -> String {
        try await Self.command(base + "/source", method: "GET") as? String ?? ""
    }

    /// Runs `script` (a function body; `arguments` holds `args`) in the page and returns its value.
    /// WebDriver's scripts are not subject to the page's Content-Security-Policy.
    public func execute(_ script: String, args: [Any] = []) async throws -> Any {
        try await Self.command(base + "/execute/sync", method: "POST", body: ["script": script, "args": args])
    }

    /// Like `execute`, for a script that ends by calling its last argument with the result.
    public func executeAsync(_ script: String, args: [Any] = []) async throws -> Any {
        try await Self.command(base + "/execute/async", method: "POST", body: ["script": script, "args": args])
    }

    /// A PNG of the window.
    public func screenshot() async throws -> Data {
        guard let text = try await Self.command(base + "/screenshot", method: "GET") as? String, let data = Data(base64Encoded: text) else {
            throw HarnessFailure(description: "chromedriver returned no screenshot")
        }
        return data
    }

    /// Writes a screenshot to `path`, creating its directory; failures to do so are ignored (it is
    /// evidence for a failing test, not part of it).
    public func saveScreenshot(to path: String) async {
        guard let data = try? await screenshot() else { return }
        try? FileManager.default.createDirectory(atPath: (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        try? data.write(to: URL(fileURLWithPath: path))
    }

    /// Ends the browser session and chromedriver.
    public func quit() async {
        _ = try? await Self.command(base, method: "DELETE")
        Self.stop(driver)
    }

    /// SIGTERM, then SIGKILL if chromedriver is still there after 3 s (it may ignore SIGTERM).
    static func stop(_ driver: Process) {
        guard driver.isRunning else { return }
        driver.terminate()
        _ = eventuallyBlocking(timeout: .seconds(3), every: .milliseconds(20)) { !driver.isRunning }
        if driver.isRunning { kill(driver.processIdentifier, SIGKILL) }
        driver.waitUntilExit()
    }

    /// One WebDriver command; its `value`, or a failure carrying WebDriver's error.
    private static func command(_ url: String, method: String, body: [String: Any]? = nil) async throws -> Any {
        guard let parsed = URL(string: url), let port = parsed.port else { throw HarnessFailure(description: "not a driver URL: \(url)") }
        let payload = try body.map { try JSONSerialization.data(withJSONObject: $0) } ?? Data()
        let (status, data) = try LoopbackHTTP.exchange(port: port, method: method, path: parsed.path, body: payload, timeoutSeconds: 60)
        let object = (try? JSONSerialization.jsonObject(with: data, options: [.fragmentsAllowed])) as? [String: Any]
        let value = object?["value"] ?? NSNull()
        guard status == 200 else {
            throw HarnessFailure(description: "WebDriver \(method) \(url) answered \(status): \(String(decoding: data.prefix(2_000), as: UTF8.self))")
        }
        return value
    }
}

/// One HTTP/1.1 request to 127.0.0.1 on its own connection (`Connection: close`), the answer
/// read to its Content-Length. (URLSession's async `data(for:)` never returned here although
/// chromedriver had answered, so the driver gets a plain socket.)
enum LoopbackHTTP {
    static func exchange(port: Int, method: String, path: String, body: Data, timeoutSeconds: Int) throws -> (status: Int, body: Data) {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(descriptor) }
        guard LoopbackPort.connectSocket(descriptor, to: port) else { throw HarnessFailure(description: "cannot connect to 127.0.0.1:\(port)") }
        var request = Data("\(method) \(path) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nConnection: close\r\n".utf8)
        request += Data("Content-Type: application/json; charset=utf-8\r\nContent-Length: \(body.count)\r\n\r\n".utf8) + body
        var sent = 0
        while sent < request.count {
            let count = request[sent...].withUnsafeBytes { Glibc.send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard count > 0 else { throw HarnessFailure(description: "cannot send to 127.0.0.1:\(port)") }
            sent += count
        }
        var received = Data()
        var buffer = [UInt8](repeating: 0, count: 65_536)
        let deadline = ContinuousClock.now + .seconds(timeoutSeconds)
        while true {
            var poller = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
            guard ContinuousClock.now < deadline else { throw HarnessFailure(description: "no answer from 127.0.0.1:\(port) within \(timeoutSeconds) s") }
            if poll(&poller, 1, 200) <= 0 { continue }
            let count = recv(descriptor, &buffer, buffer.count, 0)
            if count <= 0 { break }
            received.append(contentsOf: buffer[0..<count])
            // chromedriver keeps the connection open despite `Connection: close`: the answer is
            // complete once its Content-Length has arrived.
            if let split = received.range(of: Data("\r\n\r\n".utf8)) {
                let head = String(decoding: received[..<split.lowerBound], as: UTF8.self).lowercased()
                if let line = head.components(separatedBy: "\r\n").first(where: { $0.hasPrefix("content-length:") }),
                   let length = Int(line.dropFirst("content-length:".count).trimmingCharacters(in: .whitespaces)),
                   received.distance(from: split.upperBound, to: received.endIndex) >= length
                { break }
            }
        }
        guard let split = received.range(of: Data("\r\n\r\n".utf8)) else { throw HarnessFailure(description: "no HTTP answer from 127.0.0.1:\(port)") }
        let head = String(decoding: received[..<split.lowerBound], as: UTF8.self)
        let statusParts = head.split(separator: " ", maxSplits: 2)
        let status = statusParts.count >= 2 ? Int(statusParts[1]) ?? 0 : 0
        var payload = Data(received[split.upperBound...])
        if head.lowercased().contains("transfer-encoding: chunked") { payload = dechunk(payload) }
        return (status, payload)
    }

    private static func dechunk(_ data: Data) -> Data {
        var result = Data()
        var index = data.startIndex
        while let lineEnd = data[index...].range(of: Data("\r\n".utf8)) {
            let sizeText = String(decoding: data[index..<lineEnd.lowerBound], as: UTF8.self).split(separator: ";").first ?? ""
            guard let size = Int(sizeText.trimmingCharacters(in: .whitespaces), radix: 16), size > 0 else { break }
            let start = lineEnd.upperBound
            guard data.distance(from: start, to: data.endIndex) >= size else { break }
            let end = data.index(start, offsetBy: size)
            result.append(data[start..<end])
            index = data.index(end, offsetBy: 2, limitedBy: data.endIndex) ?? data.endIndex
        }
        return result
    }
}
