import Foundation

/// What one line of gpsd's JSON protocol says about the position, and nothing else: the node
/// reads TPV (time-position-velocity) reports; every other class (VERSION, DEVICES, WATCH, SKY,
/// ERROR…) and every line that is not well-formed JSON of the expected shape is `.ignored`.
/// Never traps, whatever the line holds.
public enum GPSDReport: Equatable, Sendable {
    /// A TPV with a 2D or 3D fix (mode 2 or 3) and a position on the globe.
    case fix(latitude: Double, longitude: Double)
    /// A TPV without a usable fix: mode 0 or 1, or no position on the globe.
    case noFix
    case ignored

    /// The longest line gpsd sends is a SKY report of a few kilobytes; longer is not gpsd.
    public static let maximumLineBytes = 65_536

    private struct Fields: Decodable {
        var `class`: String?
        var mode: Int?
        var lat: Double?
        var lon: Double?
    }

    public init(line: some DataProtocol) {
        guard line.count <= Self.maximumLineBytes,
            let fields = try? JSONDecoder().decode(Fields.self, from: Data(line)),
            fields.class == "TPV"
        else {
            self = .ignored
            return
        }
        guard let mode = fields.mode, mode >= 2, let latitude = fields.lat, let longitude = fields.lon,
            latitude.isFinite, longitude.isFinite, (-90.0...90.0).contains(latitude), (-180.0...180.0).contains(longitude)
        else {
            self = .noFix
            return
        }
        self = .fix(latitude: latitude, longitude: longitude)
    }
}

/// Splits a byte stream into lines, keeping at most `GPSDReport.maximumLineBytes` of a line: a
/// longer one is dropped whole rather than let a hostile peer grow the buffer without bound.
public struct LineSplitter: Sendable {
    private var partial: [UInt8] = []
    private var discarding = false

    public init() {}

    public mutating func append(_ bytes: some Collection<UInt8>) -> [[UInt8]] {
        var lines: [[UInt8]] = []
        for byte in bytes {
            if byte == UInt8(ascii: "\n") {
                if !discarding { lines.append(partial) }
                partial.removeAll(keepingCapacity: true)
                discarding = false
            } else if !discarding {
                partial.append(byte)
                if partial.count > GPSDReport.maximumLineBytes {
                    partial.removeAll()
                    discarding = true
                }
            }
        }
        return lines
    }
}
