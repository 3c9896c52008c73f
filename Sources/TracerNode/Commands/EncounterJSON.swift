import IDRotation
import TracerCore

/// One encounter as `tracer encounters --json --details` and `tracer export` write it. The peer is
/// named by its short tag, its full id, or both; whichever is nil is left out of the JSON.
struct EncounterJSON: Encodable {
    var peerTag: String?
    var peerID: String?
    var ownWindowStart: UnixSeconds
    var firstSeen: UnixSeconds
    var lastSeen: UnixSeconds
    var sightings: Int
    var rssiMin: Int8?
    var rssiMean: Double?
    var rssiMax: Int8?
    var txPower: Int8?
    var reportedRSSI: Int8?
    var learnedBy: [String]
    /// Where this node was; left out for an encounter logged without a place.
    var place: Place?

    init(_ encounter: Encounter, tag: Bool, fullID: Bool) {
        peerTag = tag ? encounter.peer.tag : nil
        peerID = fullID ? encounter.peer.hex : nil
        ownWindowStart = encounter.ownWindowStart
        firstSeen = encounter.firstSeen
        lastSeen = encounter.lastSeen
        sightings = encounter.sightings
        rssiMin = encounter.rssiMin
        rssiMean = encounter.rssiMean
        rssiMax = encounter.rssiMax
        txPower = encounter.txPower
        reportedRSSI = encounter.reportedRSSI
        learnedBy = encounter.learnedBy.names
        place = encounter.place
    }
}
