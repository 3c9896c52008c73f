import Foundation

/// Runs the user's `--on-exposure` command when a check finds a new exposure: the desktop
/// counterpart of a phone's notification.
///
/// The command runs through `/bin/sh -c` with the report as JSON on its standard input and a
/// summary in its environment: TRACER_RISK (low or high), TRACER_EXPOSURE_DAYS (comma-separated
/// YYYY-MM-DD), TRACER_WEIGHTED_MINUTES (of the worst day). Diagnosed ids are not passed.
public struct ExposureHook: Sendable {
    public let command: String
    public let timeout: Duration

    public init(command: String, timeout: Duration = .seconds(60)) {
        self.command = command
        self.timeout = timeout
    }

    public enum Outcome: Sendable, Equatable {
        case succeeded
        case failed(status: Int32)
        case timedOut
        case couldNotStart(String)
    }

    public func run(for report: ExposureCheckReport) async -> Outcome {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/sh")
        process.arguments = ["-c", command]
        var environment = ProcessInfo.processInfo.environment
        let days = report.assessment.exposureDays
        environment["TRACER_RISK"] = report.assessment.level.rawValue
        environment["TRACER_EXPOSURE_DAYS"] = days.map(\.day).joined(separator: ",")
        environment["TRACER_WEIGHTED_MINUTES"] = String(Int((days.map(\.weightedMinutes).max() ?? 0).rounded()))
        process.environment = environment
        let input: FileHandle
        do { input = try Self.inputFile(for: report) } catch { return .couldNotStart("cannot write its input: \(error)") }
        defer { try? input.close() }
        process.standardInput = input
        let finished = AsyncStream<Int32>.makeStream()
        process.terminationHandler = { finished.continuation.yield($0.terminationStatus); finished.continuation.finish() }
        do { try process.run() } catch { return .couldNotStart("\(error)") }

        let status = await withTaskGroup(of: Int32?.self) { group in
            group.addTask { await finished.stream.first { _ in true } }
            group.addTask { [timeout] in
                try? await Task.sleep(for: timeout)
                return nil
            }
            let first = await group.next() ?? nil
            group.cancelAll()
            return first
        }
        guard let status else {
            // Foundation starts the shell as the leader of its own process group, so the
            // command's children (a background `sleep`, a pipeline) share it: SIGTERM reaches
            // all of them, and whatever ignores it is killed after 2 s. A child that left the
            // group on purpose (setsid, setpgid, `set -m`) outlives the timeout. Should the shell
            // not lead a group of its own, only the shell is signalled.
            let shell = process.processIdentifier
            let target = getpgid(shell) == shell ? -shell : shell
            kill(target, SIGTERM)
            try? await Task.sleep(for: .seconds(2))
            // Only if something of it is left: a group id is not reused while any member lives,
            // so this cannot reach another program's processes.
            if kill(target, 0) == 0 { kill(target, SIGKILL) }
            return .timedOut
        }
        return status == 0 ? .succeeded : .failed(status: status)
    }

    /// The report as the hook's stdin: a file (0600, already unlinked), not a pipe, so a hook
    /// that exits without reading it cannot kill the check with SIGPIPE, and one that does not
    /// read it cannot block the check.
    private static func inputFile(for report: ExposureCheckReport) throws -> FileHandle {
        let path = NSTemporaryDirectory() + "/tracer-exposure-\(UUID().uuidString).json"
        let json = (try? ExposureChecker.json(report.withoutPlaces)).map { $0 + "\n" } ?? ""
        guard FileManager.default.createFile(atPath: path, contents: Data(json.utf8), attributes: [.posixPermissions: 0o600]) else {
            throw CocoaError(.fileWriteUnknown, userInfo: [NSFilePathErrorKey: path])
        }
        defer { try? FileManager.default.removeItem(atPath: path) }
        return try FileHandle(forReadingFrom: URL(fileURLWithPath: path))
    }
}
