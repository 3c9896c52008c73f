import Foundation
import TestTiers

/// Tests/Support/s3/faulty_proxy.py as a child process: a TCP proxy in front of moto that cuts or
/// stalls connections part-way through uploads, in the mode the test sets. It exits when its stdin
/// closes, so it cannot outlive a crashed test; `stop()` ends it.
public final class FaultyProxy {
    public enum Mode: String, Sendable {
        /// Everything forwarded.
        case pass
        /// Every PUT cut after half its body.
        case cut
        /// PUTs in turn cut, passed, answered but the answer lost, passed; the second stalled.
        case flaky
    }

    /// One connection the proxy saw, once it ended.
    public struct Connection: Equatable, Sendable {
        public let number: Int
        public let method: String
        public let path: String
        /// pass, cut, drop or stall.
        public let fault: String
        /// The store's answer ("-": none).
        public let status: String
    }

    public let port: Int
    private let process: Process
    private let input: Pipe
    private let outputPath: String

    static let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Support/s3/faulty_proxy.py").path

    public init(targetPort: Int) async throws {
        outputPath = NSTemporaryDirectory() + "/faulty-proxy-" + UUID().uuidString + ".txt"
        _ = FileManager.default.createFile(atPath: outputPath, contents: nil)
        process = Process()
        input = Pipe()
        // Standard library only: moto's Python if set, else the system's.
        let python = ProcessInfo.processInfo.environment[MotoS3Server.pythonEnvironmentVariable] ?? "/usr/bin/python3"
        process.executableURL = URL(fileURLWithPath: python)
        process.arguments = [Self.script, String(targetPort)]
        process.standardInput = input
        process.standardOutput = try FileHandle(forWritingTo: URL(fileURLWithPath: outputPath))
        process.standardError = FileHandle.standardError
        try process.run()
        var port: Int?
        let outputPath = outputPath
        _ = await eventually(timeout: .seconds(20), every: .milliseconds(50)) {
            let text = (try? String(contentsOfFile: outputPath, encoding: .utf8)) ?? ""
            port = text.split(separator: "\n").first { $0.hasPrefix("READY ") }.flatMap { Int($0.dropFirst("READY ".count)) }
            return port != nil
        }
        guard let port else {
            try? input.fileHandleForWriting.close()
            process.terminate()
            process.waitUntilExit()
            throw HarnessFailure(description: "the faulty proxy did not start (\(Self.script))")
        }
        self.port = port
    }

    deinit { stop() }

    public var endpoint: String { "http://127.0.0.1:\(port)" }

    public var output: String { (try? String(contentsOfFile: outputPath, encoding: .utf8)) ?? "" }

    /// Sets the mode and waits until the proxy says it took it.
    public func set(_ mode: Mode) async throws {
        let before = output.components(separatedBy: "MODE ").count
        input.fileHandleForWriting.write(Data((mode.rawValue + "\n").utf8))
        guard await eventually(timeout: .seconds(10), every: .milliseconds(20), { self.output.components(separatedBy: "MODE ").count > before }) else {
            throw HarnessFailure(description: "the faulty proxy did not take mode \(mode.rawValue): \(output.suffix(1_000))")
        }
    }

    /// The connections accepted since the proxy took `mode` the last time (all if never), once
    /// ended. One accepted before the change is left out even if it ended after: its fault was the
    /// old mode's.
    public func connections(since mode: Mode? = nil) -> [Connection] {
        let lines = output.split(separator: "\n").map { $0.split(separator: " ").map(String.init) }
        var acceptedBefore = 0
        if let mode, let change = lines.last(where: { $0.count == 3 && $0[0] == "MODE" && $0[1] == mode.rawValue }) {
            acceptedBefore = Int(change[2]) ?? 0
        }
        return lines.compactMap { fields in
            guard fields.count == 6, fields[0] == "CONN", let number = Int(fields[1]), number > acceptedBefore else { return nil }
            return Connection(number: number, method: fields[2], path: fields[3], fault: fields[4], status: fields[5])
        }
    }

    public func stop() {
        try? input.fileHandleForWriting.close()
        if process.isRunning {
            _ = eventuallyBlocking(timeout: .seconds(5), every: .milliseconds(20)) { !self.process.isRunning }
            if process.isRunning { process.terminate() }
        }
        process.waitUntilExit()
        try? FileManager.default.removeItem(atPath: outputPath)
    }
}
