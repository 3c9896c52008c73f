import Foundation
import Testing
import TestTiers

extension TracerNodeTests {
    /// The one helper for tests that need a tool (`RequiredTool`): a missing tool is named with what
    /// to do; in CI it fails the test instead of skipping it.
    @Suite(.tags(.unit)) struct RequiredToolTests {
        static let absent = RequiredTool(name: "Frobnicator 3", executable: "/nonexistent/frobnicate", remedy: "apt-get install frobnicator")

        @Test func aMissingToolIsNamedWithWhatIsMissingAndWhatToDo() throws {
            let detail = try #require(Self.absent.missing)
            let message = Self.absent.message(missing: detail)
            #expect(message.contains("Frobnicator 3"))
            #expect(message.contains("/nonexistent/frobnicate"))
            #expect(message.contains("apt-get install frobnicator"))
            #expect(message.contains("scripts/setup"))
        }

        @Test func inCIAMissingToolFailsTheTestInsteadOfSkippingIt() {
            #expect {
                try Self.absent.require(isCI: true)
            } throws: { error in
                (error as? MissingTool)?.message.contains("CI=true") == true
            }
        }

        @Test func outsideATestAMissingToolIsAnError() async {
            // Benchmarks use the same harnesses; there is no test to skip there.
            let outcome = await Task.detached { () -> String in
                do {
                    try Self.absent.require(isCI: false)
                    return "no error"
                } catch let error as MissingTool {
                    return error.message
                } catch {
                    return "other error: \(error)"
                }
            }.value
            #expect(outcome.hasPrefix("needs Frobnicator 3"), "\(outcome)")
        }

        @Test func anInstalledToolIsNoObstacle() throws {
            let shell = RequiredTool(name: "a shell", executable: "/bin/sh", remedy: "")
            #expect(shell.isInstalled)
            try shell.require(isCI: true)
        }

        @Test func ciRunSetsCI() throws {
            let script = try String(contentsOfFile: RequiredTool.repositoryRoot + "/.ci/run", encoding: .utf8)
            #expect(script.contains("export CI=true"), "without it, CI would skip what it cannot run")
        }
    }
}
