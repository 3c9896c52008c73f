import IDRotation
import Settings
import ArgumentParser
import Foundation
import Places
#if canImport(Glibc)
import Glibc
import TracerCore
#endif

struct PlacesCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "places",
        abstract: "Your own places and times, for a contact tracer, by your choice.",
        discussion: """
            The node records where it was (place.name, or a rounded gpsd position) with each \
            encounter, and keeps it on this machine. `tracer places export` writes the places and \
            times of the last days to a file you can give to your health authority's contact \
            tracers, after showing you what it holds and asking.
            """,
        subcommands: [PlacesExportCommand.self])
}

struct PlacesExportCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "export",
        abstract: "Write your places and times of the last days to a file for a contact tracer.",
        discussion: """
            The file (JSON, readable only by you) lists where this node was and when, as visits: a \
            place, the time of the first and last encounter there, and how many encounters. It holds \
            no ids (neither yours nor anyone else's), no keys and no signal strengths. Nothing is \
            sent anywhere: you decide whom to give the file to. Shows what it will contain and asks \
            first (y/N), unless --yes is given.
            """)

    static let format = "tracer-places"
    static let formatVersion = 1

    @OptionGroup var store: StoreOptions
    @Option(help: ArgumentHelp("How many days back, 1-28.", valueName: "days"))
    var days = 14
    @Option(name: .shortAndLong, help: ArgumentHelp("The file to write (created with mode 0600).", valueName: "file"))
    var output: String
    @Flag(help: "Write without asking (for scripts).") var yes = false

    struct Export: Encodable {
        struct Visit: Encodable {
            var from: UnixSeconds
            var until: UnixSeconds
            var fromUTC: String
            var untilUTC: String
            var place: Place
            var encounters: Int
        }
        var format = PlacesExportCommand.format
        var formatVersion = PlacesExportCommand.formatVersion
        var exportedAt: UnixSeconds
        var days: Int
        var note = "Where this Tracer node was when it logged encounters, and when. No ids of anyone, no keys."
        var visits: [Visit]
    }

    func validate() throws {
        guard (1...RetentionPolicy.maximumDays).contains(days) else {
            throw ValidationError("--days must be between 1 and \(RetentionPolicy.maximumDays); the node keeps nothing older.")
        }
    }

    func run() throws {
        let now = SystemWallClock().now()
        let since = now - Int64(days) * .secondsPerDay
        let encounters = try store.openExisting()?.encounters(since: since) ?? []
        let visits = PlaceVisit.visits(of: encounters)
        guard !visits.isEmpty else {
            print("No places were recorded in the last \(days) day(s); nothing was written. (Set place.name or place.source = gpsd for `tracer run` to record them.)")
            return
        }
        let export = Export(exportedAt: now, days: days, visits: visits.map {
            .init(from: $0.from, until: $0.until, fromUTC: Self.utc($0.from), untilUTC: Self.utc($0.until), place: $0.place, encounters: $0.encounters)
        })
        if !yes {
            guard isatty(STDIN_FILENO) == 1 else { throw CommandFailure.needsConfirmation("Writing your places to a file") }
            print(Self.preview(visits, days: days, output: output))
            print("Write this to \(output)? [y/N] ", terminator: "")
            let answer = readLine()?.trimmingCharacters(in: .whitespaces).lowercased()
            guard answer == "y" || answer == "yes" else {
                print("Nothing was written.")
                throw ExitCode.failure
            }
        }
        try PrivateFile.writeAtomically(try Output.jsonData(export) + Data("\n".utf8), to: output)
        print("Wrote \(visits.count) visit(s) at \(Set(visits.map(\.place)).count) place(s) to \(output) (readable only by you). Nothing was sent anywhere.")
    }

    static func preview(_ visits: [PlaceVisit], days: Int, output: String) -> String {
        let shown = 20
        var lines = ["The file will hold \(visits.count) visit(s) at \(Set(visits.map(\.place)).count) place(s) in the last \(days) day(s): where this node was when it logged encounters, and when. No ids, no keys, no signal strengths.", ""]
        lines.append(TextTable.render(
            header: ["FROM", "UNTIL", "ENCOUNTERS", "PLACE"],
            rows: visits.prefix(shown).map { [Output.localTime($0.from), Output.localTime($0.until), "\($0.encounters)", $0.place.text] }))
        if visits.count > shown { lines.append("… and \(visits.count - shown) more.") }
        lines.append("")
        return lines.joined(separator: "\n")
    }

    private static func utc(_ time: UnixSeconds) -> String {
        let formatter = ISO8601DateFormatter()
        formatter.timeZone = TimeZone(identifier: "UTC")
        return formatter.string(from: Date(timeIntervalSince1970: TimeInterval(time)))
    }
}
