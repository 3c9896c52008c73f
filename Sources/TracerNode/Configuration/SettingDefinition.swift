import Foundation

/// One setting: where it can be set, what it accepts, its default, and which `NodeSettings`
/// property receives it.
struct SettingDefinition: Sendable {
    enum Default: Sendable {
        /// No default: the property stays nil unless something sets it.
        case none
        case value(SettingValue)
        /// Found from the environment, e.g. under $XDG_CACHE_HOME; nil when it cannot be found.
        case computed(@Sendable ([String: String]) -> (value: SettingValue, detail: String)?)
    }

    /// "section.key", as in the configuration file.
    var key: String
    var kind: SettingKind
    var defaultValue: Default
    var environmentVariable: String?
    /// The long flag with its dashes, "--check-interval"; nil for file-only settings.
    var flag: String?
    var help: String
    /// Stores a checked value of this setting's kind into its property.
    var assign: @Sendable (inout NodeSettings, SettingValue) -> Void

    var section: String { String(key.prefix { $0 != "." }) }
    var name: String { String(key.drop { $0 != "." }.dropFirst()) }

    /// True for flags that take no value: present means true.
    var flagIsSwitch: Bool {
        if case .boolean = kind { return true }
        return false
    }
}

/// Typed constructors, so each registry entry names its property once and cannot assign a value
/// of the wrong kind.
extension SettingDefinition {
    static func integer(
        _ key: String, _ property: WritableKeyPath<NodeSettings, Int64> & Sendable, _ kind: SettingKind,
        default defaultValue: Int64, env: String?, flag: String?, help: String
    ) -> SettingDefinition {
        SettingDefinition(
            key: key, kind: kind, defaultValue: .value(.integer(defaultValue)), environmentVariable: env, flag: flag,
            help: help,
            assign: { settings, value in if case .integer(let integer) = value { settings[keyPath: property] = integer } })
    }

    static func number(
        _ key: String, _ property: WritableKeyPath<NodeSettings, Double> & Sendable, _ kind: SettingKind,
        default defaultValue: Double, env: String?, flag: String?, help: String
    ) -> SettingDefinition {
        SettingDefinition(
            key: key, kind: kind, defaultValue: .value(.number(defaultValue)), environmentVariable: env, flag: flag,
            help: help,
            assign: { settings, value in
                switch value {
                case .number(let number): settings[keyPath: property] = number
                case .integer(let integer): settings[keyPath: property] = Double(integer)
                default: break
                }
            })
    }

    static func boolean(
        _ key: String, _ property: WritableKeyPath<NodeSettings, Bool> & Sendable,
        default defaultValue: Bool, env: String?, flag: String?, help: String
    ) -> SettingDefinition {
        SettingDefinition(
            key: key, kind: .boolean, defaultValue: .value(.boolean(defaultValue)), environmentVariable: env, flag: flag,
            help: help,
            assign: { settings, value in if case .boolean(let boolean) = value { settings[keyPath: property] = boolean } })
    }

    /// A text setting whose checked text converts to the property's type (a choice, a URL, a key…).
    static func text<Value>(
        _ key: String, _ property: WritableKeyPath<NodeSettings, Value> & Sendable, _ kind: SettingKind,
        default defaultValue: SettingDefinition.Default = .none, env: String?, flag: String?, help: String,
        convert: @escaping @Sendable (String) -> Value
    ) -> SettingDefinition {
        SettingDefinition(
            key: key, kind: kind, defaultValue: defaultValue, environmentVariable: env, flag: flag, help: help,
            assign: { settings, value in if case .text(let text) = value { settings[keyPath: property] = convert(text) } })
    }
}

/// A rule between two settings, checked once each has its effective value. When it fails, the
/// error points at where `blamed` was set, or at `other` when `blamed` is only a default.
struct SettingConstraint: Sendable {
    var blamed: String
    var other: String
    /// The broken rule as a clause naming both keys, or nil when the rule holds.
    var problem: @Sendable (NodeSettings) -> String?
}
