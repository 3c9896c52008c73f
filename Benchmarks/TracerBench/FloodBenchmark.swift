import Foundation
import PositiveListServer
import TracerCore
import TracerTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// Issue 25's figures: a `tracer-server serve` process (the one at `serverPath`, so that the
/// same run can measure a build of an older commit) with `openFiles` descriptors, flooded from
/// 127.0.0.0/8 with keep-alive connections that each send `GET /healthz` every few seconds and
/// reconnect when closed, as the issue's client did. Meanwhile one client on 127.0.0.1 asks
/// `/healthz` (p50/p99, failures) and uploads histories (success rate); the server's RSS and
/// CPU are read from /proc. Then the server's CPU per megabyte of a chunked body sent in
/// one-byte chunks, to an upload and to `/healthz`.
struct FloodBenchmark {
    let directory: String
    let serverPath: String
    let openFiles: Int
    let connections: Int
    let seconds: Int
    static let token = "benchmark-authority-token-0123456789"

    private func say(_ text: String) {
        FileHandle.standardOutput.write(Data((text + "\n").utf8))
    }

    func run() async throws {
        say("# Connection flood benchmark (\(Date()))")
        say("server: \(serverPath); ulimit -n \(openFiles); \(connections) flood connections; \(seconds) s per case; 127.0.0.0/8")
        say("\n| flood | /healthz p50 | /healthz p99 | /healthz failed | uploads stored | server RSS | server CPU | server alive |")
        say("| --- | --- | --- | --- | --- | --- | --- | --- |")
        for (name, sources) in [("none", 0), ("\(connections) from 1 address", 1), ("\(connections) from 50 addresses", 50)] {
            let server = try await ServerUnderTest(serverPath: serverPath, openFiles: openFiles, directory: directory + "/flood-\(sources)")
            defer { server.stop() }
            let flood = sources == 0 ? nil : Flood(port: server.port, connections: connections, sources: sources)
            flood?.start()
            // Let the flood reach its size before measuring.
            try await Task.sleep(for: .seconds(sources == 0 ? 0 : 3))
            let cpuBefore = server.cpuSeconds()
            let measured = try await measureClient(port: server.port)
            let cpu = (server.cpuSeconds() - cpuBefore) / Double(seconds) * 100
            let rss = server.residentMegabytes()
            let alive = server.isRunning
            flood?.stop()
            // A server that died has no RSS or CPU to read.
            let usage = alive ? String(format: "%.0f MB | %.0f %%", rss, cpu) : "- | -"
            say(String(
                format: "| %@ | %.1f ms | %.1f ms | %d of %d | %d of %d | %@ | %@ |", name, measured.p50, measured.p99,
                measured.healthzFailed, measured.healthzAsked, measured.uploadsStored, measured.uploadsTried, usage, server.fate))
        }

        say("\n| chunked body, 300,000 one-byte chunks (1.8 MB) | server CPU | CPU per MB | answer |")
        say("| --- | --- | --- | --- |")
        let server = try await ServerUnderTest(serverPath: serverPath, openFiles: openFiles, directory: directory + "/chunks")
        defer { server.stop() }
        for (name, head) in [
            ("POST /v1/histories (authority)",
             "POST /v1/histories HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer \(Self.token)\r\nContent-Type: application/json\r\n"),
            ("POST /v1/histories (no credentials)", "POST /v1/histories HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"),
            ("GET /healthz", "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n"),
        ] {
            let before = server.cpuSeconds()
            let answer = oneByteChunks(port: server.port, head: head, count: 300_000)
            try await Task.sleep(for: .milliseconds(200))
            let cpu = server.cpuSeconds() - before
            say(String(format: "| %@ | %.2f s | %.2f s | %@ |", name, cpu, cpu / 1.8, answer))
        }
    }

    private struct ClientFigures {
        var p50 = 0.0
        var p99 = 0.0
        var healthzAsked = 0
        var healthzFailed = 0
        var uploadsTried = 0
        var uploadsStored = 0
    }

