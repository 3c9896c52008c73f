/// A value the configuration reader understands: the scalar subset of TOML.
enum TOMLValue: Equatable, Sendable {
    case string(String)
    case integer(Int64)
    case float(Double)
    case boolean(Bool)

    /// What the value is, for messages such as "must be an integer, got a string".
    var typeName: String {
        switch self {
        case .string: "a string"
        case .integer: "an integer"
        case .float: "a float"
        case .boolean: "a boolean"
        }
    }
}

/// One `key = value` line.
struct TOMLEntry: Equatable, Sendable {
    var key: String
    var value: TOMLValue
    var line: Int
}

/// One `[table]` and its entries in file order; the keys before the first header form the
/// table named "" (line 0).
struct TOMLTable: Equatable, Sendable {
    var name: String
    var line: Int
    var entries: [TOMLEntry]
}

/// A parsed file: its tables in file order, each name at most once.
struct TOMLDocument: Equatable, Sendable {
    var tables: [TOMLTable]
}

/// Why a file is not TOML we accept; `line` counts from 1.
struct TOMLSyntaxError: Error, Equatable, Sendable {
    var line: Int
    var problem: String
}
