import Foundation
import Testing
import TracerTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// What a finished child process did.
struct ProcessResult: CustomStringConvertible {
    var exitCode: Int32
    var stdout: String
    var stderr: String

    var description: String { "exit \(exitCode)\n--- stdout ---\n\(stdout.prefix(4000))\n--- stderr ---\n\(stderr.prefix(4000))" }
}

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

    static func start(_ arguments: [String], fixture: ServerFixture, stdout: Pipe? = nil, stderr: Pipe? = nil) throws -> Process {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: try executable())
        process.arguments = arguments
        var environment = ProcessInfo.processInfo.environment
        environment["TRACER_SERVER_DATA_DIR"] = fixture.paths.dataDirectory
        environment.removeValue(forKey: "TRACER_SERVER_CONFIG")
        environment.removeValue(forKey: "TRACER_SERVER_KEY")
        process.environment = environment
        process.standardOutput = stdout ?? FileHandle.nullDevice
        process.standardError = stderr ?? FileHandle.nullDevice
        try process.run()
        return process
    }

    static func run(_ arguments: [String], fixture: ServerFixture) throws -> ProcessResult {
        let out = Pipe()
        let err = Pipe()
        let process = try start(arguments, fixture: fixture, stdout: out, stderr: err)
        // Read before waiting, so a full pipe cannot block the child.
        let stdout = out.fileHandleForReading.readDataToEndOfFile()
        let stderr = err.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return ProcessResult(
            exitCode: process.terminationStatus, stdout: String(decoding: stdout, as: UTF8.self), stderr: String(decoding: stderr, as: UTF8.self))
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
    static func exchange(port: Int, sending request: String, timeoutSeconds: Int = 15) throws -> String {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(descriptor) }
        var timeout = timeval(tv_sec: timeoutSeconds, tv_usec: 0)
        setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        guard LoopbackPort.connectSocket(descriptor, to: port) else { throw HarnessFailure(description: "cannot connect to 127.0.0.1:\(port)") }
        let bytes = Array(request.utf8)
        _ = bytes.withUnsafeBytes { send(descriptor, $0.baseAddress, $0.count, 0) }
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4_096)
        while true {
            let count = buffer.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
            guard count > 0 else { break }
            received.append(contentsOf: buffer[0..<count])
            // One response is enough: stop once its JSON body has arrived.
            if let text = String(bytes: received, encoding: .utf8), let end = text.range(of: "\r\n\r\n"), text[end.upperBound...].contains("}") {
                break
            }
        }
        return String(decoding: received, as: UTF8.self)
    }
}