    /// `/healthz` every 20 ms and an upload every 500 ms, each on a new connection from
    /// 127.0.0.1 with a 5 s timeout (a failure counts as 5 s).
    private func measureClient(port: Int) async throws -> ClientFigures {
        var figures = ClientFigures()
        var latencies: [Double] = []
        let end = ContinuousClock.now + .seconds(seconds)
        var nextUpload = ContinuousClock.now
        var seed: UInt64 = UInt64(Date().timeIntervalSince1970)
        while ContinuousClock.now < end {
            let start = ContinuousClock.now
            let status = BlockingExchange.status(port: port, request: "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
            let elapsed = (ContinuousClock.now - start).seconds * 1_000
            figures.healthzAsked += 1
            if status == 200 { latencies.append(elapsed) } else {
                figures.healthzFailed += 1
                latencies.append(5_000)
            }
            if ContinuousClock.now >= nextUpload {
                nextUpload = ContinuousClock.now + .milliseconds(500)
                seed += 1
                figures.uploadsTried += 1
                if BlockingExchange.status(port: port, request: Self.upload(seed: seed)) == 201 { figures.uploadsStored += 1 }
            }
            try await Task.sleep(for: .milliseconds(20))
        }
        let sorted = latencies.sorted()
        figures.p50 = sorted[sorted.count / 2]
        figures.p99 = sorted[min(sorted.count - 1, sorted.count * 99 / 100)]
        return figures
    }

    /// A node-sized history (96 ids, one day) of past windows, so it is valid whenever run.
    static func upload(seed: UInt64) -> String {
        var generator = SystemRandomNumberGenerator()
        let now = UnixSeconds(Date().timeIntervalSince1970)
        let end = now - now % 900 - 900
        let ids = (0..<96).map { position -> String in
            let until = end - Int64(position) * 900
            return "{\"id\":\"\(UserID.random(using: &generator).hex)\",\"validFrom\":\(until - 900),\"validUntil\":\(until)}"
        }
        let body = "{\"ids\":[\(ids.joined(separator: ","))]}"
        return "POST /v1/histories HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer \(token)\r\nContent-Type: application/json\r\n"
            + "Idempotency-Key: bench-\(seed)\r\nConnection: close\r\nContent-Length: \(body.utf8.count)\r\n\r\n\(body)"
    }

    /// Sends `head` and `count` one-byte chunks as fast as the server takes them; the status line
    /// of the answer, or what happened instead.
    private func oneByteChunks(port: Int, head: String, count: Int) -> String {
        let descriptor = BlockingExchange.connect(port: port, from: "127.0.0.1")
        guard descriptor >= 0 else { return "no connection" }
        defer { close(descriptor) }
        _ = LoopbackPort.send(head + "Transfer-Encoding: chunked\r\n\r\n", on: descriptor)
        let chunks = String(repeating: "1\r\na\r\n", count: count) + "0\r\n\r\n"
        let sent = LoopbackPort.send(chunks, on: descriptor)
        let answer = BlockingExchange.readAll(descriptor, timeoutSeconds: 10)
        let status = answer.split(separator: "\r\n").first.map(String.init) ?? "no answer"
        return sent ? status : status + " (the server stopped reading)"
    }
}

/// `tracer-server serve` in its own data directory with a benchmark authority, under `ulimit -n`.
final class ServerUnderTest {
    let process: Process
    let port: Int

    init(serverPath: String, openFiles: Int, directory: String) async throws {
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        try "{\"authorities\": [{\"name\": \"Bench\", \"token\": \"\(FloodBenchmark.token)\"}], \"failedAttemptsPerMinute\": 1000}"
            .write(toFile: directory + "/config.json", atomically: true, encoding: .utf8)
        try ProcessResult.run(serverPath, ["keygen", "--data-dir", directory]).succeeded("tracer-server keygen")
        port = try LoopbackPort.free()
        process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/sh")
        process.arguments = ["-c", "ulimit -n \(openFiles) && exec \"$0\" serve --data-dir \"$1\" --bind 127.0.0.1:\(port)", serverPath, directory]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        try await LoopbackPort.waitUntilListening(port, orExit: process)
    }

    var isRunning: Bool { process.isRunning }

    /// "yes" while it runs; else how it ended.
    var fate: String {
        if process.isRunning { return "yes" }
        return process.terminationReason == .uncaughtSignal
            ? "no: killed by signal \(process.terminationStatus)" : "no: exited with status \(process.terminationStatus)"
    }

    func stop() {
        if process.isRunning {
            process.terminate()
            process.waitUntilExit()
        }
    }

    func cpuSeconds() -> Double { ProcessFigures.cpuSeconds(process.processIdentifier) }

    func residentMegabytes() -> Double { Double(ProcessFigures.residentBytes(process.processIdentifier)) / 1_048_576 }
}

/// Keep-alive connections from `sources` loopback addresses (127.0.2.1...), each sending
/// `GET /healthz` every 5 s and reading what comes back, reconnecting 1 s after the server
/// closes one (a flood that holds its place, not a connection-rate attack). Runs on its own
/// thread with non-blocking sockets.
final class Flood: @unchecked Sendable {
    // @unchecked Sendable: `running` is the only state shared with the thread, behind a lock;
    // the sockets are the thread's alone.
    private let port: Int
    private let connections: Int
    private let sources: Int
    private let lock = NSLock()
    private var running = true
    private var thread: Thread?

