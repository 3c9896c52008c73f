import Foundation
import PositiveListServer
import Synchronization
import Testing
import TracerTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// Runs the built `tracer-server` against a fixture's data directory.
package enum ServerCLI {
    package static func executable() throws -> String { try Products.path(of: "tracer-server") }

    /// `tracer-server` with `arguments` on the fixture's data directory, not started, through
    /// `Products.server`: the runner's `TRACER_SERVER_` variables are left out, and so are those
    /// whose names start with one of `dropping` (`extra` is applied after).
    package static func process(
        _ arguments: [String], fixture: ServerFixture, environment extra: [String: String] = [:], dropping prefixes: [String] = []
    ) throws -> Process {
        try Products.server(arguments, dataDirectory: fixture.paths.dataDirectory, dropping: prefixes, overrides: extra)
    }

    package static func start(
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
    package static func serveWithOpenFileLimit(
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

    package static func run(_ arguments: [String], fixture: ServerFixture, environment: [String: String] = [:], dropping prefixes: [String] = []) throws -> ProcessResult {
        try ProcessResult.collect(try process(arguments, fixture: fixture, environment: environment, dropping: prefixes))
    }

    /// `run`, killed if it still runs after `timeout` (a `serve` expected to refuse to start that
    /// started after all): then a ``HarnessFailure`` quoting what it wrote.
    package static func run(_ arguments: [String], fixture: ServerFixture, environment: [String: String] = [:], timeout: Duration) throws -> ProcessResult {
        try ProcessResult.collect(try process(arguments, fixture: fixture, environment: environment), timeout: timeout)
    }
}

package extension ServerFixture {
    /// Writes the fixture's authorities to DATA_DIR/config.json for child processes.
    func writeConfiguration(extra: String = "") throws {
        let text = """
            {"authorities": [{"name": "Health Authority A", "token": "\(Self.authorityToken)"},
                             {"name": "Health Authority B", "token": "\(Self.otherAuthorityToken)"}]\(extra)}
            """
        try text.write(toFile: paths.configuration, atomically: true, encoding: .utf8)
    }
}

/// A `serve` process's log file: the lines it logs are the events a test waits for.
package final class ServerLog: Sendable {
    package let path = NSTemporaryDirectory() + "/tracer-serve-" + UUID().uuidString + ".log"
    package let handle: FileHandle

    package init() throws {
        _ = FileManager.default.createFile(atPath: path, contents: nil)
        handle = try FileHandle(forWritingTo: URL(fileURLWithPath: path))
    }

    package var text: String { (try? String(contentsOfFile: path, encoding: .utf8)) ?? "" }

    package func remove() {
        try? handle.close()
        try? FileManager.default.removeItem(atPath: path)
    }
}

/// A bare HTTP/1.1 exchange over a socket, for requests a well-behaved client cannot send
/// (a body shorter than its Content-Length).
package enum RawHTTP {
    package static func exchange(port: Int, sending request: String, timeoutSeconds: Int = 15) async throws -> String {
        let connection = try RawConnection(port: port)
        connection.send(request)
        return try await connection.receiveResponse(timeout: .seconds(timeoutSeconds)).text
    }
}
