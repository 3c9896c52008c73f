import IDRotation
import TracerCore

/// A stay at one place, as a contact tracer needs it: where, from when until when, and how many
/// encounters the node logged there. Built from encounters but holding nothing of them that
/// names anyone: no ids, no signal strengths, no windows.
public struct PlaceVisit: Sendable, Equatable, Encodable {
    public var place: Place
    public var from: UnixSeconds
    public var until: UnixSeconds
    public var encounters: Int

    /// Two stretches at the same place less than this apart are one visit.
    public static let joiningGap: Int64 = 30 * 60

    /// The visits of the encounters that have a place, oldest first: per place, the encounters'
    /// times joined while less than `joiningGap` apart. Encounters without a place are left out.
    public static func visits(of encounters: [Encounter]) -> [PlaceVisit] {
        var open: [Place: PlaceVisit] = [:]
        var closed: [PlaceVisit] = []
        for encounter in encounters.sorted(by: { ($0.firstSeen, $0.lastSeen) < ($1.firstSeen, $1.lastSeen) }) {
            guard let place = encounter.place else { continue }
            if var visit = open[place], encounter.firstSeen - visit.until < joiningGap {
                visit.until = max(visit.until, encounter.lastSeen)
                visit.encounters += 1
                open[place] = visit
            } else {
                if let finished = open[place] { closed.append(finished) }
                open[place] = PlaceVisit(place: place, from: encounter.firstSeen, until: encounter.lastSeen, encounters: 1)
            }
        }
        return (closed + open.values).sorted { ($0.from, $0.until, $0.place.text) < ($1.from, $1.until, $1.place.text) }
    }
}
