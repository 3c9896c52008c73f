import Foundation
import Settings

/// What values a setting accepts. `check` returns the value or a problem phrased to follow the
/// setting's key, as in "check.interval must be at least 60 seconds, got 5".
enum SettingKind: Sendable {
    case integer(minimum: Int64, maximum: Int64? = nil, unit: String = "")
    /// A number that may have a fraction; `minimumIncluded` false means strictly above `minimum`.
    case number(minimum: Double, minimumIncluded: Bool = true, maximum: Double? = nil)
    case boolean
    case choice([String])
    /// Free text that `problem` accepts when it returns nil.
    case text(describe: String, problem: @Sendable (String) -> String?)
    /// A file or directory; made absolute against `PathContext`.
    case path

    /// A value from the configuration file, whose TOML type must fit.
    func check(_ value: TOMLValue, paths: PathContext) -> Result<SettingValue, SettingProblem> {
        switch (self, value) {
        case (.integer, .integer(let integer)): return checkRange(integer)
        case (.number, .integer(let integer)): return checkRange(Double(integer))
        case (.number, .float(let number)): return checkRange(number)
        case (.boolean, .boolean(let boolean)): return .success(.boolean(boolean))
        case (.choice, .string(let text)), (.text, .string(let text)), (.path, .string(let text)):
            return check(text: text, paths: paths)
        default:
            return .failure(SettingProblem("must be \(expected), got \(value.typeName)"))
        }
    }

    /// A value typed on the command line or set in the environment.
    func check(text: String, paths: PathContext) -> Result<SettingValue, SettingProblem> {
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
        case .path:
            guard !text.isEmpty else { return .failure(SettingProblem("must not be empty; leave it out to use the default")) }
            guard !text.contains("\0") else { return .failure(SettingProblem("must not contain a NUL character")) }
            return .success(.text(paths.absolute(text)))
        }
    }

    /// The accepted values, as in "must be <expected>".
    var expected: String {
        switch self {
        case .integer(let minimum, let maximum, let unit):
            let unitSuffix = unit.isEmpty ? "" : " (\(unit))"
            if let maximum { return "an integer from \(minimum) to \(maximum)\(unitSuffix)" }
            return "an integer of at least \(minimum)\(unitSuffix)"
        case .number(let minimum, let included, let maximum):
            let lower = included ? "at least \(SettingValue.number(minimum))" : "above \(SettingValue.number(minimum))"
            return "a number \(lower)" + (maximum.map { " and at most \(SettingValue.number($0))" } ?? "")
        case .boolean: return "true or false"
        case .choice(let choices): return "one of " + choices.joined(separator: ", ")
        case .text(let describe, _): return describe
        case .path: return "a path"
        }
    }

    private func checkRange(_ integer: Int64) -> Result<SettingValue, SettingProblem> {
        guard case .integer(let minimum, let maximum, let unit) = self else { return .success(.integer(integer)) }
        let unitSuffix = unit.isEmpty ? "" : " " + unit
        if let maximum, !(minimum...maximum).contains(integer) {
            return .failure(SettingProblem("must be between \(minimum) and \(maximum)\(unitSuffix), got \(integer)"))
        }
        if integer < minimum {
            return .failure(SettingProblem("must be at least \(minimum)\(unitSuffix), got \(integer)"))
        }
        return .success(.integer(integer))
    }

    private func checkRange(_ number: Double) -> Result<SettingValue, SettingProblem> {
        guard case .number(let minimum, let included, let maximum) = self else { return .success(.number(number)) }
        let tooSmall = included ? number < minimum : number <= minimum
        if tooSmall || maximum.map({ number > $0 }) == true {
            return .failure(SettingProblem("must be \(expected), got \(SettingValue.number(number))"))
        }
        return .success(.number(number))
    }
}

/// Why a value was refused, phrased to follow the setting's key.
struct SettingProblem: Error, Equatable, Sendable {
    var text: String
    init(_ text: String) { self.text = text }
}

/// How relative paths and `~/` are made absolute: against the configuration file's directory for
/// values in the file, against the working directory for flags and variables.
struct PathContext: Sendable {
    var baseDirectory: String
    var home: String?

    func absolute(_ path: String) -> String {
        if path == "~" || path.hasPrefix("~/"), let home, home.hasPrefix("/") {
            return home + path.dropFirst()
        }
        if path.hasPrefix("/") { return path }
        return (baseDirectory.hasSuffix("/") ? baseDirectory : baseDirectory + "/") + path
    }
}
