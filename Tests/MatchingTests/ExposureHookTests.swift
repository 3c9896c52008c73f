import Foundation
@testable import Matching
import Testing
import TestTiers

/// The `--on-exposure` command: what it is given, how its end is reported, and that a command
/// running past its timeout is stopped with everything it started.
@Suite(.tags(.integration)) struct ExposureHookTests {
    let report = ExposureCheckReport(
        checkedAt: 1_800_000_000,
        list: .init(lastUpdated: 1_800_000_000, generation: 3, publishedAt: 1_799_990_000, batches: 2, updateFailure: nil, offline: false),
        idsChecked: 10, encountersChecked: 5, matchedIDs: 0, idsSeenOutsideTheirWindow: 0,
        assessment: ExposureAssessment(matches: [], model: .standard), newExposure: false)

    func scratchFile() -> String { NSTemporaryDirectory() + "/tracer-hook-test-\(UUID().uuidString)" }

    @Test func theCommandGetsTheReportOnStdinAndTheSummaryInItsEnvironment() async throws {
        let output = scratchFile()
        defer { try? FileManager.default.removeItem(atPath: output) }
        let hook = ExposureHook(command: "{ echo \"$TRACER_RISK|$TRACER_EXPOSURE_DAYS|$TRACER_WEIGHTED_MINUTES\"; cat; } > '\(output)'")
        #expect(await hook.run(for: report) == .succeeded)
        let lines = try String(contentsOfFile: output, encoding: .utf8).split(separator: "\n", maxSplits: 1)
        #expect(lines.first == "none||0")
        let decoded = try JSONDecoder().decode(ExposureCheckReport.self, from: Data(String(lines[1]).utf8))
        #expect(decoded == report)
    }

    @Test func aFailingOrMissingCommandIsReportedWithItsStatus() async {
        #expect(await ExposureHook(command: "exit 3").run(for: report) == .failed(status: 3))
        #expect(await ExposureHook(command: "/nonexistent/notify-me").run(for: report) == .failed(status: 127))
    }

    @Test func aCommandPastItsTimeoutIsStoppedWithTheChildrenItStarted() async throws {
        let pids = scratchFile()
        defer { try? FileManager.default.removeItem(atPath: pids) }
        // A background child, and a foreground one that ignores SIGTERM, as a careless notifier
        // script might leave.
        let command = "sleep 300 & echo $! > '\(pids)'; sh -c 'trap \"\" TERM; echo $$ >> \"\(pids)\"; sleep 300; sleep 300'"
        let start = ContinuousClock.now
        #expect(await ExposureHook(command: command, timeout: .milliseconds(500)).run(for: report) == .timedOut)
        #expect(ContinuousClock.now - start < .seconds(10))
        let started = try String(contentsOfFile: pids, encoding: .utf8).split(separator: "\n").compactMap { Int32($0) }
        #expect(started.count == 2)
        // Killed processes may stay zombies for a moment until whoever adopted them reaps them.
        _ = await eventually(every: .milliseconds(50)) { !started.contains(where: Self.isRunning) }
        #expect(!started.contains(where: Self.isRunning), "still running: \(started.filter(Self.isRunning))")
    }

    /// Alive and not a zombie.
    static func isRunning(_ pid: Int32) -> Bool {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
              let afterName = stat.range(of: ") ", options: .backwards)
        else { return false }
        return stat[afterName.upperBound...].first != "Z"
    }
}
