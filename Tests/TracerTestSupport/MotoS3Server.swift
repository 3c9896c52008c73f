import Foundation
import TestTiers
#if canImport(Glibc)
import Glibc
#endif

/// moto's in-memory S3 (Tests/Support/s3/moto_s3.py) as a child process on a free port of
/// 127.0.0.1, for the object-store tests and benchmark: requests must be SigV4-signed with the
/// credentials it prints, anonymous GETs of objects are allowed by a public-read bucket policy.
/// It exits when its stdin closes, so it cannot outlive a crashed test process; `stop()` ends it.
///
/// Its Python is $TRACER_MOTO_PYTHON, else .venv-bumble/bin/python (scripts/setup installs
/// moto[server] there). Its stderr (every request) goes to a log file, removed by `stop()`
/// unless $TRACER_MOTO_LOG_DIR names a directory to keep it in; `logTail()` shows the end of it
/// for a failing test's message.
public final class MotoS3Server {
    public static let pythonEnvironmentVariable = "TRACER_MOTO_PYTHON"
    public static let logDirectoryEnvironmentVariable = "TRACER_MOTO_LOG_DIR"

    public let port: Int
    public let accessKeyID: String
    public let secretAccessKey: String
    /// A role's temporary credentials, as STS AssumeRole gives them: valid only with the token.
    public let temporaryAccessKeyID: String
    public let temporarySecretAccessKey: String
    public let sessionToken: String
    public let logDirectory: String
    private let keepLogs: Bool
    private let process: Process
    private let input: Pipe

    public var endpoint: String { "http://127.0.0.1:\(port)" }

    static let repositoryRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    static let script = repositoryRoot.appendingPathComponent("Tests/Support/s3/moto_s3.py").path

    /// Starts moto with `buckets` created (each with the public-read policy). A port taken
    /// between the probe and moto's bind shows as a failed start, which is retried.
    /// `authenticate: false` accepts any signature (see moto_s3.py's --no-auth).
    public init(buckets: [String], authenticate: Bool = true) async throws {
        try RequiredTool.moto.require()
        let candidates = [ProcessInfo.processInfo.environment[Self.pythonEnvironmentVariable],
                          Self.repositoryRoot.appendingPathComponent(".venv-bumble/bin/python").path].compactMap { $0 }
        guard let python = candidates.first(where: { FileManager.default.isExecutableFile(atPath: $0) }) else {
            throw HarnessFailure(description: "No Python at \(candidates.joined(separator: " or ")); run ./scripts/setup (it installs moto[server] into .venv-bumble) or set \(Self.pythonEnvironmentVariable).")
        }
        let keptBase = ProcessInfo.processInfo.environment[Self.logDirectoryEnvironmentVariable].flatMap { $0.isEmpty ? nil : $0 }
        keepLogs = keptBase != nil
        logDirectory = (keptBase ?? NSTemporaryDirectory()) + "/moto-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: logDirectory, withIntermediateDirectories: true)
        var failures: [String] = []
        for attempt in 1...3 {
            let port = try LoopbackPort.free()
            let process = Process()
            let input = Pipe()
            let outputPath = logDirectory + "/stdout-\(attempt).txt"
            let errorPath = logDirectory + "/moto-\(attempt).log"
            _ = FileManager.default.createFile(atPath: outputPath, contents: nil)
            _ = FileManager.default.createFile(atPath: errorPath, contents: nil)
            process.executableURL = URL(fileURLWithPath: python)
            process.arguments = [Self.script] + (authenticate ? [] : ["--no-auth"]) + [String(port)] + buckets
            process.standardInput = input
            process.standardOutput = try FileHandle(forWritingTo: URL(fileURLWithPath: outputPath))
            process.standardError = try FileHandle(forWritingTo: URL(fileURLWithPath: errorPath))
            try process.run()
            // moto imports for a few seconds on a busy machine; its READY line follows the bind.
            let deadline = ContinuousClock.now + .seconds(60)
            while ContinuousClock.now < deadline, process.isRunning {
                let text = (try? String(contentsOfFile: outputPath, encoding: .utf8)) ?? ""
                if let line = text.split(separator: "\n").first(where: { $0.hasPrefix("READY ") }) {
                    let fields = line.split(separator: " ").map(String.init)
                    if fields.count == 7, Int(fields[1]) == port {
                        self.port = port
                        self.accessKeyID = fields[2]
                        self.secretAccessKey = fields[3]
                        self.temporaryAccessKeyID = fields[4]
                        self.temporarySecretAccessKey = fields[5]
                        self.sessionToken = fields[6]
                        self.process = process
                        self.input = input
                        return
                    }
                }
                try await Task.sleep(for: .milliseconds(100))
            }
            if process.isRunning { process.terminate() }
            process.waitUntilExit()
            let output = (try? String(contentsOfFile: outputPath, encoding: .utf8)) ?? ""
            if let missing = output.split(separator: "\n").first(where: { $0.hasPrefix("MISSING ") }) {
                throw try RequiredTool.missingToolError(
                    String(missing.dropFirst("MISSING ".count)) + " (or point \(Self.pythonEnvironmentVariable) at a Python that has it).")
            }
            let log = (try? String(contentsOfFile: errorPath, encoding: .utf8)) ?? ""
            failures.append("attempt \(attempt) on port \(port): exit status \(process.terminationStatus)\n" + String(log.suffix(2_000)))
        }
        throw HarnessFailure(description: "moto did not start (logs in \(logDirectory)):\n" + failures.joined(separator: "\n--- then ---\n"))
    }

    deinit { stop() }

    /// Takes the endpoint down (connections refused), keeping every bucket and object, until
    /// ``comeBack()``: an outage of the store (moto_s3.py, SIGUSR1).
    public func goDown() async throws {
        kill(process.processIdentifier, SIGUSR1)
        guard await eventually(timeout: .seconds(10), every: .milliseconds(50), { !LoopbackPort.isListening(self.port) }) else {
            throw HarnessFailure(description: "moto still answers on \(port) after SIGUSR1; its log: \(logTail())")
        }
    }

    /// Serves again on the same port, with what it held (SIGUSR2).
    public func comeBack() async throws {
        kill(process.processIdentifier, SIGUSR2)
        guard await eventually(timeout: .seconds(10), every: .milliseconds(50), { LoopbackPort.isListening(self.port) }) else {
            throw HarnessFailure(description: "moto did not answer on \(port) again after SIGUSR2; its log: \(logTail())")
        }
    }

    /// Closes moto's stdin (its signal to stop), waits for it, and removes the logs unless kept.
    public func stop() {
        try? input.fileHandleForWriting.close()
        if process.isRunning {
            _ = eventuallyBlocking(timeout: .seconds(5), every: .milliseconds(20)) { !process.isRunning }
            if process.isRunning { process.terminate() }
        }
        process.waitUntilExit()
        if !keepLogs { try? FileManager.default.removeItem(atPath: logDirectory) }
    }

    /// The last lines moto logged (its requests and tracebacks), for a failure message.
    public func logTail(_ characters: Int = 3_000) -> String {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: logDirectory)) ?? []
        let logs = names.filter { $0.hasSuffix(".log") }.sorted().compactMap { try? String(contentsOfFile: logDirectory + "/" + $0, encoding: .utf8) }
        return String(logs.joined(separator: "\n").suffix(characters))
    }
}
