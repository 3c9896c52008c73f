import ArgumentParser
import Foundation
import PositiveListServer
import Settings

struct Config: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Checks the configuration file and shows each setting's effective value and whether a flag, the environment, the file or its default gave it.",
        discussion: """
            The settings of the JSON configuration file (every one but authorities may be left out), \
            each with its environment variable and flag (a flag wins over the environment, which \
            wins over the file):

            \(ServerSettingsReport.help)
            """)

    @OptionGroup var location: LocationOptions

    @Flag(help: "Print JSON instead of text.")
    var json = false

    func run() async throws {
        let path = location.resolvedConfigurationPath
        let report = try ServerConfiguration.loadReport(path: path, overrides: location.settingOverrides)
        if json {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
            let document = ConfigDocument(configFile: path, settings: report.rows)
            print(String(decoding: try encoder.encode(document), as: UTF8.self))
        } else {
            print(Self.text(report, path: path))
        }
    }

    static func text(_ report: ServerSettingsReport, path: String) -> String {
        SettingsTable.text(fileLine: "Configuration file: \(path)", rows: report.rows.map { [$0.key, $0.value, $0.source] })
    }
}

/// `tracer-server config --json`: {"configFile": PATH, "settings": [{"key", "value", "source"}, ...]}.
private struct ConfigDocument: Encodable {
    var configFile: String
    var settings: [ServerSettingsReport.Row]
}
