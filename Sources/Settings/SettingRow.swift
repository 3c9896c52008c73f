import Foundation

/// One setting of a program (`Target` is its settings type: the node's `NodeSettings`, the
/// server's `ServerConfiguration`): its key, what it accepts, its default, where else it can be
/// given, its help, and how a checked value is stored. A registry is a list of rows; the file
/// readers, the environment, the flags, the checks and the `config` commands all follow it.
public struct SettingRow<Target>: Sendable {
    public enum Default: Sendable {
        /// The property keeps the value `Target` starts with (nil, or the default it declares).
        case none
        case value(SettingValue)
        /// Found from the environment, e.g. under $XDG_CACHE_HOME; nil when it cannot be found.
        case computed(@Sendable ([String: String]) -> (value: SettingValue, detail: String)?)
    }

    /// "check.interval" (a section and a name) or "retentionDays", as in the configuration file.
    public var key: String
    public var kind: SettingKind
    public var defaultValue: Default
    public var environmentVariable: String?
    /// The long flag with its dashes, "--check-interval"; nil for file-only settings.
    public var flag: String?
    public var help: String
    /// Stores a checked value of this setting's kind into its property; a conversion that can
    /// still fail (an object's fields) throws what is wrong.
    public var assign: @Sendable (inout Target, SettingValue) throws(SettingProblem) -> Void
    /// The effective value in `config`'s words; nil: the checked value as it reads.
    public var show: (@Sendable (Target) -> String)?
    /// What leaving the setting out means, when its default is no value ("no long poll (404)").
    public var absent: String?

    public init(
        key: String, kind: SettingKind, defaultValue: Default = .none, environmentVariable: String?, flag: String?, help: String,
        show: (@Sendable (Target) -> String)? = nil,
        assign: @escaping @Sendable (inout Target, SettingValue) throws(SettingProblem) -> Void
    ) {
        self.key = key
        self.kind = kind
        self.defaultValue = defaultValue
        self.environmentVariable = environmentVariable
        self.flag = flag
        self.help = help
        self.show = show
        self.assign = assign
    }

    /// "check" of "check.interval"; "" for a key without a section.
    public var section: String { key.contains(".") ? String(key.prefix { $0 != "." }) : "" }
    /// "interval" of "check.interval".
    public var name: String { key.contains(".") ? String(key.drop { $0 != "." }.dropFirst()) : key }
}

/// Typed constructors, so that each row names its property once and cannot store a value of the
/// wrong kind.
extension SettingRow {
    public static func integer<Value: FixedWidthInteger & Sendable>(
        _ key: String, _ property: WritableKeyPath<Target, Value> & Sendable, _ kind: SettingKind,
        default defaultValue: Value? = nil, env: String?, flag: String?, help: String
    ) -> SettingRow {
        SettingRow(
            key: key, kind: kind, defaultValue: defaultValue.map { .value(.integer(Int64($0))) } ?? .none, environmentVariable: env,
            flag: flag, help: help, show: nil,
            assign: { settings, value in if case .integer(let integer) = value { settings[keyPath: property] = Value(clamping: integer) } })
    }

    /// An integer that may be left out, which `absent` explains in `config`.
    public static func optionalInteger<Value: FixedWidthInteger & Sendable>(
        _ key: String, _ property: WritableKeyPath<Target, Value?> & Sendable, _ kind: SettingKind, absent: String,
        env: String?, flag: String?, help: String
    ) -> SettingRow {
        var row = SettingRow(
            key: key, kind: kind, environmentVariable: env, flag: flag, help: help,
            show: { settings in settings[keyPath: property].map { "\($0)" } ?? "(unset: \(absent))" },
            assign: { settings, value in if case .integer(let integer) = value { settings[keyPath: property] = Value(clamping: integer) } })
        row.absent = absent
        return row
    }

