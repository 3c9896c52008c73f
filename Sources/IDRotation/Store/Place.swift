import Foundation

/// Where this node was when it logged an encounter: the name the user gave a fixed node
/// (`place.name`), a position rounded to a grid cell (`place.source = gpsd`), or both (a named
/// vehicle that also knows where it is). Places never leave the machine except by the user's
/// own `tracer places export`.
public struct Place: Sendable, Hashable, Codable {
    /// The centre of a grid cell about `precisionMeters` wide: the position the node stores,
    /// which says no more than "somewhere in this cell".
    public struct Position: Sendable, Hashable, Codable {
        public var latitude: Double
        public var longitude: Double
        public var precisionMeters: Int

        public init(latitude: Double, longitude: Double, precisionMeters: Int) {
            self.latitude = latitude
            self.longitude = longitude
            self.precisionMeters = precisionMeters
        }

        /// "52.5204, 13.4062 (100 m cell)": as many decimals as the cell needs, no more.
        public var text: String {
            let metresPerDegree = 111_320.0
            let decimals = max(0, Int((log10(metresPerDegree / Double(max(precisionMeters, 1)))).rounded(.up)))
            let format = "%.\(decimals)f, %.\(decimals)f"
            return String(format: format, latitude, longitude) + " (\(precisionMeters) m cell)"
        }
    }

    public var name: String?
    public var position: Position?

    /// nil when there is neither a name nor a position: no place is recorded then.
    public init?(name: String?, position: Position?) {
        guard name != nil || position != nil else { return nil }
        self.name = name
        self.position = position
    }

    /// The name, the position, or "name at position".
    public var text: String {
        switch (name, position) {
        case (let name?, let position?): return "\(name) at \(position.text)"
        case (let name?, nil): return name
        case (nil, let position?): return position.text
        case (nil, nil): return "-"
        }
    }

    /// Several places on one line: "Library; Bus 42", "-" for none, the first three and a count beyond.
    public static func listText(_ places: [Place]) -> String {
        guard !places.isEmpty else { return "-" }
        let shown = places.prefix(3).map(\.text).joined(separator: "; ")
        return places.count > 3 ? shown + "; and \(places.count - 3) more" : shown
    }
}
