import Settings
import Foundation

/// Which configuration file applies, and why.
struct ConfigFileLocation: Equatable, Sendable, Encodable {
    static let environmentVariable = "TRACER_CONFIG"
    static let flag = "--config"

    enum Origin: String, Sendable, Encodable {
        case flag = "--config"
        case environment = "TRACER_CONFIG"
        case xdgConfigHome = "$XDG_CONFIG_HOME"
        case home = "~/.config"
    }

    /// Nil when neither HOME nor XDG_CONFIG_HOME says where the default file would be.
    var path: String?
    var origin: Origin?
    /// True when found on disk (set by `NodeSettings.resolve`).
    var exists = false

    /// Named by the user, so it must exist; a default file may be missing.
    var isExplicit: Bool { origin == .flag || origin == .environment }

    /// `--config`, then TRACER_CONFIG, then $XDG_CONFIG_HOME/tracer/tracer.toml, then
    /// ~/.config/tracer/tracer.toml.
    static func resolve(flag: String?, environment: [String: String], workingDirectory: String) -> ConfigFileLocation {
        let relativeToWorkingDirectory = PathContext(baseDirectory: workingDirectory, home: environment["HOME"])
        if let flag, !flag.isEmpty {
            return ConfigFileLocation(path: relativeToWorkingDirectory.absolute(flag), origin: .flag)
        }
        if let variable = environment[environmentVariable], !variable.isEmpty {
            return ConfigFileLocation(path: relativeToWorkingDirectory.absolute(variable), origin: .environment)
        }
        // The XDG spec says a relative XDG_CONFIG_HOME is invalid and must be ignored.
        if let configHome = environment["XDG_CONFIG_HOME"], configHome.hasPrefix("/") {
            return ConfigFileLocation(path: configHome + "/tracer/tracer.toml", origin: .xdgConfigHome)
        }
        if let home = environment["HOME"], home.hasPrefix("/") {
            return ConfigFileLocation(path: home + "/.config/tracer/tracer.toml", origin: .home)
        }
        return ConfigFileLocation(path: nil, origin: nil)
    }
}
