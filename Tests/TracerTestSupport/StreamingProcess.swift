import Foundation
import Synchronization
import Testing
import TestTiers
#if canImport(Glibc)
import Glibc
#endif

/// Lines read from one of a child's outputs, filled by a reader thread.
final class LineBuffer: Sendable {
    private struct State {
        var lines: [String] = []
        var partial = Data()
        var finished = false
    }

    private let state = Mutex(State())

    func append(_ chunk: Data) {
        state.withLock { state in
            if chunk.isEmpty {
                if !state.partial.isEmpty {
                    state.lines.append(String(decoding: state.partial, as: UTF8.self))
                    state.partial = Data()
                }
                state.finished = true
                return
            }
            state.partial.append(chunk)
            while let newline = state.partial.firstIndex(of: UInt8(ascii: "\n")) {
                state.lines.append(String(decoding: state.partial[state.partial.startIndex..<newline], as: UTF8.self))
                state.partial = Data(state.partial[(newline + 1)...])
            }
        }
    }

    /// Appends everything `handle` yields until end of file, from a plain thread blocking in
    /// read(2) until the child's end of the pipe closes.
    func read(from handle: FileHandle) {
        Thread { [self] in
            while true {
                let chunk = handle.availableData
                append(chunk)
                if chunk.isEmpty { return }
            }
        }.start()
    }

    var lines: [String] { state.withLock { $0.lines } }
    var finished: Bool { state.withLock { $0.finished } }
    func contains(where condition: (String) -> Bool) -> Bool { state.withLock { $0.lines.contains(where: condition) } }
}

/// A long-running child (a `tracer run` node, `tracer-server serve`, the crash writer) whose
/// output the test reads line by line while it runs: its stdout, or with `readingLog` its log
/// on stderr. Used from one thread only (the test's); only the line buffer is shared with the
/// reader thread.
public final class StreamingProcess {
    private let process: Process
    private let buffer = LineBuffer()
    public let pid: Int32

    /// Reads the child's stdout. `standardErrorPath`: a file that receives the child's stderr
    /// (its logs), else the test's own.
    public convenience init(
        _ executable: String, _ arguments: [String], home: String, standardErrorPath: String? = nil,
        environment: [String: String] = [:]
    ) throws {
        let standardError: FileHandle
        if let standardErrorPath {
            _ = FileManager.default.createFile(atPath: standardErrorPath, contents: nil)
            standardError = try FileHandle(forWritingTo: URL(fileURLWithPath: standardErrorPath))
        } else {
            standardError = FileHandle.standardError
        }
        try self.init(
            Self.child(executable, arguments, home: home, environment: environment), readsStandardError: false, otherOutput: standardError)
    }

    /// A child whose log (stderr) the test reads; its stdout is discarded.
    public static func readingLog(
        _ executable: String, _ arguments: [String], home: String, environment: [String: String] = [:]
    ) throws -> StreamingProcess {
        try readingLog(of: child(executable, arguments, home: home, environment: environment))
    }

    /// `process`, prepared and not started (such as `Products.server`'s), started with its log
    /// (stderr) read by the test; its stdout is discarded.
    public static func readingLog(of process: Process) throws -> StreamingProcess {
        try StreamingProcess(process, readsStandardError: true, otherOutput: .nullDevice)
    }

    /// `executable` in `home` with the environment of ``Products/environment(home:overrides:)``.
    private static func child(_ executable: String, _ arguments: [String], home: String, environment: [String: String]) -> Process {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        process.environment = Products.environment(home: home, overrides: environment)
        process.currentDirectoryURL = URL(fileURLWithPath: home)
        return process
    }

    private init(_ process: Process, readsStandardError: Bool, otherOutput: FileHandle) throws {
        process.standardInput = FileHandle.nullDevice
        let pipe = Pipe()
        if readsStandardError {
            process.standardOutput = otherOutput
            process.standardError = pipe
        } else {
            process.standardOutput = pipe
            process.standardError = otherOutput
        }
        try process.run()
        self.process = process
        pid = process.processIdentifier
        buffer.read(from: pipe.fileHandleForReading)
    }

    public var lines: [String] { buffer.lines }

    public var isRunning: Bool { process.isRunning }

    /// The lines that are JSON objects (`--log-format json`), their values as text.
    public var entries: [[String: String]] {
        lines.compactMap { line in
            guard line.hasPrefix("{"),
                  let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]
            else { return nil }
            return object.compactMapValues { $0 as? String }
        }
    }

    public func entry(message: String) -> [String: String]? { entries.first { $0["message"] == message } }

    /// Waits until a line satisfies `condition` or the timeout passes; true when one did.
    public func waitForLine(timeout: Duration, where condition: (String) -> Bool) -> Bool {
        _ = eventuallyBlocking(timeout: timeout, every: .milliseconds(1)) {
            buffer.contains(where: condition) || (!process.isRunning && buffer.finished)
        }
        return buffer.contains(where: condition)
    }

    /// Waits for the child to exit and for its output to be read to the end; nil on timeout.
    public func waitForExit(timeout: Duration = .seconds(20)) -> (status: Int32, signaled: Bool)? {
        let deadline = ContinuousClock.now + timeout
        guard eventuallyBlocking(timeout: timeout, every: .milliseconds(1), { !process.isRunning }) else { return nil }
        process.waitUntilExit()
        guard eventuallyBlocking(timeout: max(.zero, ContinuousClock.now.duration(to: deadline)), every: .milliseconds(1), { buffer.finished })
        else { return nil }
        return (process.terminationStatus, process.terminationReason == .uncaughtSignal)
    }

    public func signal(_ number: Int32) { kill(pid, number) }

    public func killHard() { kill(pid, SIGKILL) }

    /// SIGTERM, then a clean exit (status 0) within `timeout` is required.
    public func stopCleanly(_ name: String, timeout: Duration = .seconds(10)) {
        guard process.isRunning else {
            Issue.record("\(name) had already exited (\(process.terminationStatus)): \(lines.suffix(8))")
            return
        }
        signal(SIGTERM)
        let exit = waitForExit(timeout: timeout)
        #expect(exit?.status == 0 && exit?.signaled == false,
                "\(name) did not exit 0 within \(timeout) of SIGTERM: \(String(describing: exit)); log: \(lines.suffix(8))")
    }

    /// For `defer`: whatever happened, no process is left behind.
    public func ensureStopped() {
        if process.isRunning { kill(pid, SIGKILL) }
        process.waitUntilExit()
    }
}
