import IDRotation
import Settings
import ArgumentParser
import Foundation

struct EncountersCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "encounters",
        abstract: "Summarize the peers this node met, by day.",
        discussion: """
            For each day: how many different peer ids were met, how many encounters (one per peer id \
            and per window of ours), and the longest single contact. Ids rotate every few minutes, so \
            one long meeting appears as several shorter contacts; that is what keeps people unlinkable.
            """)

    @OptionGroup var store: StoreOptions
    @OptionGroup var reveal: RevealOption
    @Flag(help: "Print JSON instead of a table.") var json = false
    @Flag(help: "List every encounter, not only the daily summary.") var details = false
    @Flag(help: "Group by UTC days instead of local days.") var utc = false

    struct Report: Encodable {
        struct Day: Encodable {
            var day: String
            var distinctPeerIDs: Int
            var encounters: Int
            var sightings: Int
            var longestContactSeconds: Int64
            var strongestRSSI: Int8?
            /// The places encounters of the day were logged at, in order of first encounter.
            var places: [Place]
        }
        var timeZone: String
        var days: [Day]
        var encounters: [EncounterJSON]?
    }

    func run() throws {
        let encounters = try store.openExisting()?.encounters() ?? []
        let timeZone = utc ? TimeZone(identifier: "UTC")! : TimeZone.current
        let days = EncounterDaySummary.summarize(encounters, timeZone: timeZone)
        if json {
            try Output.printJSON(Report(
                timeZone: timeZone.identifier,
                days: days.map {
                    .init(day: $0.day, distinctPeerIDs: $0.distinctPeerIDs, encounters: $0.encounters,
                          sightings: $0.sightings, longestContactSeconds: $0.longestContactSeconds,
                          strongestRSSI: $0.strongestRSSI, places: $0.places)
                },
                encounters: details ? encounters.map { EncounterJSON($0, tag: true, fullID: reveal.reveal) } : nil))
            return
        }
        guard !encounters.isEmpty else {
            print("No encounters recorded.")
            return
        }
        print(TextTable.render(
            header: ["DAY", "PEER IDS", "ENCOUNTERS", "SIGHTINGS", "LONGEST CONTACT", "STRONGEST SIGNAL", "PLACES"],
            rows: days.map {
                [$0.day, "\($0.distinctPeerIDs)", "\($0.encounters)", "\($0.sightings)",
                 Output.duration($0.longestContactSeconds), $0.strongestRSSI.map { "\($0) dBm" } ?? "-",
                 Place.listText($0.places)]
            }))
        if details {
            print("")
            print(TextTable.render(
                header: ["FIRST SEEN", "LAST SEEN", "PEER", "SIGHTINGS", "RSSI MIN/MEAN/MAX", "LEARNED", "PLACE"],
                rows: encounters.map { encounter in
                    [Output.localTime(encounter.firstSeen, timeZone: timeZone),
                     Output.localTime(encounter.lastSeen, timeZone: timeZone),
                     reveal.render(encounter.peer), "\(encounter.sightings)", rssiText(encounter),
                     encounter.learnedBy.names.isEmpty ? "-" : encounter.learnedBy.names.joined(separator: "+"),
                     encounter.place?.text ?? "-"]
                }))
        }
    }

    private func rssiText(_ encounter: Encounter) -> String {
        guard let low = encounter.rssiMin, let high = encounter.rssiMax, let mean = encounter.rssiMean else { return "-" }
        return "\(low)/\(Int(mean.rounded()))/\(high) dBm"
    }
}
