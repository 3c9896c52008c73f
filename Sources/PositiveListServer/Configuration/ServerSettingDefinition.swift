import Foundation
import Settings

/// One setting of the server's configuration file: its name there, what it accepts, its one-line
/// doc, how it is read, checked and shown. The default stays on the `ServerConfiguration`
/// property (a fresh configuration holds every default), so a setting is its property plus one
/// row of ``ServerSettingRegistry``.
struct ServerSettingDefinition: Sendable {
    /// Stores a value read from the file into the configuration, turning it into its own type
    /// with the error a user sees when it cannot be.
    typealias Apply = @Sendable (inout ServerConfiguration, _ path: String) throws(ConfigurationError) -> Void

    /// The name in the JSON file.
    var key: String
    /// What the file may hold, in words, for `tracer-server config --help`.
    var accepts: String
    var help: String
    /// Decodes the setting's raw value (first, for every setting, so that a value of the wrong
    /// JSON type is reported before any other problem); the result applies it.
    var read: @Sendable (KeyedDecodingContainer<ServerSettingKey>) throws -> Apply
    /// What is wrong with the setting's effective value, as the clause after its name, or nil.
    var problem: @Sendable (ServerConfiguration) -> String?
    /// The effective value as `tracer-server config` shows it.
    var show: @Sendable (ServerConfiguration) -> String
    /// How a value typed in the environment or on the command line becomes the file's JSON value;
    /// nil for a setting only the file may give (a secret, or an object).
    var textForm: ServerSettingTextForm? = nil
}

struct ServerSettingKey: CodingKey {
    var stringValue: String
    var intValue: Int? { nil }
    init(_ name: String) { stringValue = name }
    init?(stringValue: String) { self.stringValue = stringValue }
    init?(intValue: Int) { nil }
}

/// The bounds of a numeric setting; they make both its check's message and its `accepts` text.
struct SettingBounds<Value: Comparable & Numeric & Sendable>: Sendable {
    var lower: Value
    var upper: Value?
    /// Words after a bound in the message: "1.0 (no fake keys)".
    var lowerNote: String? = nil
    var upperNote: String? = nil
    /// Words after the whole message: "(leave it out to turn the long poll off)".
    var hint: String? = nil

    func contains(_ value: Value) -> Bool {
        value >= lower && upper.map { value <= $0 } ?? true
    }

    /// The clause after the setting's name, as the checks have always worded it.
    var requirement: String {
        let rule: String
        if let upper {
            rule = "must be between \(Self.bound(lower, lowerNote)) and \(Self.bound(upper, upperNote))"
        } else if lower == .zero {
            rule = "must not be negative"
        } else {
            rule = "must be at least \(lower)"
        }
        return hint.map { rule + " (\($0))" } ?? rule
    }

    var range: String {
        upper.map { "\(lower) to \($0)" } ?? "at least \(lower)"
    }

    private static func bound(_ value: Value, _ note: String?) -> String {
        note.map { "\(value) (\($0))" } ?? "\(value)"
    }
}

/// Typed constructors, so each row names its property once and reads, checks and shows it alike.
extension ServerSettingDefinition {
    static func number<Value: Comparable & Numeric & Codable & Sendable>(
        _ key: String, _ property: WritableKeyPath<ServerConfiguration, Value> & Sendable, _ bounds: SettingBounds<Value>,
        help: String
    ) -> ServerSettingDefinition {
        ServerSettingDefinition(
            key: key, accepts: "\(Value.self == Double.self ? "a number" : "an integer"), \(bounds.range)", help: help,
            read: { container in
                let value = try container.decodeIfPresent(Value.self, forKey: ServerSettingKey(key))
                return { configuration, _ in if let value { configuration[keyPath: property] = value } }
            },
            problem: { bounds.contains($0[keyPath: property]) ? nil : "\(key) \(bounds.requirement)" },
            show: { "\($0[keyPath: property])" }, textForm: Value.self == Double.self ? .number : .integer)
    }

