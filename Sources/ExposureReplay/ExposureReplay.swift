import Foundation
import IDRotation
import Matching
import PositiveListFormat
import TracerCore

/// A session after the replay: the encounters of the receiver's node that the sender's
/// published ids matched, exactly as `tracer check` finds them.
public struct ReplayedSession: Sendable {
    public var session: ReplaySession
    public var matches: [ExposureMatch]
    /// The receiver's own advertised TX power (its calibration as a sender), when the recording
    /// has it sending: what the reverse direction's attenuation is measured from.
    public var receiverTxPower: Int?

    /// Whether the receiving node applies its RSSI correction (its calibration) when scoring.
    public enum Calibration: String, Sendable, CaseIterable {
        /// The node knows its radio's offset (a calibration table or `risk.rssi_correction`),
        /// as the phones' Exposure Notification service did.
        case receiverOffset
        /// An uncalibrated node: the raw RSSI its controller reports.
        case none
    }

    /// The verdict `tracer check` would give on the receiving node with `model`: the same
    /// scoring (`ExposureAssessment`) over the same matched rows.
    public func assessment(with model: RiskModel, calibration: Calibration = .receiverOffset) -> ExposureAssessment {
        var model = model
        model.rssiCorrection = calibration == .receiverOffset ? session.receiverRSSIOffset : 0
        model.ownTxPower = receiverTxPower
        return ExposureAssessment(matches: matches, model: model)
    }
}

/// Replays a recording through the node's own code: every reading becomes a `Sighting` in the
/// receiving node's SQLite store (the encounter aggregation of `tracer run`), each sender
/// publishes its ids, and the positive-list matcher finds the encounters they match.
///
/// What the node sees, per reading: the raw RSSI its radio reports (the recording's calibrated
/// value minus the receiver's offset; a node only adds an offset it was configured with), the
/// sender's advertised TX power, and the time. Ids rotate on the node's 15-minute wall-clock
/// windows, for the sender's published ids and for the receiver's own windows alike.
public enum ExposureReplay {
    public static let rotationInterval: UnixSeconds = RotationSchedule.defaultInterval

    /// What the exchange tells the receiver about the sender's readings of it.
    ///
    /// Tracer's exchange: in each id window, the first of the two nodes to hear the other connects
    /// and writes its id, the RSSI it measured for the other (from the advertising report that
    /// made it connect) and its TX power; the other only reads. Neither connects again until an id
    /// (and with it an address) changes. Ids rotate on the same 15-minute wall-clock windows on
    /// both phones here, so a pair exchanges once per window in which either heard the other. The
    /// receiver learns a reverse reading only in the windows where the sender heard it first: the
    /// first reading of the reverse session in that window. Simultaneous first readings (same
    /// second) are taken as the sender having connected first only if its phone name sorts first.
    public enum PeerReports: String, Sendable, CaseIterable {
        /// One direction only, as before the exchange was modelled: what the receiver heard.
        case none
        /// Today's protocol: the writer reports the raw RSSI its radio gave.
        case raw
        /// The writer applies its own RSSI correction before reporting (no new field: the 10-byte
        /// write keeps its layout, and a node without a correction reports what it did before).
        case calibrated
    }

    /// Replays every session that has readings or a label; a session without readings has no
    /// encounter and so no match (verdict "none"), as on a node that never heard the sender.
    public static func replay(_ recording: ReplayRecording, directory: String, reports: PeerReports = .calibrated) throws(ReplayError) -> [ReplayedSession] {
        let exchange = PeerExchange(recording, reports: reports)
        var byReceiver: [String: [ReplaySession]] = [:]
        for session in recording.sessions { byReceiver[session.test + "\u{1f}" + session.receiver, default: []].append(session) }
        var replayed: [ReplayedSession] = []
        replayed.reserveCapacity(recording.sessions.count)
        for (index, key) in byReceiver.keys.sorted().enumerated() {
            let sessions = byReceiver[key]!
            let path = (directory as NSString).appendingPathComponent("receiver-\(index).db")
            do {
                let store = try NodeStore.open(StoreLocation(path: path, source: .flag, ownsDirectory: false))
                replayed += try replay(sessions, readings: recording.readings, exchange: exchange, into: store)
            } catch let error as ReplayError {
                throw error
            } catch {
                throw .store("\(error)")
            }
            for file in [path, path + "-wal", path + "-shm", path + "-status.json"] { try? FileManager.default.removeItem(atPath: file) }
        }
        return replayed
    }