    init(port: Int, connections: Int, sources: Int) {
        self.port = port
        self.connections = connections
        self.sources = sources
    }

    private var isRunning: Bool { lock.withLock { running } }

    func start() {
        let thread = Thread { [self] in loop() }
        self.thread = thread
        thread.start()
    }

    func stop() {
        lock.withLock { running = false }
        while thread?.isFinished == false { Thread.sleep(forTimeInterval: 0.05) }
    }

    private func loop() {
        let request = Array("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".utf8)
        var sockets = [Int32](repeating: -1, count: connections)
        var nextSend = [Date](repeating: .distantPast, count: connections)
        var nextConnect = [Date](repeating: .distantPast, count: connections)
        var buffer = [UInt8](repeating: 0, count: 4_096)
        while isRunning {
            let now = Date()
            for slot in 0..<connections {
                if sockets[slot] < 0 {
                    guard now >= nextConnect[slot] else { continue }
                    sockets[slot] = BlockingExchange.connect(port: port, from: "127.0.2.\(slot % sources + 1)", nonBlocking: true)
                    // Spread the requests over the period.
                    nextSend[slot] = now.addingTimeInterval(Double(slot % 100) / 20)
                    continue
                }
                let descriptor = sockets[slot]
                var closed = false
                while true {
                    let count = buffer.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
                    if count > 0 { continue }
                    if count == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != ENOTCONN) { closed = true }
                    break
                }
                if !closed, now >= nextSend[slot] {
                    let sent = request.withUnsafeBytes { send(descriptor, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT | MSG_NOSIGNAL)) }
                    if sent < 0, errno != EAGAIN, errno != ENOTCONN, errno != EINPROGRESS { closed = true }
                    nextSend[slot] = now.addingTimeInterval(5)
                }
                if closed {
                    close(descriptor)
                    sockets[slot] = -1
                    nextConnect[slot] = now.addingTimeInterval(1)
                }
            }
            // The client shares the machine's cores with the server: it polls 5 times a second.
            Thread.sleep(forTimeInterval: 0.2)
        }
        for descriptor in sockets where descriptor >= 0 { close(descriptor) }
    }
}

/// Plain blocking sockets with timeouts, for the client side of the benchmark.
enum BlockingExchange {
    static func connect(port: Int, from source: String, nonBlocking: Bool = false) -> Int32 {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { return -1 }
        var local = sockaddr_in()
        local.sin_family = sa_family_t(AF_INET)
        local.sin_addr.s_addr = inet_addr(source)
        var remote = sockaddr_in()
        remote.sin_family = sa_family_t(AF_INET)
        remote.sin_addr.s_addr = inet_addr("127.0.0.1")
        remote.sin_port = in_port_t(UInt16(port).bigEndian)
        var timeout = timeval(tv_sec: 5, tv_usec: 0)
        setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(descriptor, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        if nonBlocking { _ = fcntl(descriptor, F_SETFL, fcntl(descriptor, F_GETFL) | O_NONBLOCK) }
        let bound = withUnsafePointer(to: &local) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
        }
        let connected = withUnsafePointer(to: &remote) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
        }
        guard bound, connected || (nonBlocking && errno == EINPROGRESS) else {
            close(descriptor)
            return -1
        }
        return descriptor
    }

    /// What arrives until the server closes, or nothing more comes for `timeoutSeconds`.
    static func readAll(_ descriptor: Int32, timeoutSeconds: Int) -> String {
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65_536)
        let deadline = Date().addingTimeInterval(Double(timeoutSeconds))
        while Date() < deadline {
            let count = buffer.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
            if count <= 0 { break }
            received += buffer[0..<count]
        }
        return String(decoding: received, as: UTF8.self)
    }

    /// The status of the answer to `request` on a new connection from 127.0.0.1; 0 on failure.
    static func status(port: Int, request: String) -> Int {
        let descriptor = connect(port: port, from: "127.0.0.1")
        guard descriptor >= 0 else { return 0 }
        defer { close(descriptor) }
        guard LoopbackPort.send(request, on: descriptor) else { return 0 }
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4_096)
        while !received.contains(10) {
            let count = buffer.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
            if count <= 0 { return 0 }
            received += buffer[0..<count]
        }
        let parts = String(decoding: received, as: UTF8.self).split(separator: " ", maxSplits: 2)
        return parts.count >= 2 ? Int(parts[1]) ?? 0 : 0
    }
}
