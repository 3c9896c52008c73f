import Foundation
@testable import PositiveListServer
import Synchronization
import Testing
import TracerTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// Runs the built `tracer-server` against a fixture's data directory.
enum ServerCLI {
    /// The directory of the running test binary, where SwiftPM also puts the executables.
    static let productsDirectory: String = {
        var url = URL(fileURLWithPath: (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0])
        while url.pathComponents.contains(where: { $0.hasSuffix(".xctest") }) && url.pathComponents.count > 1 { url.deleteLastPathComponent() }
        return url.path
    }()

    static func executable() throws -> String {
        let path = productsDirectory + "/tracer-server"
        guard FileManager.default.isExecutableFile(atPath: path) else {
            throw HarnessFailure(description: "tracer-server is not built in \(productsDirectory); run `swift build --build-tests` first.")
        }
        return path
    }

    /// `tracer-server` with `arguments` on the fixture's data directory, not started.
    static func process(_ arguments: [String], fixture: ServerFixture, environment extra: [String: String] = [:]) throws -> Process {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: try executable())
        process.arguments = arguments
        var environment = ProcessInfo.processInfo.environment
        environment["TRACER_SERVER_DATA_DIR"] = fixture.paths.dataDirectory
        environment.removeValue(forKey: "TRACER_SERVER_CONFIG")
        environment.removeValue(forKey: "TRACER_SERVER_KEY")
        // A setting in the test runner's environment would override the fixture's file.
        for variable in ServerSettingRegistry.all.compactMap(\.environmentVariable) { environment.removeValue(forKey: variable) }
        environment.merge(extra) { _, given in given }
        process.environment = environment
        return process
    }

    static func start(
        _ arguments: [String], fixture: ServerFixture, stdout: Pipe? = nil, stderr: Pipe? = nil, environment extra: [String: String] = [:]
    ) throws -> Process {
        let process = try process(arguments, fixture: fixture, environment: extra)
        process.standardOutput = stdout ?? FileHandle.nullDevice
        process.standardError = stderr ?? FileHandle.nullDevice
        try process.run()
        return process
    }

    /// `serve` on 127.0.0.1:`port` with at most `openFiles` descriptors (`ulimit -n`, as
    /// systemd's LimitNOFILE sets it), once it listens.
    /// - Parameter stderr: a `Pipe` or `FileHandle` for the server's log.
    static func serveWithOpenFileLimit(
        _ openFiles: Int, port: Int, fixture: ServerFixture, stderr: Any? = nil, environment: [String: String] = [:]
    ) async throws -> Process {
        // The fixture's environment, with a shell in front to set the limit.
        let process = try self.process(
            ["-c", "ulimit -n \(openFiles) && exec \"$0\" serve --bind 127.0.0.1:\(port)", try executable()], fixture: fixture,
            environment: environment)
        process.executableURL = URL(fileURLWithPath: "/bin/sh")
        process.standardOutput = FileHandle.nullDevice
        process.standardError = stderr ?? FileHandle.nullDevice
        try process.run()
        do {
            try await LoopbackPort.waitUntilListening(port, orExit: process)
        } catch {
            process.terminate()
            throw error
        }
        return process
    }

    /// User and system CPU seconds `pid` has used (/proc/PID/stat).
    static func cpuSeconds(_ pid: Int32) -> Double {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
              let afterName = stat.range(of: ") ")
        else { return 0 }
        let fields = stat[afterName.upperBound...].split(separator: " ")
        // Fields 14 and 15 of the line (utime, stime), counted after the name (field 2).
        guard fields.count > 12, let user = Double(fields[11]), let system = Double(fields[12]) else { return 0 }
        return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
    }

    static func run(_ arguments: [String], fixture: ServerFixture, environment: [String: String] = [:]) throws -> ProcessResult {
        try ProcessResult.collect(try process(arguments, fixture: fixture, environment: environment))
    }

    /// `run`, ended with SIGTERM if it still runs after `timeout` (a `serve` expected to refuse
    /// to start that started after all): then a ``HarnessFailure`` quoting what it wrote.
    static func run(_ arguments: [String], fixture: ServerFixture, environment: [String: String] = [:], timeout: Duration) throws -> ProcessResult {
        let process = try process(arguments, fixture: fixture, environment: environment)
        let timedOut = Mutex(false)
        nonisolated(unsafe) let running = process
        let timer = DispatchWorkItem {
            timedOut.withLock { $0 = running.isRunning }
            if running.isRunning { running.terminate() }
        }
        DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(Int(timeout.components.seconds * 1_000)), execute: timer)
        let result = try ProcessResult.collect(process)
        timer.cancel()
        if timedOut.withLock({ $0 }) {
            throw HarnessFailure(description: "tracer-server \(arguments.joined(separator: " ")) still ran after \(timeout): \(result)")
        }
        return result
    }
}

extension ServerFixture {
    /// Writes the fixture's authorities to DATA_DIR/config.json for child processes.
    func writeConfiguration(extra: String = "") throws {
        let text = """
            {"authorities": [{"name": "Health Authority A", "token": "\(Self.authorityToken)"},
                             {"name": "Health Authority B", "token": "\(Self.otherAuthorityToken)"}]\(extra)}
            """
        try text.write(toFile: paths.configuration, atomically: true, encoding: .utf8)
    }
}

