import ArgumentParser
import Foundation
import Settings

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
            guard let flag = SettingFlagArgument(argument) else { throw ValidationError("Unexpected argument '\(argument)'") }
            let name = flag.name
            guard let definition = SettingRegistry.all.first(where: { $0.flag == name }) else {
                throw ValidationError("Unknown option '\(name)'")
            }
            if let inlineValue = flag.inlineValue {
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
