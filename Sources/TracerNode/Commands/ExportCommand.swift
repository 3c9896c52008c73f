import ArgumentParser
import Foundation
import IDRotation
import TracerCore

struct ExportCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "export",
        abstract: "Write all local data as JSON, for your own records.",
        discussion: """
            The export holds full ids, the daily keys they derive from and the place of each \
            encounter: keep it as private as the database itself. (To give a contact tracer your \
            places and times without any ids, use `tracer places export`.) Written to stdout, or with --output to a new file readable only \
            by you. Times are Unix seconds (UTC).
            """)

    @OptionGroup var store: StoreOptions
    @Option(name: .shortAndLong, help: ArgumentHelp("Write to this file instead of stdout.", valueName: "file"))
    var output: String?

    struct Export: Encodable {
        struct OwnIDEntry: Encodable {
            var id: String
            var validFrom: UnixSeconds
            var validUntil: UnixSeconds
        }
        /// A daily key and what it derives: the ids of the windows of `day` (UTC) at
        /// `intervalSeconds`, as docs/daily-keys.md defines.
        struct DailyKeyEntry: Encodable {
            var day: String
            var dayStart: UnixSeconds
            var intervalSeconds: Int64
            var key: String
        }
        var format = "tracer-export"
        // 2 added dailyKeys; 3 the place of each encounter.
        var formatVersion = 3
        var tracerVersion = Tracer.version
        var exportedAt: UnixSeconds
        var database: String
        var schema: [String]
        var ownIDs: [OwnIDEntry]
        var dailyKeys: [DailyKeyEntry]
        var encounters: [EncounterJSON]
    }

    func run() throws {
        let location = try store.location()
        let opened = try store.openExisting()
        let export = Export(
            exportedAt: SystemWallClock().now(),
            database: location.path,
            schema: try opened?.appliedSchemaVersions() ?? [],
            ownIDs: try (opened?.ownIDs() ?? []).map {
                .init(id: $0.id.hex, validFrom: $0.window.start, validUntil: $0.window.end)
            },
            dailyKeys: try (opened?.dailyKeys() ?? []).map {
                .init(day: $0.day.date, dayStart: $0.day.start, intervalSeconds: $0.intervalSeconds, key: $0.key.hex)
            },
            encounters: try (opened?.encounters() ?? []).map { EncounterJSON($0, tag: false, fullID: true) })
        let data = try Output.jsonData(export)
        guard let output else {
            FileHandle.standardOutput.write(data + Data("\n".utf8))
            return
        }
        try PrivateFile.writeAtomically(data + Data("\n".utf8), to: output)
        Output.standardError("Exported \(export.ownIDs.count) own id(s), \(export.dailyKeys.count) daily key(s) and \(export.encounters.count) encounter(s) to \(output).")
    }
}
