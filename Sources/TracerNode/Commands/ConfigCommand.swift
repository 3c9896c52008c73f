import ArgumentParser
import Foundation
import Settings

struct ConfigCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "config",
        abstract: "Show the effective configuration and where each value came from.",
        discussion: """
            Each setting comes from its flag, else its TRACER_* environment variable, else the \
            configuration file (TOML), else its default. Give setting flags to see what a command \
            given them would use; each sets the setting named beside it:

            \(SettingFlags.help)
            """)

    @OptionGroup var configOptions: ConfigOptions
    @Flag(help: "Print JSON instead of text.") var json = false
    @Argument(
        parsing: .allUnrecognized,
        help: ArgumentHelp("Setting flags, such as --check-interval 120 (listed above).", valueName: "setting-flag"))
    var settingFlags: [String] = []

    func validate() throws {
        _ = try SettingFlags.parse(settingFlags)
    }

    func run() throws {
        let flags = try SettingFlags.parse(settingFlags)
        let resolved = try configOptions.resolve(flags: flags)
        if json {
            try Output.printJSON(ConfigReport(resolved))
        } else {
            print(Self.text(resolved))
        }
    }

    static func text(_ resolved: ResolvedSettings) -> String {
        let file = resolved.configFile
        let fileLine: String
        if let path = file.path {
            let origin = file.origin.map { " (from \($0.rawValue))" } ?? ""
            fileLine = "Configuration file: \(path)\(origin)" + (file.exists ? "" : ", not present, so defaults apply")
        } else {
            fileLine = "Configuration file: none (neither HOME nor XDG_CONFIG_HOME is set)"
        }
        var rows = resolved.entries.map { entry in
            [entry.row.key, entry.value?.description ?? "(unset)", entry.source.description]
        }
        // The further lists ([lists.<name>]), which only the file sets.
        for list in resolved.settings.furtherLists {
            let source = file.path.map { SettingSource.file(path: $0, line: list.line).description } ?? ""
            let prefix = "lists.\(list.name)."
            rows += [
                [prefix + "url", list.url.absoluteString, source],
                [prefix + "public_key", list.publicKey.base64EncodedString(), source],
                [prefix + "origin", list.origin ?? (list.effectiveOrigin.map { $0 + " (derived from its key)" } ?? "(unset)"), source],
                [prefix + "witnesses", "\(list.witnesses.count) witness \(list.witnesses.count == 1 ? "key" : "keys")", source],
                [prefix + "witnesses_required", "\(list.witnessesRequired)", source],
            ]
        }
        return SettingsTable.text(fileLine: fileLine, rows: rows)
    }
}

/// `tracer config --json`: {"configFile": {...}, "settings": {"check.interval": {"value": 21600,
/// "source": {"kind": "default"}}, ...}}; a setting nothing set has "value": null.
private struct ConfigReport: Encodable {
    struct Setting: Encodable {
        var value: SettingValue?
        var source: SettingSource

        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(value, forKey: .value)
            try container.encode(source, forKey: .source)
        }

        private enum CodingKeys: String, CodingKey { case value, source }
    }

    var configFile: ConfigFileLocation
    var settings: [String: Setting]

    init(_ resolved: ResolvedSettings) {
        configFile = resolved.configFile
        settings = Dictionary(
            uniqueKeysWithValues: resolved.entries.map { ($0.row.key, Setting(value: $0.value, source: $0.source)) })
    }
}
