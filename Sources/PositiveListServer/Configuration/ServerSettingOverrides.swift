import Foundation
import Settings

/// Settings given outside the configuration file: a flag wins over its environment variable,
/// which wins over the file, which wins over the default (the node's order). Only settings with
/// a `textForm` have them: authorities (tokens), database, objectStore and console stay in the
/// file, so no secret is ever typed where `ps` or a shell history shows it.
public struct ServerSettingOverrides: Sendable, Equatable {
    public struct Value: Sendable, Equatable {
        public var text: String
        public var source: SettingSource
    }

    /// Setting key → the value as typed and where.
    public var values: [String: Value]

    public static let none = ServerSettingOverrides(values: [:])

    public init(values: [String: Value]) { self.values = values }

    /// - Parameter flags: setting key → value, as ``ServerSettingFlags/split(_:)`` gives them.
    public init(environment: [String: String], flags: [String: String]) {
        var values: [String: Value] = [:]
        for definition in ServerSettingRegistry.all {
            if let flag = definition.flag, let text = flags[definition.key] {
                values[definition.key] = Value(text: text, source: .flag(flag))
            } else if let variable = definition.environmentVariable, let text = SettingText.environmentValue(variable, in: environment) {
                values[definition.key] = Value(text: text, source: .environment(variable: variable))
            }
        }
        self.values = values
    }

    /// A problem with the value of `key`, pointed at the variable or flag that gave it when one did.
    func blame(_ error: ConfigurationError, on key: String) -> ConfigurationError {
        guard case .invalidValue(_, let detail) = error, let given = values[key] else { return error }
        return .invalidOverride(key: key, source: given.source, detail: detail)
    }

    /// The overrides as JSON values laid over the file's fields.
    func applied(to fields: [String: Any]) throws(ConfigurationError) -> [String: Any] {
        var fields = fields
        for definition in ServerSettingRegistry.all {
            guard let given = values[definition.key], let form = definition.textForm else { continue }
            guard let json = form.json(given.text) else {
                throw .invalidOverride(
                    key: definition.key, source: given.source,
                    detail: "\(definition.key) must be \(form.expected), got \"\(given.text.prefix(60))\"")
            }
            fields[definition.key] = json
        }
        return fields
    }
}

/// The setting flags (`--retention-days 14`, `--retention-days=14`, `--trust-forwarded-for`)
/// taken out of a command line before the subcommand's own options are parsed, so that every
/// subcommand that reads the configuration accepts them without declaring each.
public enum ServerSettingFlags {
    public struct MissingValue: Error, Equatable, CustomStringConvertible {
        public var flag: String
        public var description: String { "The option \(flag) needs a value, as in \(flag) VALUE or \(flag)=VALUE." }
    }

    /// Setting key → value as typed, and the arguments left for the subcommand. Stops at "--".
    public static func split(_ arguments: [String]) throws(MissingValue) -> (settings: [String: String], rest: [String]) {
        var settings: [String: String] = [:]
        var rest: [String] = []
        var index = 0
        while index < arguments.count {
            let argument = arguments[index]
            index += 1
            if argument == "--" {
                rest += arguments[(index - 1)...]
                break
            }
            guard let flag = SettingFlagArgument(argument), let definition = ServerSettingRegistry.all.first(where: { $0.flag == flag.name }) else {
                rest.append(argument)
                continue
            }
            let name = flag.name
            if let inlineValue = flag.inlineValue {
                settings[definition.key] = inlineValue
            } else if definition.textForm == .boolean {
                // A switch: present means true, unless a true/false word follows.
                if index < arguments.count, SettingText.boolean(arguments[index]) != nil {
                    settings[definition.key] = arguments[index]
                    index += 1
                } else {
                    settings[definition.key] = "true"
                }
            } else if index < arguments.count, !arguments[index].hasPrefix("--") {
                settings[definition.key] = arguments[index]
                index += 1
            } else {
                throw MissingValue(flag: name)
            }
        }
        return (settings, rest)
    }
}
