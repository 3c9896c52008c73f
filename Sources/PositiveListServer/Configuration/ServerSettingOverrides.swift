import Foundation

/// Where a setting's effective value came from, as `tracer-server config` names it.
public enum ServerSettingSource: Sendable, Equatable, CustomStringConvertible {
    case builtIn
    case file
    case environment(variable: String)
    case flag(String)

    /// "default", "file", "env TRACER_SERVER_RETENTION_DAYS", "flag --retention-days": the
    /// node's `tracer config` words.
    public var description: String {
        switch self {
        case .builtIn: "default"
        case .file: "file"
        case .environment(let variable): "env \(variable)"
        case .flag(let flag): "flag \(flag)"
        }
    }

    /// How a message names it: "TRACER_SERVER_RETENTION_DAYS", "--retention-days".
    var location: String {
        switch self {
        case .builtIn: "the default"
        case .file: "the configuration file"
        case .environment(let variable): variable
        case .flag(let flag): flag
        }
    }

    /// What the operator can do about a bad value from here.
    var remedy: String {
        switch self {
        case .builtIn, .file: "fix the configuration file"
        case .environment(let variable): "fix or unset \(variable)"
        case .flag(let flag): "fix the value given to \(flag)"
        }
    }
}

/// Settings given outside the configuration file: a flag wins over its environment variable,
/// which wins over the file, which wins over the default (the node's order). Only settings with
/// a `textForm` have them: authorities (tokens), database, objectStore and console stay in the
/// file, so no secret is ever typed where `ps` or a shell history shows it.
public struct ServerSettingOverrides: Sendable, Equatable {
    public struct Value: Sendable, Equatable {
        public var text: String
        public var source: ServerSettingSource
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
            } else if let variable = definition.environmentVariable, let text = environment[variable], !text.isEmpty {
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
            let name = String(argument.prefix { $0 != "=" })
            guard argument.hasPrefix("--"), let definition = ServerSettingRegistry.all.first(where: { $0.flag == name }) else {
                rest.append(argument)
                continue
            }
            if argument.contains("=") {
                settings[definition.key] = String(argument.drop { $0 != "=" }.dropFirst())
            } else if definition.textForm == .boolean {
                // A switch: present means true, unless a true/false word follows.
                if index < arguments.count, ServerSettingTextForm.boolean.json(arguments[index]) != nil {
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
