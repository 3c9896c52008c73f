import Foundation

/// How a value typed in the environment or on the command line reads, the same for the node and
/// the server; each side words its own "must be …" message around a nil.
public enum SettingText {
    /// The variable's value; an empty variable is no value, so `TRACER_X=` unsets nothing.
    public static func environmentValue(_ variable: String, in environment: [String: String]) -> String? {
        guard let text = environment[variable], !text.isEmpty else { return nil }
        return text
    }

    /// "120", " 1_000 ": spaces around and underscores between digits allowed, as in TOML.
    public static func integer(_ text: String) -> Int64? {
        Int64(text.trimmingCharacters(in: .whitespaces).replacingOccurrences(of: "_", with: ""))
    }

    /// A finite number; "inf" and "nan" are not.
    public static func number(_ text: String) -> Double? {
        Double(text.trimmingCharacters(in: .whitespaces)).flatMap { $0.isFinite ? $0 : nil }
    }

    /// true, yes, on, 1 / false, no, off, 0, in any case.
    public static func boolean(_ text: String) -> Bool? {
        switch text.trimmingCharacters(in: .whitespaces).lowercased() {
        case "true", "yes", "on", "1": true
        case "false", "no", "off", "0": false
        default: nil
        }
    }

    /// "10.0.0.1, 10.0.0.2": the items joined with commas, trimmed, empty ones dropped.
    public static func items(_ text: String) -> [String] {
        text.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
    }
}

/// One argument that may be a setting flag: `--check-interval`, or `--check-interval=120` with
/// its value inline.
public struct SettingFlagArgument: Sendable, Equatable {
    /// With its dashes: "--check-interval".
    public var name: String
    public var inlineValue: String?

    /// Nil when the argument does not start with "--".
    public init?(_ argument: String) {
        guard argument.hasPrefix("--") else { return nil }
        name = String(argument.prefix { $0 != "=" })
        inlineValue = argument.contains("=") ? String(argument.drop { $0 != "=" }.dropFirst()) : nil
    }
}

extension String {
    /// The text as it may appear inside a one-line message: quoted, control characters escaped,
    /// and shortened, since it may come from a hostile file or variable.
    public var quotedForMessage: String {
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
