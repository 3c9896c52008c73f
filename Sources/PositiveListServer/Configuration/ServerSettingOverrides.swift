import Foundation
import Settings

/// Settings given outside the configuration file: a flag wins over its environment variable,
/// which wins over the file, which wins over the default (the node's order). Only settings a
/// text can give have them: authorities (tokens), database, objectStore and console stay in the
/// file, so no secret is ever typed where `ps` or a shell history shows it.
public struct ServerSettingOverrides: Sendable, Equatable {
    public var environment: [String: String]
    /// Setting key → value as typed, as ``ServerSettingFlags/split(_:)`` gives them.
    public var flags: [String: String]

    public static let none = ServerSettingOverrides(environment: [:], flags: [:])

    public init(environment: [String: String], flags: [String: String]) {
        self.environment = environment
        self.flags = flags
    }
}

/// The setting flags (`--retention-days 14`, `--retention-days=14`, `--trust-forwarded-for`)
/// taken out of a command line before the subcommand's own options are parsed, so that every
/// subcommand that reads the configuration accepts them without declaring each.
public enum ServerSettingFlags {
    /// Setting key → value as typed, and the arguments left for the subcommand. Stops at "--".
    public static func split(_ arguments: [String]) throws(SettingFlagSplit.MissingValue) -> (settings: [String: String], rest: [String]) {
        try SettingFlagSplit.split(arguments, rows: ServerSettingRegistry.all)
    }
}
