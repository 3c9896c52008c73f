import Foundation

/// A setting's checked value, before it becomes a typed property of `NodeSettings`.
enum SettingValue: Equatable, Sendable, CustomStringConvertible, Encodable {
    case text(String)
    case integer(Int64)
    case number(Double)
    case boolean(Bool)

    var description: String {
        switch self {
        case .text(let text): text
        case .integer(let integer): String(integer)
        case .number(let number): number == number.rounded() && abs(number) < 1e15 ? String(Int64(number)) : String(number)
        case .boolean(let boolean): String(boolean)
        }
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .text(let text): try container.encode(text)
        case .integer(let integer): try container.encode(integer)
        case .number(let number): try container.encode(number)
        case .boolean(let boolean): try container.encode(boolean)
        }
    }
}
