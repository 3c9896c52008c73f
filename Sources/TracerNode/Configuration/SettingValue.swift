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

/// Where a setting's effective value came from.
enum SettingSource: Equatable, Sendable, CustomStringConvertible, Encodable {
    /// The built-in default; `detail` says how a computed default was found, e.g. "$XDG_CACHE_HOME".
    case builtIn(detail: String?)
    case file(path: String, line: Int)
    case environment(variable: String)
    case flag(String)

    var description: String {
        switch self {
        case .builtIn(let detail): detail.map { "default (\($0))" } ?? "default"
        case .file(let path, let line): "\(path):\(line)"
        case .environment(let variable): "env \(variable)"
        case .flag(let flag): "flag \(flag)"
        }
    }

    /// How an error message points at the value: "tracer.toml line 4", "TRACER_X", "--x".
    var location: String {
        switch self {
        case .builtIn: "the default"
        case .file(let path, let line): "\(path) line \(line)"
        case .environment(let variable): variable
        case .flag(let flag): flag
        }
    }

    /// What the user can do about a bad value from here.
    var remedy: String {
        switch self {
        case .builtIn: "set it explicitly"
        case .file: "fix that line, or delete it to use the default"
        case .environment(let variable): "fix or unset \(variable)"
        case .flag(let flag): "fix the value given to \(flag)"
        }
    }

    private enum CodingKeys: String, CodingKey { case kind, detail, path, line, variable, flag }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        switch self {
        case .builtIn(let detail):
            try container.encode("default", forKey: .kind)
            try container.encodeIfPresent(detail, forKey: .detail)
        case .file(let path, let line):
            try container.encode("file", forKey: .kind)
            try container.encode(path, forKey: .path)
            try container.encode(line, forKey: .line)
        case .environment(let variable):
            try container.encode("environment", forKey: .kind)
            try container.encode(variable, forKey: .variable)
        case .flag(let flag):
            try container.encode("flag", forKey: .kind)
            try container.encode(flag, forKey: .flag)
        }
    }
}

extension String {
    /// The text as it may appear inside a one-line message: quoted, control characters escaped,
    /// and shortened, since it may come from a hostile file or variable.
    var quotedForMessage: String {
        var shown = ""
        for scalar in unicodeScalars.prefix(60) {
            switch scalar {
            case "\"": shown += "\\\""
            case "\\": shown += "\\\\"
            case _ where scalar.value < 0x20 || (0x7F..<0xA0).contains(scalar.value) || scalar == "\u{2028}" || scalar == "\u{2029}":
                shown += "\\u{" + String(scalar.value, radix: 16) + "}"
            default: shown.unicodeScalars.append(scalar)
            }
        }
        return "\"" + shown + (unicodeScalars.count > 60 ? "…" : "") + "\""
    }
}
