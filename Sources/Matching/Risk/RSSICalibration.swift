/// A node's `risk.rssi_correction`, measured against a reference Tracer node 1 m away in line of
/// sight: the correction that makes this node's attenuation at 1 m the one the model assumes.
public struct RSSICalibration: Sendable, Equatable {
    /// The attenuation the model takes for 1 m (dB): the free-space path loss at 1 m on the
    /// advertising channels, 20·log10(4π·d/λ) with λ = c / 2.44 GHz ≈ 12.3 cm (Friis), 40.2 dB.
    /// The thresholds (51/56 dB) were measured in the phones' calibrated scale, which no public
    /// figure ties to a distance; free space is the one physical reference every radio shares (it
    /// puts the near threshold's 51 dB at about 3.5 m in free space). A convention, stated once
    /// here, not a measurement.
    public static let referenceAttenuationAtOneMetre = 40
    /// The values `risk.rssi_correction` accepts (dB). A correction beyond them means the setup
    /// was not 1 m in line of sight, or the reference advertises a TX power it does not send.
    public static let correctionRange = -40...40
    /// Fewer readings than this and one fade decides the median.
    public static let minimumReadings = 10

    public let readings: Int
    /// The median of the readings (dBm); the middle two's mean for an even count.
    public let medianRSSI: Double
    /// The reference's advertised TX power (dBm).
    public let txPower: Int

    public init(rssiReadings: [Int], txPower: Int) throws(CalibrationError) {
        guard rssiReadings.count >= Self.minimumReadings, let median = Self.median(rssiReadings) else {
            throw .tooFewReadings(rssiReadings.count, needed: Self.minimumReadings)
        }
        self.readings = rssiReadings.count
        self.medianRSSI = median
        self.txPower = txPower
        guard Self.correctionRange.contains(correction) else {
            throw .correctionOutOfRange(correction, allowed: Self.correctionRange, attenuation: attenuationAtOneMetre)
        }
    }

    /// TX power minus the median RSSI: this node's attenuation at 1 m before correction (dB).
    public var attenuationAtOneMetre: Double { Double(txPower) - medianRSSI }

    /// The whole dB to add to every RSSI so that TX power − (RSSI + correction) is the model's
    /// 1 m attenuation: the setting is an integer, so the value is rounded (half away from zero).
    public var correction: Int {
        Int((attenuationAtOneMetre - Double(Self.referenceAttenuationAtOneMetre)).rounded())
    }

    /// A dB or dBm figure to one decimal, without a trailing ".0": -61.5, -60.
    public static func decibels(_ value: Double) -> String {
        let rounded = (value * 10).rounded() / 10
        return rounded == rounded.rounded() ? String(Int(rounded)) : String(rounded)
    }

    public static func median(_ values: [Int]) -> Double? {
        guard !values.isEmpty else { return nil }
        let sorted = values.sorted()
        let middle = sorted.count / 2
        return sorted.count.isMultiple(of: 2) ? Double(sorted[middle - 1] + sorted[middle]) / 2 : Double(sorted[middle])
    }
}

public enum CalibrationError: Error, Equatable, CustomStringConvertible {
    case tooFewReadings(Int, needed: Int)
    case correctionOutOfRange(Int, allowed: ClosedRange<Int>, attenuation: Double)

    public var description: String {
        switch self {
        case .tooFewReadings(let count, let needed):
            return "Heard \(count) reading\(count == 1 ? "" : "s") of the reference node, fewer than the \(needed) a median needs; no correction was computed. "
                + "Check that `tracer run` is running on the reference node, put it 1 m away in line of sight, or scan longer with --seconds."
        case .correctionOutOfRange(let correction, let allowed, let attenuation):
            return "The attenuation at 1 m came out at \(RSSICalibration.decibels(attenuation)) dB, which would need a correction of \(correction) dB, "
                + "outside what risk.rssi_correction accepts (\(allowed.lowerBound) to \(allowed.upperBound)); no value was computed. "
                + "Check that the reference node is 1 m away in line of sight with nothing in between, and measure again."
        }
    }
}
