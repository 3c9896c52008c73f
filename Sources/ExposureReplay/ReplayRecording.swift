import Foundation
import TracerCore

/// One ordered (sender → receiver) pair of phones during one test: what the receiver heard of
/// the sender, the ground truth, and the deployed app's own verdict.
public struct ReplaySession: Sendable, Hashable {
    public var id: String
    public var test: String
    /// The recording's category of place (e.g. public_transit, learning_spaces, social).
    public var environment: String
    public var sender: String
    public var receiver: String
    /// The sender's advertised TX power (its GAEN calibration), nil when it advertised none.
    public var senderTxPower: Int?
    /// What the receiver's platform adds to the RSSI its radio reports (GAEN's rssi_offset).
    public var receiverRSSIOffset: Int
    public var testStart: UnixSeconds
    /// Ground truth ("within 6 ft for at least 15 minutes"); nil when the recording has none.
    public var label: Bool?
    public var senderIsSick: Bool
    /// The deployed app's verdict towards the sick sender ("none", "low", "high"), when recorded.
    public var appVerdict: String?
}

/// One RSSI reading of a session.
public struct ReplayReading: Sendable, Hashable {
    public var seconds: Double
    /// As logged by the phone: already calibrated with the receiver's RSSI offset.
    public var calibratedRSSI: Int
    public var scanStart: Double

    public init(seconds: Double, calibratedRSSI: Int, scanStart: Double) {
        self.seconds = seconds
        self.calibratedRSSI = calibratedRSSI
        self.scanStart = scanStart
    }
}

/// A pair of CSV files: sessions and readings, with the columns of the MIT LL / U. Arizona
/// conversion (docs/risk-model.md, "Measured on real recordings").
public struct ReplayRecording: Sendable {
    public var sessions: [ReplaySession]
    public var readings: [String: [ReplayReading]]

    public init(sessions: [ReplaySession], readings: [String: [ReplayReading]]) {
        self.sessions = sessions
        self.readings = readings
    }

    public init(sessionsCSV: String, readingsCSV: String) throws(ReplayError) {
        sessions = try Self.sessions(from: CSVTable(path: sessionsCSV))
        readings = try Self.readings(from: CSVTable(path: readingsCSV))
    }

    /// The recording's scan cycle: the median time between the starts of successive scans of one
    /// session. A reading stands for this much presence, as one sighting does on a node.
    public var medianScanIntervalSeconds: Int {
        var gaps: [Double] = []
        for readings in readings.values {
            let starts = Array(Set(readings.map(\.scanStart))).sorted()
            gaps += zip(starts, starts.dropFirst()).map { $1 - $0 }
        }
        guard !gaps.isEmpty else { return 0 }
        return Int(gaps.sorted()[gaps.count / 2].rounded())
    }

    static func sessions(from table: CSVTable) throws(ReplayError) -> [ReplaySession] {
        let id = try table.column("session_id"), test = try table.column("test_id")
        let environment = try table.column("environment"), start = try table.column("test_start_utc")
        let sender = try table.column("sender_phone"), receiver = try table.column("receiver_phone")
        let tx = try table.column("sender_tx_power_dbm"), offset = try table.column("receiver_rssi_offset_db")
        let label = try table.column("label_6ft_15min"), sick = try table.column("sender_is_sick")
        let verdict = try table.column("en_reported_exposure")
        var sessions: [ReplaySession] = []
        sessions.reserveCapacity(table.rows.count)
        for (number, row) in table.rows.enumerated() {
            func field(_ index: Int) -> Substring { index < row.count ? row[index] : "" }
            func integer(_ index: Int, _ name: String) throws(ReplayError) -> Int? {
                let text = field(index)
                if text.isEmpty { return nil }
                guard let value = Int(text) ?? Double(text).map({ Int($0.rounded()) }) else {
                    throw .badValue(column: name, row: number + 1, value: String(text), path: table.path)
                }
                return value
            }
            guard let startTime = Self.unixSeconds(iso8601: String(field(start))) else {
                throw .badValue(column: "test_start_utc", row: number + 1, value: String(field(start)), path: table.path)
            }
            let labelValue = try integer(label, "label_6ft_15min")
            let verdictText = String(field(verdict))
            sessions.append(ReplaySession(
                id: String(field(id)), test: String(field(test)), environment: String(field(environment)),
                sender: String(field(sender)), receiver: String(field(receiver)),
                senderTxPower: try integer(tx, "sender_tx_power_dbm"),
                receiverRSSIOffset: try integer(offset, "receiver_rssi_offset_db") ?? 0,
                testStart: startTime, label: labelValue.map { $0 == 1 },
                senderIsSick: try integer(sick, "sender_is_sick") == 1,
                appVerdict: verdictText.isEmpty ? nil : verdictText))
        }
        return sessions
    }

    static func readings(from table: CSVTable) throws(ReplayError) -> [String: [ReplayReading]] {
        let id = try table.column("session_id"), seconds = try table.column("t_seconds")
        let rssi = try table.column("rssi_dbm"), scanStart = try table.column("scan_start_s")
        var readings: [String: [ReplayReading]] = [:]
        for (number, row) in table.rows.enumerated() {
            guard row.count > max(id, seconds, rssi, scanStart),
                  let time = Double(row[seconds]), let value = Double(row[rssi]), let scan = Double(row[scanStart])
            else {
                throw .badValue(column: "t_seconds, rssi_dbm or scan_start_s", row: number + 1, value: row.joined(separator: ","), path: table.path)
            }
            readings[String(row[id]), default: []].append(
                ReplayReading(seconds: time, calibratedRSSI: Int(value.rounded()), scanStart: scan))
        }
        return readings
    }

    /// "2021-02-25T16:27:00.000Z" (with or without fractional seconds).
    static func unixSeconds(iso8601 text: String) -> UnixSeconds? {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        if let date = formatter.date(from: text) { return UnixSeconds(date.timeIntervalSince1970.rounded(.down)) }
        formatter.formatOptions = [.withInternetDateTime]
        return formatter.date(from: text).map { UnixSeconds($0.timeIntervalSince1970.rounded(.down)) }
    }
}
