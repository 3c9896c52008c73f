import Foundation
import IDRotation
import Synchronization
import Testing
import TestTiers
import TracerTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// Every suite of this target runs inside this one, serialized: the crash-safety test measures
/// how much a killed writer loses per second, and CLI processes competing for the 2 cores would
/// only add noise to that.
@Suite(.serialized) enum TracerNodeTests {}

/// Lines read from a child's stdout, filled by a reader thread.
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

/// A child process whose stdout is read line by line while it runs (the crash writer).
/// Used from one thread only (the test's); only the line buffer is shared with the reader thread.
final class StreamingProcess {
    private let process: Process
    private let buffer = LineBuffer()
    let pid: Int32

    /// `standardErrorPath`: a file that receives the child's stderr (its logs), else the test's own.
    init(_ executable: String, _ arguments: [String], home: String, standardErrorPath: String? = nil,
         environment: [String: String] = [:]) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        process.environment = Products.environment(home: home, overrides: environment)
        process.currentDirectoryURL = URL(fileURLWithPath: home)
        process.standardInput = try FileHandle(forReadingFrom: URL(fileURLWithPath: "/dev/null"))
        let pipe = Pipe()
        process.standardOutput = pipe
        if let standardErrorPath {
            _ = FileManager.default.createFile(atPath: standardErrorPath, contents: nil)
            process.standardError = try FileHandle(forWritingTo: URL(fileURLWithPath: standardErrorPath))
        } else {
            process.standardError = FileHandle.standardError
        }
        try process.run()
        self.process = process
        pid = process.processIdentifier

        buffer.read(from: pipe.fileHandleForReading)
    }

    var lines: [String] { buffer.lines }

    /// Waits until a line satisfies `condition` or the timeout passes; true when one did.
    func waitForLine(timeout: Duration, where condition: (String) -> Bool) -> Bool {
        _ = eventuallyBlocking(timeout: timeout, every: .milliseconds(1)) {
            buffer.contains(where: condition) || (!process.isRunning && buffer.finished)
        }
        return buffer.contains(where: condition)
    }

    var isRunning: Bool { process.isRunning }

    /// Waits for the child to exit and for its stdout to be read to the end; nil on timeout.
    func waitForExit(timeout: Duration = .seconds(20)) -> (status: Int32, signaled: Bool)? {
        let deadline = ContinuousClock.now + timeout
        guard eventuallyBlocking(timeout: timeout, every: .milliseconds(1), { !process.isRunning }) else { return nil }
        process.waitUntilExit()
        guard eventuallyBlocking(timeout: max(.zero, ContinuousClock.now.duration(to: deadline)), every: .milliseconds(1), { buffer.finished })
        else { return nil }
        return (process.terminationStatus, process.terminationReason == .uncaughtSignal)
    }

    func killHard() { kill(pid, SIGKILL) }
}

/// The node tests' own helpers, beside the shared ones in TracerTestSupport.
extension Check {
    /// Every run of exactly 16 hex digits in `text` (a full userId as `--reveal` and export print it).
    static func fullHexIDs(in text: String) -> Set<String> {
        var found: Set<String> = []
        var run: [Character] = []
        func flush() {
            if run.count == 16 { found.insert(String(run).lowercased()) }
            run.removeAll()
        }
        for character in text {
            if character.isHexDigit { run.append(character) } else { flush() }
        }
        flush()
        return found
    }

    /// Runs a short python3 program with sqlite3 (for databases made by "another program").
    static func python(_ program: String, _ arguments: [String], home: String) throws -> ProcessResult {
        let python = try #require(
            ["/usr/bin/python3", "/usr/local/bin/python3"].first { FileManager.default.isExecutableFile(atPath: $0) }
                ?? RequiredTool.executableInPath("python3"),
            "python3 is needed to make SQLite files that tracer did not write")
        let result = try Products.run(python, ["-c", program] + arguments, home: home)
        try #require(result.exitCode == 0 && !result.signaled, "python3 failed: \(result)")
        return result
    }

    static func bytes(_ path: String) throws -> Data {
        try Data(contentsOf: URL(fileURLWithPath: path))
    }

    static func exists(_ path: String) -> Bool { FileManager.default.fileExists(atPath: path) }

    static func openStore(_ path: String) throws -> NodeStore {
        try NodeStore.open(StoreLocation(path: path, source: .flag, ownsDirectory: false))
    }
}

