import Foundation

/// A setting's checked value, before a program stores it in a typed property of its own.
public enum SettingValue: Equatable, Sendable, CustomStringConvertible, Encodable {
    case text(String)
    case integer(Int64)
    case number(Double)
    case boolean(Bool)
    case list([SettingValue])
    /// A value its row converts itself (an object, a list of objects), as the file gave it.
    case structured(SettingInput)

    public var description: String {
        switch self {
        case .text(let text): text
        case .integer(let integer): String(integer)
        case .number(let number): number == number.rounded() && abs(number) < 1e15 ? String(Int64(number)) : String(number)
        case .boolean(let boolean): String(boolean)
        case .list(let items): items.map(\.description).joined(separator: ", ")
        case .structured(let input): input.json
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .text(let text): try container.encode(text)
        case .integer(let integer): try container.encode(integer)
        case .number(let number): try container.encode(number)
        case .boolean(let boolean): try container.encode(boolean)
        case .list(let items): try container.encode(items)
        case .structured(let input): try container.encode(input)
        }
    }
}

/// A value as a configuration file holds it, whatever the file's format: the node's TOML and the
/// server's JSON both become this before a setting's kind checks it.
public indirect enum SettingInput: Equatable, Sendable, Codable {
    case text(String)
    case integer(Int64)
    case number(Double)
    case boolean(Bool)
    case list([SettingInput])
    case object([String: SettingInput])

    /// What the value is, for messages such as "must be an integer, got a string".
    public var typeName: String {
        switch self {
        case .text: "a string"
        case .integer: "an integer"
        case .number: "a float"
        case .boolean: "a boolean"
        case .list: "a list"
        case .object: "an object"
        }
    }

    /// JSON's types, tried from the narrowest: `true` is no number, `3` no float.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if let boolean = try? container.decode(Bool.self) {
            self = .boolean(boolean)
        } else if let integer = try? container.decode(Int64.self) {
            self = .integer(integer)
        } else if let number = try? container.decode(Double.self) {
            self = .number(number)
        } else if let text = try? container.decode(String.self) {
            self = .text(text)
        } else if let items = try? container.decode([SettingInput].self) {
            self = .list(items)
        } else if let fields = try? container.decode([String: SettingInput?].self) {
            // A field set to null is left out, as JSON writers do for an absent optional.
            self = .object(fields.compactMapValues { $0 })
        } else {
            throw DecodingError.dataCorruptedError(in: container, debugDescription: "holds a null, which no setting takes; leave it out instead")
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .text(let text): try container.encode(text)
        case .integer(let integer): try container.encode(integer)
        case .number(let number): try container.encode(number)
        case .boolean(let boolean): try container.encode(boolean)
        case .list(let items): try container.encode(items)
        case .object(let fields): try container.encode(fields)
        }
    }

    /// The value as compact JSON, keys sorted.
    public var json: String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return (try? encoder.encode(self)).map { String(decoding: $0, as: UTF8.self) } ?? "?"
    }

    /// Decodes the value as `type` (a row's own shape for an object), with the decoder's complaint
    /// in words that name the field.
    public func decode<Value: Decodable>(as type: Value.Type) throws(SettingProblem) -> Value {
        do {
            return try JSONDecoder().decode(Value.self, from: try JSONEncoder().encode(self))
        } catch let error as DecodingError {
            throw SettingProblem(describing: error)
        } catch {
            throw SettingProblem("could not be read (\(error))")
        }
    }
}

extension SettingProblem {
    /// A decoder's complaint about a field of an object or list setting: "url is missing" and
    /// "poolSize must be an integer" name the field after the setting's key.
    public init(describing error: DecodingError) {
        func field(_ path: [any CodingKey]) -> String? {
            let text = path.map { $0.intValue.map { "[\($0)]" } ?? $0.stringValue }.reduce("") { shown, part in
                shown.isEmpty || part.hasPrefix("[") ? shown + part : shown + "." + part
            }
            return text.isEmpty ? nil : text
        }
        switch error {
        case .keyNotFound(let key, let context):
            self.init("is missing", field: field(context.codingPath + [key]))
        case .typeMismatch(let type, let context), .valueNotFound(let type, let context):
            self.init("must be \(Self.typeName(type))", field: field(context.codingPath))
        case .dataCorrupted(let context):
            self.init(context.debugDescription, field: field(context.codingPath))
        @unknown default:
            self.init("could not be read")
        }
    }

    private static func typeName(_ type: Any.Type) -> String {
        switch type {
        case is String.Type, is String?.Type: "a string"
        case is Bool.Type, is Bool?.Type: "true or false"
        case is Int.Type, is Int64.Type, is Int?.Type, is Int64?.Type: "an integer"
        case is Double.Type, is Double?.Type: "a number"
        default: "\(type)".hasPrefix("Array") ? "a list" : "an object"
        }
    }
}
