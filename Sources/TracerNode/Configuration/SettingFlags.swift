import ArgumentParser
import Foundation
import Settings

/// Reads the registry's setting flags (`--check-interval 120`, `--check-interval=120`,
/// `--continuous-scan`) from arguments the command did not declare itself, for `tracer config`,
/// which accepts every setting flag to show what a command given them would use.
enum SettingFlags {
    /// Setting key → value as typed, ready for `NodeSettings.resolve(flags:)`.
    static func parse(_ arguments: [String]) throws(ValidationError) -> [String: String] {
        let split: (settings: [String: String], rest: [String])
        do {
            split = try SettingFlagSplit.split(arguments, rows: SettingRegistry.all)
        } catch {
            throw ValidationError("Missing value for '\(error.flag) <value>'")
        }
        if let left = split.rest.first {
            guard let flag = SettingFlagArgument(left) else { throw ValidationError("Unexpected argument '\(left)'") }
            throw ValidationError("Unknown option '\(flag.name)'")
        }
        return split.settings
    }

    /// The flags and what they set, for `tracer config --help`.
    static var help: String {
        SettingRegistry.all.compactMap { definition in
            definition.flag.map { flag in
                "  \(flag)\(definition.kind.isSwitch ? "" : " <value>")".padding(toLength: 32, withPad: " ", startingAt: 0)
                    + definition.key
            }
        }.joined(separator: "\n")
    }
}
