import ArgumentParser
import CommandLineMain
import Testing
import TestTiers

extension TracerNodeTests {
    /// The one mapping from what a command threw to how `tracer` and `tracer-server` end.
    @Suite(.tags(.unit)) struct CommandLineEndings {
        struct Root: ParsableCommand {
            static let configuration = CommandConfiguration(commandName: "probe", subcommands: [Leaf.self])
        }

        struct Leaf: ParsableCommand {
            @Option var count = 1
        }

        /// An error type no program lists: it must still be a failure, never a usage mistake.
        struct UnlistedError: Error {}

        static func describe(_ error: any Error) -> String {
            error is UnlistedError ? "Something unexpected went wrong; please report this." : "A known failure; do this."
        }

        func ending(_ error: any Error) -> CommandLineMain.Ending {
            CommandLineMain.ending(for: error, of: Root.self, describe: Self.describe)
        }

        @Test func anErrorNoProgramListsExitsOneWithItsSentenceNotAsAUsageMistake() {
            #expect(ending(UnlistedError()) == .init(code: 1, standardError: "error: Something unexpected went wrong; please report this.\n"))
        }

        @Test func aCommandsOwnExitCodeIsKeptWithoutAMessage() {
            #expect(ending(ExitCode(3)) == .init(code: 3))
            #expect(ending(ExitCode.failure) == .init(code: 1))
        }

        @Test func aValidationErrorIsAUsageMistakeWithTheUsage() {
            let end = ending(ValidationError("--count must be positive"))
            #expect(end.code == 2 && end.standardOutput.isEmpty)
            #expect(end.standardError.contains("--count must be positive") && end.standardError.contains("Usage:"))
        }

        @Test func helpGoesToStandardOutputWithSuccess() throws {
            // A bare `probe` has no run of its own: ArgumentParser's default run asks for help.
            var bare = try Root.parseAsRoot([])
            let thrown = #expect(throws: (any Error).self) { try bare.run() }
            let end = ending(try #require(thrown))
            #expect(end.code == 0 && end.standardError.isEmpty && end.standardOutput.contains("USAGE: probe"))
            #expect(ending(CleanExit.message("probe 1.0")) == .init(code: 0, standardOutput: "probe 1.0\n"))
        }

        @Test func argumentsTheParserRefusesAreAUsageMistake() throws {
            let thrown = #expect(throws: (any Error).self) { _ = try Root.parseAsRoot(["leaf", "--count", "many"]) }
            let end = CommandLineMain.parseFailureEnding(for: try #require(thrown), of: Root.self)
            #expect(end.code == 2 && end.standardError.contains("many") && end.standardOutput.isEmpty)
        }
    }
}
