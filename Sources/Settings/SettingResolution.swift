import Foundation

/// The effective settings of a program: each from its flag, else its environment variable, else
/// the configuration file, else its default; the same order for the node and the server.
public struct SettingResolution<Target: Sendable>: Sendable {
    public struct Entry: Sendable {
        public var row: SettingRow<Target>
        /// Nil for a setting without a default that nothing set.
        public var value: SettingValue?
        public var source: SettingSource

        /// The value as `config` shows it.
        public func shown(in settings: Target) -> String {
            row.show?(settings) ?? value?.description ?? "(unset)"
        }
    }

    public var settings: Target
    /// Every setting, in the registry's order.
    public var entries: [Entry]

    public func source(of key: String) -> SettingSource? { entries.first { $0.row.key == key }?.source }

    /// A value the configuration file gives, already checked against its row's kind.
    public struct FileValue: Sendable {
        public var value: SettingValue
        public var source: SettingSource

        public init(value: SettingValue, source: SettingSource) {
            self.value = value
            self.source = source
        }
    }

    /// - Parameters:
    ///   - start: the settings before any row is applied (the server's carry its defaults).
    ///   - file: the file's checked values by key.
    ///   - flags: the flags given, keyed by setting key, with the value as typed ("true" for a
    ///     switch). Leave out flags not given, so that the file and environment still apply.
    ///   - paths: how a path typed on the command line or in a variable is made absolute.
    public init(
        rows: [SettingRow<Target>], constraints: [SettingConstraint<Target>] = [], start: Target, file: [String: FileValue],
        flags: [String: String], environment: [String: String], paths: PathContext
    ) throws(SettingError) {
        var settings = start
        var entries: [Entry] = []
        for row in rows {
            // Every layer is checked, not only the winning one: a bad variable is reported even
            // when a flag hides it today, rather than surfacing later without the flag.
            var fromEnvironment: FileValue?
            if let variable = row.environmentVariable, let raw = SettingText.environmentValue(variable, in: environment) {
                fromEnvironment = try Self.checked(raw, row: row, source: .environment(variable: variable), paths: paths)
            }
            var fromFlag: FileValue?
            if let flag = row.flag, let raw = flags[row.key] {
                fromFlag = try Self.checked(raw, row: row, source: .flag(flag), paths: paths)
            }
            let given = fromFlag ?? fromEnvironment ?? file[row.key]
            let value: SettingValue?
            let source: SettingSource
            if let given {
                (value, source) = (given.value, given.source)
            } else {
                (value, source) = try Self.defaultValue(of: row, environment: environment)
            }
            if let value {
                do {
                    try row.assign(&settings, value)
                } catch {
                    throw .invalidValue(key: row.key, source: source, problem: error)
                }
            }
            entries.append(Entry(row: row, value: value, source: source))
        }
        self.settings = settings
        self.entries = entries
        for constraint in constraints {
            guard let problem = constraint.problem(settings) else { continue }
            // Blamed: where `blamed` was given, unless `other` was given where it weighs more (a
            // flag over the file): that is the value the user just changed.
            let blamed = self.source(of: constraint.blamed) ?? .builtIn(detail: nil)
            let other = self.source(of: constraint.other) ?? .builtIn(detail: nil)
            let (key, source) = other.precedence > blamed.precedence ? (constraint.other, other) : (constraint.blamed, blamed)
            throw .conflict(key: key, source: source, problem: problem)
        }
    }

    private static func checked(_ raw: String, row: SettingRow<Target>, source: SettingSource, paths: PathContext) throws(SettingError) -> FileValue {
        switch row.kind.check(text: raw, paths: paths) {
        case .success(let value): return FileValue(value: value, source: source)
        case .failure(let problem): throw .invalidValue(key: row.key, source: source, problem: problem)
        }
    }

    private static func defaultValue(of row: SettingRow<Target>, environment: [String: String]) throws(SettingError) -> (SettingValue?, SettingSource) {
        switch row.defaultValue {
        case .none:
            return (nil, .builtIn(detail: nil))
        case .value(let value):
            return (value, .builtIn(detail: nil))
        case .computed(let find):
            guard let found = find(environment) else { throw .noDefault(key: row.key, flag: row.flag) }
            return (found.value, .builtIn(detail: found.detail))
        }
    }
}

/// Why settings could not be resolved; each program words it for its users.
public enum SettingError: Error, Equatable, Sendable {
    case invalidValue(key: String, source: SettingSource, problem: SettingProblem)
    /// Two settings that are fine alone but not together; `key` is the one blamed.
    case conflict(key: String, source: SettingSource, problem: String)
    /// A setting without a default found from HOME or XDG variables, when neither is set.
    case noDefault(key: String, flag: String?)
}

/// The setting flags of a command line (`--check-interval 120`, `--check-interval=120`, the switch
/// `--continuous-scan`), taken out before a command parses its own options.
public enum SettingFlagSplit {
    public struct MissingValue: Error, Equatable, CustomStringConvertible {
        public var flag: String
        public init(flag: String) { self.flag = flag }
        public var description: String { "The option \(flag) needs a value, as in \(flag) VALUE or \(flag)=VALUE." }
    }

    /// Setting key → value as typed, and the arguments left for the command. Stops at "--".
    public static func split<Target>(
        _ arguments: [String], rows: [SettingRow<Target>]
    ) throws(MissingValue) -> (settings: [String: String], rest: [String]) {
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
            guard let flag = SettingFlagArgument(argument), let row = rows.first(where: { $0.flag == flag.name }) else {
                rest.append(argument)
                continue
            }
            if let inlineValue = flag.inlineValue {
                settings[row.key] = inlineValue
            } else if row.kind.isSwitch {
                // A switch (false only as --name=false): a following word may be a command's
                // argument (an account named "on"), so it is never taken as the value.
                settings[row.key] = "true"
            } else if index < arguments.count, !arguments[index].hasPrefix("--") {
                settings[row.key] = arguments[index]
                index += 1
            } else {
                throw MissingValue(flag: flag.name)
            }
        }
        return (settings, rest)
    }
}
