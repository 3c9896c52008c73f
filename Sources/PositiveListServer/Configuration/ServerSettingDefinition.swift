import Foundation
import Settings

/// One setting of the server's configuration file: a row of the settings kit over
/// `ServerConfiguration`. The default stays on the property (a fresh configuration holds every
/// default), so a setting is its property plus one row of ``ServerSettingRegistry``.
typealias ServerSettingDefinition = SettingRow<ServerConfiguration>

/// The rows' constructors for the server: the variable and the flag are named after the key, and
/// `config` shows the property, which holds the default when nothing gave a value.
extension SettingRow where Target == ServerConfiguration {
    static func integer<Value: FixedWidthInteger & Sendable>(
        _ key: String, _ property: WritableKeyPath<ServerConfiguration, Value> & Sendable, _ bounds: SettingBounds<Int64>, help: String
    ) -> Self {
        var row = Self.integer(
            key, property, .integer(bounds), env: ServerSettingNames.environmentVariable(key), flag: ServerSettingNames.flag(key), help: help)
        row.show = { "\($0[keyPath: property])" }
        return row
    }

    /// An integer that may be left out, which means what `absent` says.
    static func optionalInteger<Value: FixedWidthInteger & Sendable>(
        _ key: String, _ property: WritableKeyPath<ServerConfiguration, Value?> & Sendable, _ bounds: SettingBounds<Int64>, absent: String,
        help: String
    ) -> Self {
        Self.optionalInteger(
            key, property, .integer(bounds), absent: absent, env: ServerSettingNames.environmentVariable(key),
            flag: ServerSettingNames.flag(key), help: help)
    }

    static func number(
        _ key: String, _ property: WritableKeyPath<ServerConfiguration, Double> & Sendable, _ bounds: SettingBounds<Double>, help: String
    ) -> Self {
        var row = Self.number(
            key, property, .number(bounds), env: ServerSettingNames.environmentVariable(key), flag: ServerSettingNames.flag(key), help: help)
        row.show = { "\($0[keyPath: property])" }
        return row
    }

    static func boolean(_ key: String, _ property: WritableKeyPath<ServerConfiguration, Bool> & Sendable, help: String) -> Self {
        var row = Self.boolean(key, property, env: ServerSettingNames.environmentVariable(key), flag: ServerSettingNames.flag(key), help: help)
        row.show = { "\($0[keyPath: property])" }
        return row
    }

    /// A name checked by `problem` (in every layer it is given in), whose message names the
    /// setting; left out, the default `absent` says.
    static func name(
        _ key: String, _ property: WritableKeyPath<ServerConfiguration, String?> & Sendable, describe: String, absent: String, help: String,
        problem: @escaping @Sendable (String) -> String?
    ) -> Self {
        // The kit's refusals follow the key; the rule's own message begins with it.
        let clause = { @Sendable (text: String) -> String? in
            problem(text).map { $0.hasPrefix(key + " ") ? String($0.dropFirst(key.count + 1)) : $0 }
        }
        var row = Self.text(
            key, property, .text(describe: describe, problem: clause), env: ServerSettingNames.environmentVariable(key),
            flag: ServerSettingNames.flag(key), help: help, show: { $0[keyPath: property] ?? "(unset: \(absent))" }, convert: { $0 })
        row.absent = absent
        return row
    }
}

extension SettingRow where Target == ServerConfiguration {
    /// An object of fields only the file gives (`database`, `console`…): read into `start` field
    /// by field, then checked as a whole by `finish`.
    static func section<Value: Sendable>(
        _ key: String, _ property: WritableKeyPath<ServerConfiguration, Value?> & Sendable, _ section: SettingSection<Value>, start: Value,
        help: String, show: @escaping @Sendable (ServerConfiguration) -> String,
        finish: @escaping @Sendable (inout Value, ServerConfiguration) throws(SettingProblem) -> Void
    ) -> Self {
        SettingRow(
            key: key, kind: .structured(describe: section.describe), environmentVariable: nil, flag: nil, help: help, show: show,
            assign: { (configuration, value) throws(SettingProblem) in
                guard case .structured(let input) = value else { return }
                var read = try section.read(input, into: start, paths: PathContext(baseDirectory: "/", home: nil))
                try finish(&read, configuration)
                configuration[keyPath: property] = read
            })
    }
}

/// The names a setting has outside the file, derived from its key so that no row spells them:
/// `maxIDsPerHistory` is `TRACER_SERVER_MAX_IDS_PER_HISTORY` and `--max-ids-per-history`.
enum ServerSettingNames {
    static let environmentPrefix = "TRACER_SERVER_"

    static func environmentVariable(_ key: String) -> String {
        environmentPrefix + words(key).joined(separator: "_").uppercased()
    }

    static func flag(_ key: String) -> String {
        "--" + words(key).joined(separator: "-").lowercased()
    }

    /// The key cut before each capital that follows a small letter or digit ("IDs" stays one word).
    private static func words(_ key: String) -> [String] {
        var words: [String] = []
        var current = ""
        var previous: Character?
        for character in key {
            if character.isUppercase, let previous, previous.isLowercase || previous.isNumber {
                words.append(current)
                current = ""
            }
            current.append(character)
            previous = character
        }
        return words + [current]
    }
}
