import ArgumentParser
import Foundation

/// Runs the `tracer` command with this project's exit codes: 0 success, 1 a failure the user can
/// act on (one plain sentence on stderr), 2 a usage mistake. Commands may exit with their own
/// documented codes through `ExitCode`.
@main
enum TracerMain {
    static func main() async {
        let arguments = Array(CommandLine.arguments.dropFirst())
        var command: any ParsableCommand
        do {
            command = try Tracer.parseAsRoot(arguments)
        } catch {
            exitForParseFailure(error)
        }
        do {
            if var asyncCommand = command as? any AsyncParsableCommand {
                try await asyncCommand.run()
            } else {
                try command.run()
            }
        } catch let exit as ExitCode {
            Foundation.exit(exit.rawValue)
        } catch let error as CleanExit {
            // --help or --version reached through a subcommand's own handling.
            Tracer.exit(withError: error)
        } catch let error as ValidationError {
            exitForParseFailure(error)
        } catch where !UserMessage.isKnown(error) {
            // Errors raised by the argument parser itself, for example help for a bare `tracer`.
            exitForParseFailure(error)
        } catch {
            FileHandle.standardError.write(Data("error: \(UserMessage.describe(error))\n".utf8))
            Foundation.exit(1)
        }
    }

    private static func exitForParseFailure(_ error: any Error) -> Never {
        let message = Tracer.fullMessage(for: error)
        let code = Tracer.exitCode(for: error)
        if code == .success {
            // --help, --version: not a failure.
            print(message)
            Foundation.exit(0)
        }
        FileHandle.standardError.write(Data((message.isEmpty ? "" : message + "\n").utf8))
        Foundation.exit(2)
    }
}
