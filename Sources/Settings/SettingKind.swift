import Foundation

/// The range a numeric setting accepts; it makes both the refusal and the `accepts` text.
public struct SettingBounds<Value: Comparable & Sendable & CustomStringConvertible>: Sendable {
    public var lower: Value
    /// Excluded: the value must be above `lower` (a weight of 0 would mean nothing).
    public var lowerExcluded: Bool
    public var upper: Value?
    /// "seconds", "dB"; after the bounds.
    public var unit: String
    /// Words after a bound: "1 (no fake keys)".
    public var lowerNote: String?
    public var upperNote: String?
    /// Words after the rule: "(leave it out to turn the long poll off)".
    public var hint: String?

    public init(
        _ lower: Value, _ upper: Value? = nil, unit: String = "", lowerExcluded: Bool = false, lowerNote: String? = nil, upperNote: String? = nil,
        hint: String? = nil
    ) {
        self.lower = lower
        self.upper = upper
        self.unit = unit
        self.lowerExcluded = lowerExcluded
        self.lowerNote = lowerNote
        self.upperNote = upperNote
        self.hint = hint
    }

    public func contains(_ value: Value) -> Bool {
        (lowerExcluded ? value > lower : value >= lower) && upper.map { value <= $0 } ?? true
    }

    /// The clause after the setting's key: "must be between 60 and 86400 seconds (…)".
    func requirement(_ show: (Value) -> String) -> String {
        let unit = self.unit.isEmpty ? "" : " " + self.unit
        func bound(_ value: Value, _ note: String?) -> String { show(value) + (note.map { " (\($0))" } ?? "") }
        let rule: String
        if let upper, lowerExcluded {
            rule = "must be above \(bound(lower, lowerNote)) and at most \(bound(upper, upperNote))\(unit)"
        } else if let upper {
            rule = "must be between \(bound(lower, lowerNote)) and \(bound(upper, upperNote))\(unit)"
        } else if lowerExcluded {
            rule = "must be above \(bound(lower, lowerNote))\(unit)"
        } else if show(lower) == "0" {
            rule = "must not be negative"
        } else {
            rule = "must be at least \(bound(lower, lowerNote))\(unit)"
        }
        return hint.map { rule + " (\($0))" } ?? rule
    }

    /// "from 60 to 86400 (seconds)", "at least 1".
    func range(_ show: (Value) -> String) -> String {
        let unit = self.unit.isEmpty ? "" : " (\(self.unit))"
        let from = lowerExcluded ? "above \(show(lower))" : nil
        if let upper { return (from.map { $0 + " and at most" } ?? "from \(show(lower)) to") + " \(show(upper))\(unit)" }
        return (from ?? "of at least \(show(lower))") + unit
    }
}

/// What values a setting accepts. `check` returns the value or a problem phrased to follow the
/// setting's key, as in "check.interval must be between 60 and 86400 seconds, got 5".
public enum SettingKind: Sendable {
    case integer(SettingBounds<Int64>)
    case number(SettingBounds<Double>)
    case boolean
    case choice([String])
    /// Free text that `problem` accepts when it returns nil; never empty.
    case text(describe: String, problem: @Sendable (String) -> String?)
    /// The same where empty text means something (no prefix), or where `problem` words what an
    /// empty required value needs better than "must not be empty".
    case textOrEmpty(describe: String, problem: @Sendable (String) -> String?)
    /// A file or directory; made absolute against `PathContext`.
    case path
    /// A list of texts (a flag or variable joins them with commas); `problem` checks the whole list.
    case textList(describe: String, problem: @Sendable ([String]) -> String?)
    case integerList(describe: String, problem: @Sendable ([Int64]) -> String?)
    /// An object or a list of objects, which only the file can give and the row converts itself.
    case structured(describe: String)

    public static func integer(minimum: Int64, maximum: Int64? = nil, unit: String = "") -> SettingKind {
        .integer(SettingBounds(minimum, maximum, unit: unit))
    }

    /// `minimumIncluded` false means strictly above `minimum`.
    public static func number(minimum: Double, minimumIncluded: Bool = true, maximum: Double? = nil) -> SettingKind {
        .number(SettingBounds(minimum, maximum, lowerExcluded: !minimumIncluded))
    }

    /// A value from the configuration file, whose type must fit.
    public func check(_ value: SettingInput, paths: PathContext) -> Result<SettingValue, SettingProblem> {
        switch (self, value) {
        case (.integer, .integer(let integer)): return checkRange(integer)
        case (.number, .integer(let integer)): return checkRange(Double(integer))
        case (.number, .number(let number)): return checkRange(number)
        case (.boolean, .boolean(let boolean)): return .success(.boolean(boolean))
        case (.choice, .text(let text)), (.text, .text(let text)), (.textOrEmpty, .text(let text)), (.path, .text(let text)):
            return check(text: text, paths: paths)
        case (.textList(_, let problem), .list(let items)):
            var texts: [String] = []
            for item in items {
                guard case .text(let text) = item else { return .failure(SettingProblem("must be \(expected), got \(item.typeName) in it")) }
                texts.append(text)
            }
            return checkList(texts.map(SettingValue.text), problem(texts))
        case (.integerList(_, let problem), .list(let items)):
            var integers: [Int64] = []
            for item in items {
                guard case .integer(let integer) = item else { return .failure(SettingProblem("must be \(expected), got \(item.typeName) in it")) }
                integers.append(integer)
            }
            return checkList(integers.map(SettingValue.integer), problem(integers))
        case (.structured, _): return .success(.structured(value))
        default:
            return .failure(SettingProblem("must be \(expected), got \(value.typeName)"))
        }
    }

