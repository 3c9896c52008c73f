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
        let input = Pipe()
        process.standardInput = input
        let finished = AsyncStream<Int32>.makeStream()
        process.terminationHandler = { finished.continuation.yield($0.terminationStatus); finished.continuation.finish() }
        do { try process.run() } catch { return .couldNotStart("\(error)") }
        if let json = try? ExposureChecker.json(report) {
            // A hook that does not read its input must not block the check.
            try? input.fileHandleForWriting.write(contentsOf: Data((json + "\n").utf8))
        }
        try? input.fileHandleForWriting.close()

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
            process.terminate()
            return .timedOut
        }
        return status == 0 ? .succeeded : .failed(status: status)
    }
}
