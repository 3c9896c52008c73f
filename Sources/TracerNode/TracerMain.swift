import CommandLineMain

/// Runs the `tracer` command with this project's exit codes (CommandLineMain): 0 success, 1 a
/// failure the user can act on (one plain sentence on stderr), 2 a usage mistake; `tracer check`
/// adds its documented 3.
@main
enum TracerMain {
    static func main() async {
        await CommandLineMain.run(Tracer.self, arguments: Array(CommandLine.arguments.dropFirst()), describe: UserMessage.describe)
    }
}