/// Bumble virtual controllers on one link (Tests/Support/bumble/virtual_link.py), kept running
/// while its stdin stays open.
final class VirtualLink {
    let process: Process
    let input: Pipe
    let ports: [UInt16]

    /// `controllers` on free ports, or the given `ports` (for a radio that must come back where it was).
    init(controllers: Int = 2, ports requested: [UInt16]? = nil) throws {
        try RequiredTool.bumble.require()
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        let python = ProcessInfo.processInfo.environment["TRACER_BUMBLE_PYTHON"]
            ?? root.appendingPathComponent(".venv-bumble/bin/python").path
        guard FileManager.default.isExecutableFile(atPath: python) else {
            throw HarnessFailure(description: "no Python with Bumble at \(python): run ./scripts/setup")
        }
        let arguments = [root.appendingPathComponent("Tests/Support/bumble/virtual_link.py").path]
            + (requested.map { $0.map(String.init) } ?? ["\(controllers)"])
        // The launcher picks free ports by probing; another process can take one before Bumble
        // binds it, so a start on ports of its choosing is tried again.
        var launched: (process: Process, input: Pipe, ports: [UInt16])?
        var failure = ""
        for _ in 0..<(requested == nil ? 3 : 1) where launched == nil {
            (launched, failure) = try Self.launch(python: python, arguments: arguments)
        }
        guard let launched else {
            throw HarnessFailure(description: "the virtual link did not start (ports \(String(describing: requested))): \(failure)")
        }
        (process, input, ports) = launched
    }

    /// Starts the launcher and waits for its READY line; on failure returns what it printed.
    private static func launch(python: String, arguments: [String]) throws -> ((process: Process, input: Pipe, ports: [UInt16])?, String) {
        let process = Process()
        let input = Pipe()
        let output = Pipe()
        // Its log goes to an unlinked file: nothing has to drain it while it runs, and a failed
        // start can still be explained.
        let logPath = NSTemporaryDirectory() + "/tracer-virtual-link-\(UUID().uuidString).log"
        FileManager.default.createFile(atPath: logPath, contents: nil)
        guard let log = FileHandle(forUpdatingAtPath: logPath) else { throw HarnessFailure(description: "cannot create \(logPath)") }
        unlink(logPath)
        defer { try? log.close() }
        process.executableURL = URL(fileURLWithPath: python)
        process.arguments = arguments
        process.standardInput = input
        process.standardOutput = output
        process.standardError = log
        try process.run()
        var line: [UInt8] = []
        while let byte = try output.fileHandleForReading.read(upToCount: 1)?.first, byte != UInt8(ascii: "\n") {
            line.append(byte)
        }
        let words = String(decoding: line, as: UTF8.self).split(separator: " ")
        guard words.first == "READY" else {
            if process.isRunning { process.terminate() }
            try? input.fileHandleForWriting.close()
            process.waitUntilExit()
            try? log.seek(toOffset: 0)
            let stderr = String(decoding: (try? log.readToEnd()) ?? Data(), as: UTF8.self)
            return (nil, "it said \(words); stderr: \(stderr.suffix(600))")
        }
        return ((process, input, words.dropFirst().compactMap { UInt16($0) }), "")
    }

    /// The controller process dies: no goodbye to the nodes.
    func killHard() {
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }

    /// Closing stdin ends the launcher even when SIGTERM cannot reach Python's handler.
    func stop() {
        if process.isRunning { process.terminate() }
        try? input.fileHandleForWriting.close()
        process.waitUntilExit()
    }
}

