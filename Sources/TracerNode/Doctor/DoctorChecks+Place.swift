import Logging
import Places

/// The place in force, for `tracer status` and `tracer doctor`: the configured name, and with
/// place.source = gpsd whether gpsd answers and has a fix. Never the position: a status or a
/// doctor report is the kind of text a user pastes into a support request.
struct PlaceInForce {
    let settings: NodeSettings
    /// Long enough for gpsd's first TPV report (it sends one per second per receiver).
    static let probeWait: Duration = .milliseconds(2_500)

    var configured: Bool { settings.placeName != nil || settings.placeSource != .none }
    var gpsdEndpoint: String { "\(settings.gpsdHost):\(settings.gpsdPort)" }

    /// One look at gpsd, or nil when place.source is not gpsd.
    func probeGPSD() async -> GPSDClient.Probe? {
        guard settings.placeSource == .gpsd else { return nil }
        let client = GPSDClient(
            host: settings.gpsdHost, port: Int(settings.gpsdPort), precisionMeters: Int(settings.placePrecision),
            board: PlaceBoard(name: nil), logger: Logger(label: "tracer.place"))
        return await client.probe(within: Self.probeWait)
    }

    /// One line for `tracer status`.
    func summary(gpsd: GPSDClient.Probe?) -> String {
        guard configured else { return "none configured (place.name, place.source)" }
        var parts: [String] = []
        if let name = settings.placeName { parts.append("\"\(name)\"") }
        switch gpsd {
        case nil: break
        case .fix?: parts.append("gpsd at \(gpsdEndpoint) has a fix (position rounded to \(settings.placePrecision) m)")
        case .noFix?: parts.append("gpsd at \(gpsdEndpoint) has no fix: encounters get no position")
        case .noReport?: parts.append("gpsd at \(gpsdEndpoint) sends no position reports: encounters get no position")
        case .unreachable(let reason)?: parts.append("gpsd at \(gpsdEndpoint) unreachable (\(reason)): encounters get no position")
        }
        return parts.joined(separator: "; ")
    }

    /// The doctor's check of gpsd, or nil when place.source is not gpsd.
    func doctorCheck(gpsd: GPSDClient.Probe?) -> DoctorCheck? {
        let name = "gpsd"
        switch gpsd {
        case nil: return nil
        case .fix?: return .pass(name, "\(gpsdEndpoint) answers and has a fix")
        case .noFix?:
            return .fail(name, "\(gpsdEndpoint) answers but has no fix; encounters get no position until it has one",
                         fix: "Give the receiver a view of the sky and a few minutes after a cold start; `cgps -s` shows the satellites it sees.")
        case .noReport?:
            return .fail(name, "\(gpsdEndpoint) answers but sends no position reports (no receiver attached?)",
                         fix: "Check that the receiver is plugged in and that gpsd uses it: `systemctl status gpsd`, DEVICES in /etc/default/gpsd, `gpsctl`.")
        case .unreachable(let reason)?:
            return .fail(name, "cannot reach gpsd at \(gpsdEndpoint): \(reason)",
                         fix: "Is gpsd running? `systemctl status gpsd` (start it with `systemctl enable --now gpsd.socket`); or set place.gpsd_host and place.gpsd_port to where it listens.")
        }
    }
}
