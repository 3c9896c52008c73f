import Foundation
import TracerCore

/// What a user wants to know about one day: how many different ids were met, and the longest
/// single contact. Days are calendar days in the given time zone; stored times stay UTC.
public struct EncounterDaySummary: Sendable, Equatable {
    /// The day as YYYY-MM-DD in the summary's time zone.
    public var day: String
    public var distinctPeerIDs: Int
    public var encounters: Int
    public var sightings: Int
    /// The longest time one peer id was seen within one of our windows, in seconds. Ids rotate,
    /// so a longer meeting shows up as several encounters; linking them is deliberately impossible.
    public var longestContactSeconds: Int64
    /// The strongest signal seen that day (closest contact, roughly), when any RSSI was measured.
    public var strongestRSSI: Int8?
    /// The places the day's encounters were logged at, in order of first encounter.
    public var places: [Place] = []

    /// Groups encounters by the day of their first sighting.
    public static func summarize(_ encounters: [Encounter], timeZone: TimeZone) -> [EncounterDaySummary] {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = timeZone
        var byDay: [String: (peers: Set<UserID>, summary: EncounterDaySummary)] = [:]
        for encounter in encounters {
            let day = dayString(encounter.firstSeen, calendar: calendar)
            var entry = byDay[day] ?? ([], EncounterDaySummary(
                day: day, distinctPeerIDs: 0, encounters: 0, sightings: 0, longestContactSeconds: 0, strongestRSSI: nil))
            entry.peers.insert(encounter.peer)
            entry.summary.encounters += 1
            entry.summary.sightings += encounter.sightings
            entry.summary.longestContactSeconds = max(entry.summary.longestContactSeconds, encounter.duration)
            if let rssi = encounter.rssiMax {
                entry.summary.strongestRSSI = max(entry.summary.strongestRSSI ?? rssi, rssi)
            }
            entry.summary.distinctPeerIDs = entry.peers.count
            if let place = encounter.place, !entry.summary.places.contains(place) { entry.summary.places.append(place) }
            byDay[day] = entry
        }
        return byDay.values.map(\.summary).sorted { $0.day < $1.day }
    }

    public static func dayString(_ time: UnixSeconds, calendar: Calendar) -> String {
        let parts = calendar.dateComponents([.year, .month, .day], from: Date(timeIntervalSince1970: TimeInterval(time)))
        return String(format: "%04d-%02d-%02d", parts.year ?? 0, parts.month ?? 0, parts.day ?? 0)
    }
}
