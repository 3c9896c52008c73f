import ArgumentParser
import Foundation

/// `--config`, for every command that reads the node's settings. A command's `run()` calls
/// `resolve(flags:)` with the setting flags it was given.
struct ConfigOptions: ParsableArguments {
    @Option(
        name: .long,
        help: ArgumentHelp(
            "The configuration file.",
            discussion: "Default: $TRACER_CONFIG, else $XDG_CONFIG_HOME/tracer/tracer.toml, else ~/.config/tracer/tracer.toml.",
            valueName: "path"))
    var config: String?

    /// The effective settings given these flags (setting key → value as typed) and this
    /// process's environment.
    func resolve(flags: [String: String] = [:]) throws(ConfigurationError) -> ResolvedSettings {
        try NodeSettings.resolve(configFlag: config, flags: flags, environment: ProcessInfo.processInfo.environment)
    }
}
