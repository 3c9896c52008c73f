import Foundation
import Testing
import TestTiers
import TracerTestSupport

extension TracerNodeTests {
    /// The README's main job, end to end: `scripts/demo` with the binaries this test run built.
    /// Three `tracer run` nodes on Bumble virtual links (A meets B, C meets no one), a real
    /// tracer-server, `tracer report` from A with a one-time code, and `tracer check` on B and C.
    @Suite(.tags(.endToEnd)) struct DemoScenario {
        /// Runs `scripts/demo` with `arguments`; checks what both modes share and returns the result.
        func runDemo(_ arguments: [String]) throws -> ProcessResult {
            let scratch = try Scratch()
            defer { scratch.remove() }
            let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
                .deletingLastPathComponent()
            let started = ContinuousClock.now
            let result = try Products.run(
                "/bin/bash", [root.appendingPathComponent("scripts/demo").path] + arguments, home: scratch.path,
                environment: ["TRACER_BIN_DIR": Products.directory, "TERM": "dumb"], timeout: .seconds(210))
            let elapsed = ContinuousClock.now - started
            #expect(result.exitCode == 0, "\(result)")
            let output = result.stdout
            // B's check: an exposure on today's date, exit code 3; C's: none, exit code 0.
            #expect(output.contains("Exposure found"), "\(result)")
            #expect(output.contains("No exposure found in the last 28 days."), "\(result)")
            #expect(output.contains("exit code 3 (exposure found)"), "\(result)")
            #expect(output.contains("exit code 0 (no exposure)"), "\(result)")
            // The issue asks for under 3 minutes after the build.
            #expect(elapsed < .seconds(180), "the demo took \(elapsed)")
            return result
        }

        @Test(.timeLimit(.minutes(4)))
        func theDemoFindsBsExposureAndNoneForC() throws {
            let result = try runDemo([])
            #expect(result.stdout.contains("Uploaded"), "\(result)")
            #expect(result.stdout.contains("ids wait until they are no longer valid"), "held at first: \(result)")
            #expect(result.stderr.contains("WARNING: --demo-key-clock"), "\(result)")
            #expect(result.stdout.contains("Published batch 1"), "\(result)")
        }

        /// `scripts/demo --keys`: A uploads its daily key, which the server holds until the day
        /// has ended plus the delay; the demo clock releases it, loudly; B derives A's ids.
        @Test(.timeLimit(.minutes(4)))
        func theDemoInKeyModeFindsTheExposureFromAPublishedKey() throws {
            let result = try runDemo(["--keys"])
            let output = result.stdout
            #expect(output.contains("Uploaded 1 daily key (") || output.contains("Uploaded 2 daily keys ("), "A uploaded keys: \(result)")
            #expect(output.contains("keys wait for their day to end plus the publication delay"), "held at first: \(result)")
            #expect(result.stderr.contains("WARNING: --demo-key-clock"), "\(result)")
            #expect(output.contains("Published key batch 1"), "\(result)")
            #expect(!output.contains("Published batch 1"), "no ids were uploaded: \(result)")
            #expect(output.contains("published daily key"), "B's check derived ids from the key: \(result)")
        }
    }
}
