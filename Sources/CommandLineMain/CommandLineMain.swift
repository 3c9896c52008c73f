import ArgumentParser
import Foundation

/// How this project's command line programs end: 0 success (and --help, --version), 1 a failure the
/// user can act on (one plain sentence on stderr), 2 a usage mistake, or a command's own documented
/// code thrown as `ExitCode` (for example `tracer check`'s 3).
///
/// The exit code never depends on a hand-kept list of error types: whatever the argument parser did
/// not raise itself is a failure, exit 1, so an error type nobody listed cannot pass for a usage
/// mistake. Only its sentence comes from the program's `describe`.
public enum CommandLineMain {
    /// How the program ends: the code, and what goes to stdout and stderr (each empty or one
    /// newline-terminated text).
    public struct Ending: Equatable, Sendable {
        public var code: Int32
        public var standardOutput = ""
        public var standardError = ""

        public init(code: Int32, standardOutput: String = "", standardError: String = "") {
            self.code = code
            self.standardOutput = standardOutput
            self.standardError = standardError
        }
    }

    /// Parses `arguments`, runs the command and exits as `ending(for:)` says.
    public static func run<Root: ParsableCommand>(
        _ root: Root.Type, arguments: [String], describe: (any Error) -> String
    ) async -> Never {
        var command: any ParsableCommand
        do {
            command = try root.parseAsRoot(arguments)
        } catch {
            finish(parseFailureEnding(for: error, of: root))
        }
        do {
            if var asyncCommand = command as? any AsyncParsableCommand {
                try await asyncCommand.run()
            } else {
                try command.run()
            }
            exit(0)
        } catch {
            finish(ending(for: error, of: root, describe: describe))
        }
    }

    /// How the program ends when a command's `run` threw `error`.
    public static func ending<Root: ParsableCommand>(
        for error: any Error, of root: Root.Type, describe: (any Error) -> String
    ) -> Ending {
        switch error {
        case let exit as ExitCode:
            return Ending(code: exit.rawValue)
        case is CleanExit, is ValidationError:
            return parseFailureEnding(for: error, of: root)
        default:
            // The parser maps every error it did not raise itself (such as help asked for by a bare
            // command) to EXIT_FAILURE; those are the command's own failures.
            if root.exitCode(for: error) != .failure {
                return parseFailureEnding(for: error, of: root)
            }
            return Ending(code: 1, standardError: "error: \(describe(error))\n")
        }
    }

    /// How the program ends when the parser refused the arguments or was asked for help.
    public static func parseFailureEnding<Root: ParsableCommand>(for error: any Error, of root: Root.Type) -> Ending {
        let message = root.fullMessage(for: error)
        let text = message.isEmpty ? "" : message + "\n"
        if root.exitCode(for: error) == .success {
            return Ending(code: 0, standardOutput: text)
        }
        return Ending(code: 2, standardError: text)
    }

    private static func finish(_ ending: Ending) -> Never {
        if !ending.standardOutput.isEmpty {
            FileHandle.standardOutput.write(Data(ending.standardOutput.utf8))
        }
        if !ending.standardError.isEmpty {
            FileHandle.standardError.write(Data(ending.standardError.utf8))
        }
        exit(ending.code)
    }
}
