import Foundation
import TestTiers
#if canImport(Glibc)
import Glibc
#endif

/// What a finished child process (a tool such as curl or openssl, or one of our own
/// executables run by a test or benchmark) wrote and how it exited.
public struct ProcessResult: Sendable, CustomStringConvertible {
    public var exitCode: Int32
    /// True when the process ended by a signal (then `exitCode` is the signal number).
    public var signaled: Bool
    public var stdout: String
    public var stderr: String

    public init(exitCode: Int32, signaled: Bool = false, stdout: String, stderr: String) {
        self.exitCode = exitCode
        self.signaled = signaled
        self.stdout = stdout
        self.stderr = stderr
    }

    /// Both streams, standard output first: what a caller that only searches the text reads.
    public var output: String { stdout + stderr }

    public var stderrLines: [String] { stderr.split(separator: "\n", omittingEmptySubsequences: true).map(String.init) }

    public var description: String {
        "exit \(signaled ? "signal " : "")\(exitCode)\n--- stdout ---\n\(stdout.prefix(4000))\n--- stderr ---\n\(stderr.prefix(4000))"
    }

    /// Runs `program` with `arguments` (and `environment`, else this process's; in `directory`,
    /// else this process's) to its end, with no input.
    public static func run(
        _ program: String, _ arguments: [String], environment: [String: String]? = nil, in directory: String? = nil
    ) throws -> ProcessResult {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: program)
        process.arguments = arguments
        if let environment { process.environment = environment }
        if let directory { process.currentDirectoryURL = URL(fileURLWithPath: directory) }
        return try collect(process)
    }

    /// Starts `process` (set up but not yet run; its standard output and error are replaced by
    /// files, its input by `input` or nothing) and waits for its end. The output goes to unlinked
    /// temporary files rather than pipes: a child cannot stall on a full pipe, and a grandchild it
    /// leaves running (a hook in the background) cannot keep the call waiting for an end of file.
    /// With a `timeout`, a process still running then is killed (SIGKILL) and the call throws a
    /// ``HarnessFailure`` saying so.
    public static func collect(_ process: Process, input: String? = nil, timeout: Duration? = nil) throws -> ProcessResult {
        let out = try UnlinkedFile()
        let err = try UnlinkedFile()
        let inputPipe = input.map { _ in Pipe() }
        process.standardOutput = out.handle
        process.standardError = err.handle
        process.standardInput = inputPipe ?? FileHandle.nullDevice
        _ = ignoringBrokenPipes
        try process.run()
        if let input, let inputPipe {
            // Written on another thread: a child that exits without reading gets an error here,
            // not a SIGPIPE that kills the tests, and one that reads slowly does not hold this one.
            let inputHandle = inputPipe.fileHandleForWriting
            DispatchQueue.global().async {
                try? inputHandle.write(contentsOf: Data(input.utf8))
                try? inputHandle.close()
            }
        }
        if let timeout {
            _ = eventuallyBlocking(timeout: timeout, every: .milliseconds(2)) { !process.isRunning }
            if process.isRunning {
                kill(process.processIdentifier, SIGKILL)
                process.waitUntilExit()
                let written = ProcessResult(exitCode: process.terminationStatus, signaled: true, stdout: try out.contents(), stderr: try err.contents())
                throw HarnessFailure(description: "\(process.executableURL?.path ?? "?") \((process.arguments ?? []).joined(separator: " ")) still ran after \(timeout) and was killed: \(written)")
            }
        }
        process.waitUntilExit()
        return ProcessResult(
            exitCode: process.terminationStatus, signaled: process.terminationReason == .uncaughtSignal,
            stdout: try out.contents(), stderr: try err.contents())
    }

    /// This result when the process exited with 0; otherwise a ``HarnessFailure`` naming `what`
    /// ran and quoting what it wrote.
    @discardableResult
    public func succeeded(_ what: String) throws -> ProcessResult {
        guard exitCode == 0 else {
            throw HarnessFailure(description: "\(what) failed (exit \(exitCode)): \(output.suffix(2000))")
        }
        return self
    }
}

/// A temporary file with no name: what a child writes there is read back through the same handle,
/// and nothing is left on disk whatever happens.
private struct UnlinkedFile {
    let handle: FileHandle

    init() throws {
        let path = NSTemporaryDirectory() + "/tracer-test-output-" + UUID().uuidString
        guard FileManager.default.createFile(atPath: path, contents: nil), let handle = FileHandle(forUpdatingAtPath: path) else {
            throw HarnessFailure(description: "cannot create \(path) for a child's output")
        }
        unlink(path)
        self.handle = handle
    }

    func contents() throws -> String {
        defer { try? handle.close() }
        try handle.seek(toOffset: 0)
        return String(decoding: try handle.readToEnd() ?? Data(), as: UTF8.self)
    }
}

/// A write to a pipe whose reader has gone fails with EPIPE instead of killing the test process.
private let ignoringBrokenPipes: Void = { signal(SIGPIPE, SIG_IGN) }()
