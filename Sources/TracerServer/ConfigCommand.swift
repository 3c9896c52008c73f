import ArgumentParser
import Foundation
import PositiveListServer

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
        let rows = [["SETTING", "VALUE", "SOURCE"]] + report.rows.map { [$0.key, $0.value, $0.source] }
        let widths = (0..<2).map { column in rows.map { $0[column].count }.max() ?? 0 }
        let lines = rows.map { row in
            row[0].padding(toLength: widths[0] + 2, withPad: " ", startingAt: 0)
                + row[1].padding(toLength: widths[1] + 2, withPad: " ", startingAt: 0) + row[2]
        }
        return "Configuration file: \(path)\n\n" + lines.joined(separator: "\n")
    }
}

/// `tracer-server config --json`: {"configFile": PATH, "settings": [{"key", "value", "source"}, ...]}.
private struct ConfigDocument: Encodable {
    var configFile: String
    var settings: [ServerSettingsReport.Row]
}