    /// A value typed on the command line or set in the environment.
    public func check(text: String, paths: PathContext) -> Result<SettingValue, SettingProblem> {
        switch self {
        case .integer:
            guard let integer = SettingText.integer(text) else { return .failure(SettingProblem("must be \(expected), got \(text.quotedForMessage)")) }
            return checkRange(integer)
        case .number:
            guard let number = SettingText.number(text) else {
                return .failure(SettingProblem("must be \(expected), got \(text.quotedForMessage)"))
            }
            return checkRange(number)
        case .boolean:
            guard let boolean = SettingText.boolean(text) else {
                return .failure(SettingProblem("must be true or false, got \(text.quotedForMessage)"))
            }
            return .success(.boolean(boolean))
        case .choice(let choices):
            guard choices.contains(text) else { return .failure(SettingProblem("must be \(expected), got \(text.quotedForMessage)")) }
            return .success(.text(text))
        case .text(_, let problem):
            guard !text.isEmpty else { return .failure(SettingProblem("must not be empty; leave it out to leave it unset")) }
            if let problem = problem(text) { return .failure(SettingProblem(problem)) }
            return .success(.text(text))
        case .textOrEmpty(_, let problem):
            if let problem = problem(text) { return .failure(SettingProblem(problem)) }
            return .success(.text(text))
        case .path:
            guard !text.isEmpty else { return .failure(SettingProblem("must not be empty; leave it out to use the default")) }
            guard !text.contains("\0") else { return .failure(SettingProblem("must not contain a NUL character")) }
            return .success(.text(paths.absolute(text)))
        case .textList(_, let problem):
            let texts = SettingText.items(text)
            return checkList(texts.map(SettingValue.text), problem(texts))
        case .integerList(_, let problem):
            let items = SettingText.items(text)
            let integers = items.compactMap(SettingText.integer)
            guard integers.count == items.count else {
                return .failure(SettingProblem("must be integers joined with commas, got \(text.quotedForMessage)"))
            }
            return checkList(integers.map(SettingValue.integer), problem(integers))
        case .structured:
            return .failure(SettingProblem("can only be given in the configuration file"))
        }
    }

    /// True for flags that take no value: present means true.
    public var isSwitch: Bool {
        if case .boolean = self { return true }
        return false
    }

    /// Whether a flag or an environment variable can give the value (not an object).
    public var hasTextForm: Bool {
        if case .structured = self { return false }
        return true
    }

    /// The accepted values, as in "must be <expected>".
    public var expected: String {
        switch self {
        case .integer(let bounds): return "an integer \(bounds.range(String.init))" + (bounds.hint.map { " (\($0))" } ?? "")
        case .number(let bounds): return "a number \(bounds.range { SettingValue.number($0).description })" + (bounds.hint.map { " (\($0))" } ?? "")
        case .boolean: return "true or false"
        case .choice(let choices): return "one of " + choices.joined(separator: ", ")
        case .text(let describe, _), .textOrEmpty(let describe, _), .textList(let describe, _), .integerList(let describe, _), .structured(let describe):
            return describe
        case .path: return "a path"
        }
    }

    private func checkRange(_ integer: Int64) -> Result<SettingValue, SettingProblem> {
        guard case .integer(let bounds) = self, !bounds.contains(integer) else { return .success(.integer(integer)) }
        return .failure(SettingProblem("\(bounds.requirement(String.init)), got \(integer)"))
    }

    private func checkRange(_ number: Double) -> Result<SettingValue, SettingProblem> {
        guard case .number(let bounds) = self, !bounds.contains(number) else { return .success(.number(number)) }
        let show = { (value: Double) in SettingValue.number(value).description }
        return .failure(SettingProblem("\(bounds.requirement(show)), got \(show(number))"))
    }

    private func checkList(_ items: [SettingValue], _ problem: String?) -> Result<SettingValue, SettingProblem> {
        problem.map { .failure(SettingProblem($0)) } ?? .success(.list(items))
    }
}

/// Why a value was refused, phrased to follow the setting's key ("must be …"); for an object,
/// the field it is about comes between ("database" + ".url" + " must be …").
public struct SettingProblem: Error, Equatable, Sendable {
    public var text: String
    /// ".url", "[0].name": the part of an object or list setting the problem is about.
    public var field: String?

    /// The text names the setting itself ("database.url must be …"), as the checks of an object's
    /// fields word it.
    public var namesItsSetting = false

    public init(_ text: String, field: String? = nil) {
        self.text = text
        self.field = field.map { $0.hasPrefix("[") || $0.hasPrefix(".") ? $0 : "." + $0 }
    }

    public init(namingItsSetting text: String) {
        self.text = text
        self.namesItsSetting = true
    }

    /// The problem named after its setting: "retentionDays must be …", "database.url is missing".
    public func named(_ key: String) -> String { namesItsSetting ? text : key + (field ?? "") + " " + text }
}

/// How relative paths and `~/` are made absolute: against the configuration file's directory for
/// values in the file, against the working directory for flags and variables.
public struct PathContext: Sendable {
    public var baseDirectory: String
    public var home: String?

    public init(baseDirectory: String, home: String?) {
        self.baseDirectory = baseDirectory
        self.home = home
    }

    public func absolute(_ path: String) -> String {
        if path == "~" || path.hasPrefix("~/"), let home, home.hasPrefix("/") {
            return home + path.dropFirst()
        }
        if path.hasPrefix("/") { return path }
        return (baseDirectory.hasSuffix("/") ? baseDirectory : baseDirectory + "/") + path
    }
}