    /// A numeric setting that may be left out, which means what `absent` says.
    static func optionalNumber<Value: Comparable & Numeric & Codable & Sendable>(
        _ key: String, _ property: WritableKeyPath<ServerConfiguration, Value?> & Sendable, _ bounds: SettingBounds<Value>,
        absent: String, help: String
    ) -> ServerSettingDefinition {
        ServerSettingDefinition(
            key: key, accepts: "an integer, \(bounds.range); left out: \(absent)", help: help,
            read: { container in
                let value = try container.decodeIfPresent(Value.self, forKey: ServerSettingKey(key))
                return { configuration, _ in if let value { configuration[keyPath: property] = value } }
            },
            problem: { configuration in
                configuration[keyPath: property].map { bounds.contains($0) ? nil : "\(key) \(bounds.requirement)" } ?? nil
            },
            show: { configuration in configuration[keyPath: property].map { "\($0)" } ?? "(unset: \(absent))" },
            textForm: .integer)
    }

    /// A setting whose JSON value (a Boolean, a list) is stored as it is, checked by `problem`.
    static func plain<Value: Codable & Sendable>(
        _ key: String, _ property: WritableKeyPath<ServerConfiguration, Value> & Sendable, accepts: String, help: String,
        problem: @escaping @Sendable (ServerConfiguration) -> String? = { _ in nil },
        show: @escaping @Sendable (Value) -> String = { "\($0)" }
    ) -> ServerSettingDefinition {
        ServerSettingDefinition(
            key: key, accepts: accepts, help: help,
            read: { container in
                let value = try container.decodeIfPresent(Value.self, forKey: ServerSettingKey(key))
                return { configuration, _ in if let value { configuration[keyPath: property] = value } }
            },
            problem: problem, show: { show($0[keyPath: property]) }, textForm: ServerSettingTextForm(for: Value.self))
    }

    /// A setting whose JSON value must be converted (and may be refused) on the way in.
    static func converted<Raw: Decodable & Sendable>(
        _ key: String, _ raw: Raw.Type, accepts: String, help: String,
        apply: @escaping @Sendable (Raw, inout ServerConfiguration, String) throws(ConfigurationError) -> Void,
        problem: @escaping @Sendable (ServerConfiguration) -> String? = { _ in nil },
        show: @escaping @Sendable (ServerConfiguration) -> String, textForm: ServerSettingTextForm? = nil
    ) -> ServerSettingDefinition {
        ServerSettingDefinition(
            key: key, accepts: accepts, help: help,
            read: { container in
                let value = try container.decodeIfPresent(Raw.self, forKey: ServerSettingKey(key))
                return { (configuration, path) throws(ConfigurationError) in
                    if let value { try apply(value, &configuration, path) }
                }
            },
            problem: problem, show: show, textForm: textForm)
    }
}

/// How a setting's value is typed outside the file: one form per JSON type a row reads.
enum ServerSettingTextForm: Sendable {
    case integer, number, boolean, string
    /// Comma-separated: "10.0.0.1, 10.0.0.2".
    case stringList, integerList

    init?<Value>(for type: Value.Type) {
        switch type {
        case is Bool.Type: self = .boolean
        case is [String].Type: self = .stringList
        case is [Int64].Type, is [Int].Type: self = .integerList
        default: return nil
        }
    }

    /// The JSON value the text stands for, or nil when it is not of this form.
    func json(_ text: String) -> Any? {
        switch self {
        case .integer: return SettingText.integer(text)
        case .number: return SettingText.number(text)
        case .boolean: return SettingText.boolean(text)
        case .string: return text
        case .stringList: return SettingText.items(text)
        case .integerList:
            let integers = SettingText.items(text).map(SettingText.integer)
            return integers.contains { $0 == nil } ? nil : integers.compactMap { $0 }
        }
    }

    /// What the text must be, after "must be".
    var expected: String {
        switch self {
        case .integer: "an integer"
        case .number: "a number"
        case .boolean: "true or false"
        case .string: "text"
        case .stringList: "a list joined with commas"
        case .integerList: "integers joined with commas"
        }
    }
}

/// The names a setting has outside the file, derived from its key so that no row spells them:
/// `maxIDsPerHistory` is `TRACER_SERVER_MAX_IDS_PER_HISTORY` and `--max-ids-per-history`.
extension ServerSettingDefinition {
    static let environmentPrefix = "TRACER_SERVER_"

    var environmentVariable: String? {
        textForm == nil ? nil : Self.environmentPrefix + words.joined(separator: "_").uppercased()
    }

    var flag: String? {
        textForm == nil ? nil : "--" + words.joined(separator: "-").lowercased()
    }

    /// The key cut before each capital that follows a small letter or digit ("IDs" stays one word).
    private var words: [String] {
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
