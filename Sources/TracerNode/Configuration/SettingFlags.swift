import ArgumentParser
import Foundation

/// Reads the registry's setting flags (`--check-interval 120`, `--check-interval=120`,
/// `--continuous-scan`) from arguments the command did not declare itself, for `tracer config`,
/// which accepts every setting flag to show what a command given them would use.
enum SettingFlags {
    /// Setting key → value as typed, ready for `NodeSettings.resolve(flags:)`.
    static func parse(_ arguments: [String]) throws(ValidationError) -> [String: String] {
        var values: [String: String] = [:]
        var index = 0
        while index < arguments.count {
            let argument = arguments[index]
            index += 1
            guard argument.hasPrefix("--") else { throw ValidationError("Unexpected argument '\(argument)'") }
            let name = argument.prefix { $0 != "=" }
            let inlineValue = argument.contains("=") ? String(argument.drop { $0 != "=" }.dropFirst()) : nil
            guard let definition = SettingRegistry.all.first(where: { $0.flag == String(name) }) else {
                throw ValidationError("Unknown option '\(name)'")
            }
            if let inlineValue {
                values[definition.key] = inlineValue
            } else if definition.flagIsSwitch {
                values[definition.key] = "true"
            } else if index < arguments.count {
                values[definition.key] = arguments[index]
                index += 1
            } else {
                throw ValidationError("Missing value for '\(name) <value>'")
            }
        }
        return values
    }

    /// The flags and what they set, for `tracer config --help`.
    static var help: String {
        SettingRegistry.all.compactMap { definition in
            definition.flag.map { flag in
                "  \(flag)\(definition.flagIsSwitch ? "" : " <value>")".padding(toLength: 32, withPad: " ", startingAt: 0)
                    + definition.key
            }
        }.joined(separator: "\n")
    }
}
