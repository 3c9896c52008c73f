import Foundation
import Logging

/// One JSON object per line on standard error, for journald and log collectors
/// (`--log-format json`): {"time", "level", "logger", "message", and the metadata as strings}.
///
/// Each line goes out in one write(2), so lines from concurrent tasks never interleave.
struct JSONLogHandler: LogHandler {
    let label: String
    let levelControl: LogLevelControl
    var metadata: Logger.Metadata = [:]

    var logLevel: Logger.Level {
        get { levelControl.level }
        set { levelControl.level = newValue }
    }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        var fields: [String: String] = [:]
        for (key, value) in metadata { fields[key] = "\(value)" }
        for (key, value) in event.metadata ?? [:] { fields[key] = "\(value)" }
        fields["time"] = Date.ISO8601FormatStyle(includingFractionalSeconds: true).format(Date())
        fields["level"] = event.level.rawValue
        fields["logger"] = label
        fields["message"] = "\(event.message)"
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        guard var line = try? encoder.encode(fields) else { return }
        line.append(UInt8(ascii: "\n"))
        FileHandle.standardError.write(line)
    }
}