/// A bare HTTP/1.1 exchange over a socket, for requests a well-behaved client cannot send
/// (a body shorter than its Content-Length).
enum RawHTTP {
    static func exchange(port: Int, sending request: String, timeoutSeconds: Int = 15) async throws -> String {
        let connection = try RawConnection(port: port)
        connection.send(request)
        return try await connection.receiveResponse(timeout: .seconds(timeoutSeconds)).text
    }
}

/// One TCP connection to 127.0.0.1 driven byte by byte, for what HTTP clients will not do:
/// malformed framing, a head sent a byte at a time, many requests released at one instant.
/// Reads never block a thread (the server under test shares the process's few), they poll.
final class RawConnection: Sendable {
    let descriptor: Int32

    struct Response {
        var text: String
        /// 0 when nothing that looks like a status line arrived.
        var status: Int {
            let parts = text.split(separator: " ", maxSplits: 2)
            return parts.count >= 2 && parts[0].hasPrefix("HTTP/1.") ? Int(parts[1]) ?? 0 : 0
        }
        var head: String { text.components(separatedBy: "\r\n\r\n").first ?? "" }
        var body: String { text.range(of: "\r\n\r\n").map { String(text[$0.upperBound...]) } ?? "" }

        /// A header's value (name compared without case), or nil.
        func header(_ name: String) -> String? {
            for line in head.components(separatedBy: "\r\n").dropFirst() {
                let parts = line.split(separator: ":", maxSplits: 1)
                if parts.count == 2, parts[0].lowercased() == name.lowercased() { return parts[1].trimmingCharacters(in: .whitespaces) }
            }
            return nil
        }

        /// The `error` code of a JSON error body.
        var apiError: String? {
            (try? JSONSerialization.jsonObject(with: Data(body.utf8)) as? [String: String])?["error"]
        }
    }

    init(port: Int) throws {
        descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard LoopbackPort.connectSocket(descriptor, to: port) else {
            Glibc.close(descriptor)
            throw HarnessFailure(description: "cannot connect to 127.0.0.1:\(port)")
        }
    }

    /// A connection from `source`, another loopback address (127.0.0.0/8), so that one test
    /// can be many clients to the server.
    init(port: Int, from source: String) throws {
        descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var local = sockaddr_in()
        local.sin_family = sa_family_t(AF_INET)
        local.sin_addr.s_addr = inet_addr(source)
        let bound = withUnsafePointer(to: &local) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
        }
        guard bound, LoopbackPort.connectSocket(descriptor, to: port) else {
            Glibc.close(descriptor)
            throw HarnessFailure(description: "cannot connect from \(source) to 127.0.0.1:\(port)")
        }
    }

    deinit { Glibc.close(descriptor) }

    /// Sends all of `text`; false once the server has closed the connection.
    @discardableResult
    func send(_ text: String) -> Bool { LoopbackPort.send(text, on: descriptor) }

    /// Ends the connection as a client that leaves does.
    func leave() { shutdown(descriptor, Int32(SHUT_RDWR)) }

    /// One response: its head, and as much body as its Content-Length announces (or what came
    /// before the server closed). Throws when nothing complete came within `timeout`.
    func receiveResponse(timeout: Duration = .seconds(15)) async throws -> Response {
        let deadline = ContinuousClock.now + timeout
        var received: [UInt8] = []
        while true {
            let text = String(decoding: received, as: UTF8.self)
            if let end = text.range(of: "\r\n\r\n") {
                let response = Response(text: text)
                let announced = response.header("content-length").flatMap(Int.init) ?? 0
                if text[end.upperBound...].utf8.count >= announced { return response }
            }
            switch readAvailable() {
            case .bytes(let bytes): received += bytes
            case .closed:
                guard !received.isEmpty else { throw HarnessFailure(description: "the server closed the connection without answering") }
                return Response(text: String(decoding: received, as: UTF8.self))
            case .nothingYet:
                guard ContinuousClock.now < deadline else {
                    throw HarnessFailure(description: "no whole response within \(timeout); got \(received.count) bytes: \(text.prefix(200))")
                }
                try await Task.sleep(for: .milliseconds(5))
            }
        }
    }

    /// True once the server has closed the connection (whatever it sent before is skipped);
    /// false if it is still open after `timeout`.
    func waitForClose(within timeout: Duration) async throws -> Bool {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if case .closed = readAvailable() { return true }
            try await Task.sleep(for: .milliseconds(20))
        }
        return false
    }

    private enum ReadOutcome {
        case bytes([UInt8])
        case closed
        case nothingYet
    }

    private func readAvailable() -> ReadOutcome {
        var buffer = [UInt8](repeating: 0, count: 65_536)
        let count = buffer.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
        if count > 0 { return .bytes(Array(buffer[0..<count])) }
        if count == 0 { return .closed }
        return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? .nothingYet : .closed
    }
}
