import Foundation
import IDRotation
import Matching
import PositiveListFormat

/// A session after the replay: the encounters of the receiver's node that the sender's
/// published ids matched, exactly as `tracer check` finds them.
public struct ReplayedSession: Sendable {
    public var session: ReplaySession
    public var matches: [ExposureMatch]

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

    /// Replays every session that has readings or a label; a session without readings has no
    /// encounter and so no match (verdict "none"), as on a node that never heard the sender.
    public static func replay(_ recording: ReplayRecording, directory: String) throws(ReplayError) -> [ReplayedSession] {
        var byReceiver: [String: [ReplaySession]] = [:]
        for session in recording.sessions { byReceiver[session.test + "\u{1f}" + session.receiver, default: []].append(session) }
        var replayed: [ReplayedSession] = []
        replayed.reserveCapacity(recording.sessions.count)
        for (index, key) in byReceiver.keys.sorted().enumerated() {
            let sessions = byReceiver[key]!
            let path = (directory as NSString).appendingPathComponent("receiver-\(index).db")
            do {
                let store = try NodeStore.open(StoreLocation(path: path, source: .flag, ownsDirectory: false))
                replayed += try replay(sessions, readings: recording.readings, into: store)
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
    static func replay(_ sessions: [ReplaySession], readings: [String: [ReplayReading]], into store: NodeStore) throws -> [ReplayedSession] {
        var batch = SightingBatch()
        for session in sessions {
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
            let outcome = matcher.match(publishedIDs(of: session, readings: readings[session.id] ?? []))
            let rows = try store.encounters(at: outcome.matches.map(\.times))
            let listed = Dictionary(outcome.matches.map { ($0.times.peer, $0.listed) }, uniquingKeysWith: { first, _ in first })
            return ReplayedSession(session: session, matches: rows.compactMap { row in
                listed[row.peer].map { ExposureMatch(encounter: row, listed: $0) }
            })
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
