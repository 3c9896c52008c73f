import Foundation
import TracerCore

/// Formatting shared by the commands: JSON for machines, local times and short durations for people.
enum Output {
    static func printJSON<Value: Encodable>(_ value: Value) throws {
        print(String(decoding: try jsonData(value), as: UTF8.self))
    }

    static func jsonData<Value: Encodable>(_ value: Value) throws -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        return try encoder.encode(value)
    }

    static func localTime(_ time: UnixSeconds, timeZone: TimeZone = .current) -> String {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = timeZone
        formatter.dateFormat = "yyyy-MM-dd HH:mm:ss"
        return formatter.string(from: Date(timeIntervalSince1970: TimeInterval(time)))
    }

    static func isoTime(_ time: UnixSeconds) -> String {
        let formatter = ISO8601DateFormatter()
        formatter.timeZone = TimeZone(identifier: "UTC")
        return formatter.string(from: Date(timeIntervalSince1970: TimeInterval(time)))
    }

    /// A past time and how long ago it was: "2026-05-01 14:03:07 (12 min 0 s ago)".
    static func ago(_ time: UnixSeconds, now: UnixSeconds) -> String {
        "\(localTime(time)) (\(duration(max(0, now - time))) ago)"
    }

    static func duration(_ seconds: Int64) -> String {
        if seconds < 60 { return "\(seconds) s" }
        if seconds < 3600 { return "\(seconds / 60) min \(seconds % 60) s" }
        return "\(seconds / 3600) h \(seconds % 3600 / 60) min"
    }

    static func standardError(_ text: String) {
        FileHandle.standardError.write(Data((text + "\n").utf8))
    }
}