    /// One receiving node: record what it heard of every sender, then match each sender's ids.
    static func replay(_ sessions: [ReplaySession], readings: [String: [ReplayReading]], exchange: PeerExchange,
                       into store: NodeStore) throws -> [ReplayedSession] {
        var batch = SightingBatch()
        for session in sessions {
            for report in exchange.reports(to: session) { batch.add(report) }
            for reading in readings[session.id] ?? [] {
                let time = session.testStart + UnixSeconds(reading.seconds.rounded(.down))
                let window = windowStart(of: time)
                batch.add(Sighting(
                    peer: peerID(test: session.test, phone: session.sender, windowStart: window),
                    ownWindowStart: window, time: time,
                    rssi: Int8(clamping: reading.calibratedRSSI - session.receiverRSSIOffset),
                    txPower: session.senderTxPower.map { Int8(clamping: $0) }))
            }
        }
        try store.write(batch)
        let matcher = PositiveListMatcher(encounters: try store.encounterTimes())
        return try sessions.map { session in
            // The sender publishes every window it was on the air: here, up to the last time
            // either phone heard the other.
            let heard = (readings[session.id] ?? []) + exchange.reverseReadings(of: session)
            let outcome = matcher.match(publishedIDs(of: session, readings: heard))
            let rows = try store.encounters(at: outcome.matches.map(\.times))
            let listed = Dictionary(outcome.matches.map { ($0.times.peer, $0.listed) }, uniquingKeysWith: { first, _ in first })
            return ReplayedSession(session: session, matches: rows.compactMap { row in
                listed[row.peer].map { ExposureMatch(encounter: row, listed: $0) }
            }, receiverTxPower: exchange.txPower[session.test + "\u{1f}" + session.receiver] ?? nil)
        }
    }

    /// The exchanges of a recording's pairs: who wrote to whom, in which window, reporting what.
    struct PeerExchange {
        let reports: PeerReports
        let recording: ReplayRecording
        /// Each phone's TX power as a sender, by test and phone ("test\u{1f}phone").
        let txPower: [String: Int?]
        private let sessionByPair: [String: ReplaySession]

        init(_ recording: ReplayRecording, reports: PeerReports) {
            self.reports = reports
            self.recording = recording
            var txPower: [String: Int?] = [:], sessionByPair: [String: ReplaySession] = [:]
            for session in recording.sessions {
                txPower[session.test + "\u{1f}" + session.sender] = session.senderTxPower
                sessionByPair[session.test + "\u{1f}" + session.sender + "\u{1f}" + session.receiver] = session
            }
            self.txPower = txPower
            self.sessionByPair = sessionByPair
        }

        /// What the receiver's phone sent that the sender heard (the reverse session's readings).
        func reverseReadings(of session: ReplaySession) -> [ReplayReading] {
            sessionByPair[session.test + "\u{1f}" + session.receiver + "\u{1f}" + session.sender].flatMap { recording.readings[$0.id] } ?? []
        }

        /// The writes `session`'s sender made to its receiver: one per window in which the
        /// sender heard the receiver before the receiver heard it.
        func reports(to session: ReplaySession) -> [Sighting] {
            guard reports != .none,
                  let reverse = sessionByPair[session.test + "\u{1f}" + session.receiver + "\u{1f}" + session.sender]
            else { return [] }
            let heardBySender = Self.firstReadings(of: reverse, in: reverseReadings(of: session))
            let heardByReceiver = Self.firstReadings(of: session, in: recording.readings[session.id] ?? [])
            return heardBySender.keys.sorted().compactMap { window in
                let (time, reading) = heardBySender[window]!
                if let receiverFirst = heardByReceiver[window]?.time,
                   receiverFirst < time || (receiverFirst == time && session.receiver < session.sender) {
                    return nil
                }
                // The reverse session's receiver is the writer: its raw RSSI, and its correction if it applies one.
                let raw = reading.calibratedRSSI - reverse.receiverRSSIOffset
                let reported = reports == .calibrated ? reading.calibratedRSSI : raw
                return Sighting(
                    peer: peerID(test: session.test, phone: session.sender, windowStart: window), ownWindowStart: window, time: time,
                    txPower: session.senderTxPower.map { Int8(clamping: $0) }, reportedRSSI: Int8(clamping: reported), learnedBy: .written)
            }
        }

        /// The first reading of `session` in each id window, by window start.
        static func firstReadings(of session: ReplaySession, in readings: [ReplayReading]) -> [UnixSeconds: (time: UnixSeconds, reading: ReplayReading)] {
            var first: [UnixSeconds: (time: UnixSeconds, reading: ReplayReading)] = [:]
            for reading in readings {
                let time = session.testStart + UnixSeconds(reading.seconds.rounded(.down))
                let window = windowStart(of: time)
                if let existing = first[window], existing.time <= time { continue }
                first[window] = (time, reading)
            }
            return first
        }
    }

    /// The ids the sender would publish after a diagnosis: one per window it was on the air,
    /// each valid for its window.
    static func publishedIDs(of session: ReplaySession, readings: [ReplayReading]) -> [PositiveListEntry] {
        guard let last = readings.map(\.seconds).max() else { return [] }
        let first = windowStart(of: session.testStart)
        let end = session.testStart + UnixSeconds(last.rounded(.down))
        return stride(from: first, through: end, by: Int(rotationInterval)).map { window in
            PositiveListEntry(id: peerID(test: session.test, phone: session.sender, windowStart: window), validFrom: window, validUntil: window + rotationInterval)
        }
    }

    static func windowStart(of time: UnixSeconds) -> UnixSeconds { time - ((time % rotationInterval) + rotationInterval) % rotationInterval }

    /// A stable stand-in for the id a phone broadcast in a window (FNV-1a of who and when).
    static func peerID(test: String, phone: String, windowStart: UnixSeconds) -> UserID {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in Array("\(test)\u{1f}\(phone)\u{1f}\(windowStart)".utf8) {
            hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01b3
        }
        return UserID(rawValue: hash)
    }
}