    public static func number(
        _ key: String, _ property: WritableKeyPath<Target, Double> & Sendable, _ kind: SettingKind,
        default defaultValue: Double? = nil, env: String?, flag: String?, help: String
    ) -> SettingRow {
        SettingRow(
            key: key, kind: kind, defaultValue: defaultValue.map { .value(.number($0)) } ?? .none, environmentVariable: env, flag: flag,
            help: help,
            assign: { settings, value in
                switch value {
                case .number(let number): settings[keyPath: property] = number
                case .integer(let integer): settings[keyPath: property] = Double(integer)
                default: break
                }
            })
    }

    public static func boolean(
        _ key: String, _ property: WritableKeyPath<Target, Bool> & Sendable,
        default defaultValue: Bool? = nil, env: String?, flag: String?, help: String
    ) -> SettingRow {
        SettingRow(
            key: key, kind: .boolean, defaultValue: defaultValue.map { .value(.boolean($0)) } ?? .none, environmentVariable: env,
            flag: flag, help: help,
            assign: { settings, value in if case .boolean(let boolean) = value { settings[keyPath: property] = boolean } })
    }

    /// A text setting whose checked text converts to the property's type (a choice, a URL, a key…).
    public static func text<Value>(
        _ key: String, _ property: WritableKeyPath<Target, Value> & Sendable, _ kind: SettingKind,
        default defaultValue: Default = .none, env: String?, flag: String?, help: String, show: (@Sendable (Target) -> String)? = nil,
        convert: @escaping @Sendable (String) -> Value
    ) -> SettingRow {
        SettingRow(
            key: key, kind: kind, defaultValue: defaultValue, environmentVariable: env, flag: flag, help: help, show: show,
            assign: { settings, value in if case .text(let text) = value { settings[keyPath: property] = convert(text) } })
    }

    /// A list of texts, stored as it is.
    public static func textList(
        _ key: String, _ property: WritableKeyPath<Target, [String]> & Sendable, _ kind: SettingKind, env: String?, flag: String?,
        help: String, show: (@Sendable (Target) -> String)? = nil
    ) -> SettingRow {
        SettingRow(
            key: key, kind: kind, environmentVariable: env, flag: flag, help: help, show: show,
            assign: { settings, value in
                guard case .list(let items) = value else { return }
                settings[keyPath: property] = items.compactMap { if case .text(let text) = $0 { text } else { nil } }
            })
    }

    /// A list of integers, stored as it is.
    public static func integerList(
        _ key: String, _ property: WritableKeyPath<Target, [Int64]> & Sendable, _ kind: SettingKind, env: String?, flag: String?,
        help: String, show: (@Sendable (Target) -> String)? = nil
    ) -> SettingRow {
        SettingRow(
            key: key, kind: kind, environmentVariable: env, flag: flag, help: help, show: show,
            assign: { settings, value in
                guard case .list(let items) = value else { return }
                settings[keyPath: property] = items.compactMap { if case .integer(let integer) = $0 { integer } else { nil } }
            })
    }

    /// An object or a list of objects, decoded as `Raw` and converted by `apply`, which may refuse it.
    public static func structured<Raw: Decodable & Sendable>(
        _ key: String, _ raw: Raw.Type, describe: String, help: String, show: @escaping @Sendable (Target) -> String,
        apply: @escaping @Sendable (Raw, inout Target) throws(SettingProblem) -> Void
    ) -> SettingRow {
        SettingRow(
            key: key, kind: .structured(describe: describe), environmentVariable: nil, flag: nil, help: help, show: show,
            assign: { (settings, value) throws(SettingProblem) in
                guard case .structured(let input) = value else { return }
                try apply(try input.decode(as: Raw.self), &settings)
            })
    }
}

/// A rule between two settings, checked once each has its effective value. When it fails, the
/// error points at where `blamed` was set, or at `other` when `blamed` is only a default.
public struct SettingConstraint<Target>: Sendable {
    public var blamed: String
    public var other: String
    /// The broken rule as a clause naming both keys, or nil when the rule holds.
    public var problem: @Sendable (Target) -> String?

    public init(blamed: String, other: String, problem: @escaping @Sendable (Target) -> String?) {
        self.blamed = blamed
        self.other = other
        self.problem = problem
    }
}
