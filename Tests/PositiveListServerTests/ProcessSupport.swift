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
    static func executable() throws -> String { try Products.path(of: "tracer-server") }

    /// `tracer-server` with `arguments` on the fixture's data directory, not started; the
    /// runner's variables whose names start with one of `dropping` are left out (`extra` is
    /// applied after).
    static func process(
        _ arguments: [String], fixture: ServerFixture, environment extra: [String: String] = [:], dropping prefixes: [String] = []
    ) throws -> Process {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: try executable())
        process.arguments = arguments
        var environment = ProcessInfo.processInfo.environment.filter { variable in !prefixes.contains { variable.key.hasPrefix($0) } }
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

    static func run(_ arguments: [String], fixture: ServerFixture, environment: [String: String] = [:], dropping prefixes: [String] = []) throws -> ProcessResult {
        try ProcessResult.collect(try process(arguments, fixture: fixture, environment: environment, dropping: prefixes))
    }

    /// `run`, killed if it still runs after `timeout` (a `serve` expected to refuse to start that
    /// started after all): then a ``HarnessFailure`` quoting what it wrote.
    static func run(_ arguments: [String], fixture: ServerFixture, environment: [String: String] = [:], timeout: Duration) throws -> ProcessResult {
        try ProcessResult.collect(try process(arguments, fixture: fixture, environment: environment), timeout: timeout)
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
