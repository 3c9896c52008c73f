import Foundation
import Synchronization

/// What a finished child process (a tool such as curl or openssl, or one of our own
/// executables run by a test or benchmark) wrote and how it exited.
public struct ProcessResult: Sendable, CustomStringConvertible {
    public var exitCode: Int32
    public var stdout: String
    public var stderr: String

    public init(exitCode: Int32, stdout: String, stderr: String) {
        self.exitCode = exitCode
        self.stdout = stdout
        self.stderr = stderr
    }

    /// Both streams, standard output first: what a caller that only searches the text reads.
    public var output: String { stdout + stderr }

    public var description: String { "exit \(exitCode)\n--- stdout ---\n\(stdout.prefix(4000))\n--- stderr ---\n\(stderr.prefix(4000))" }

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
    /// pipes, its input by `input` or nothing) and waits for its end.
    public static func collect(_ process: Process, input: String? = nil) throws -> ProcessResult {
        let out = Pipe()
        let err = Pipe()
        let inputPipe = input.map { _ in Pipe() }
        process.standardOutput = out
        process.standardError = err
        process.standardInput = inputPipe ?? FileHandle.nullDevice
        _ = ignoringBrokenPipes
        try process.run()
        let group = DispatchGroup()
        if let input, let inputPipe {
            // Written on another thread too: a child that writes before it reads would otherwise
            // wait on a full output pipe while this thread waits on its full input pipe. A child
            // that exits without reading gets an error here, not a SIGPIPE that kills the tests.
            let inputHandle = inputPipe.fileHandleForWriting
            DispatchQueue.global().async(group: group) {
                try? inputHandle.write(contentsOf: Data(input.utf8))
                try? inputHandle.close()
            }
        }
        // Standard error is read on another thread while this one reads standard output: a
        // child that fills the pipe nobody reads would block for ever.
        let errors = CollectedData()
        let errorHandle = err.fileHandleForReading
        DispatchQueue.global().async(group: group) { errors.data.withLock { $0 = errorHandle.readDataToEndOfFile() } }
        let stdout = out.fileHandleForReading.readDataToEndOfFile()
        group.wait()
        process.waitUntilExit()
        return ProcessResult(
            exitCode: process.terminationStatus, stdout: String(decoding: stdout, as: UTF8.self),
            stderr: errors.data.withLock { String(decoding: $0, as: UTF8.self) })
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

private final class CollectedData: Sendable {
    let data = Mutex(Data())
}

/// A write to a pipe whose reader has gone fails with EPIPE instead of killing the test process.
private let ignoringBrokenPipes: Void = { signal(SIGPIPE, SIG_IGN) }()
