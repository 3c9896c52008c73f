import ExposureReplay
import Foundation
import IDRotation
import Matching
import Testing
import TestTiers

extension MatchingTests {
    /// A hand-written recording replayed through the node's store, matcher and risk model; every
    /// expected figure below is worked out by hand in the comments.
    @Suite(.tags(.unit)) struct ExposureReplayTests {
        // 2021-02-25T16:00:00Z, on a 15-minute boundary: readings before t = 900 s fall in the
        // first id window, later ones in the second.
        static let sessionsCSV = """
            session_id,test_id,environment,test_start_utc,sender_phone,receiver_phone,sender_tx_power_dbm,receiver_rssi_offset_db,label_6ft_15min,sender_is_sick,en_reported_exposure,extra
            t1:A->B,t1,social,2021-02-25T16:00:00.000Z,A,B,-20,5,1,1,high,x
            t1:C->B,t1,social,2021-02-25T16:00:00.000Z,C,B,-20,5,0,0,,"a, quoted"
            t1:B->A,t1,social,2021-02-25T16:00:00.000Z,B,A,-25,0,,0,,
            """
        // rssi_dbm is calibrated (the receiver's offset of 5 dB already added): B's radio reported
        // −65, −95, −95 and −78 dBm.
        static let readingsCSV = """
            session_id,scan_idx,reading_idx,t_seconds,scan_start_s,scan_duration_s,rssi_dbm,tx_power_dbm,attenuation_db,distance_m
            t1:A->B,0,0,60,60,0,-60,-20,40,1.0
            t1:A->B,1,0,300,300,0,-90,-20,70,1.0
            t1:A->B,2,0,600,600,0,-90,-20,70,1.0
            t1:A->B,3,0,960,960,0,-73,-20,53,1.0
            t1:B->A,0,0,100,100,0,-50,-25,25,1.0
            """

        func replayed(reports: ExposureReplay.PeerReports = .calibrated) throws -> [String: ReplayedSession] {
            let directory = NSTemporaryDirectory() + "tracer-replay-test-" + UUID().uuidString
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(atPath: directory) }
            try Self.sessionsCSV.write(toFile: directory + "/sessions.csv", atomically: true, encoding: .utf8)
            try Self.readingsCSV.write(toFile: directory + "/readings.csv", atomically: true, encoding: .utf8)
            let recording = try ReplayRecording(sessionsCSV: directory + "/sessions.csv", readingsCSV: directory + "/readings.csv")
            #expect(recording.medianScanIntervalSeconds == 300)  // gaps 240, 300, 360
            let sessions = try ExposureReplay.replay(recording, directory: directory, reports: reports)
            return Dictionary(uniqueKeysWithValues: sessions.map { ($0.session.id, $0) })
        }

        @Test func theSendersIdsMatchOneEncounterPerWindowOfTheReceiversStore() throws {
            let sessions = try replayed()
            let contact = try #require(sessions["t1:A->B"])
            #expect(contact.session.label == true)
            #expect(contact.session.appVerdict == "high")
            let encounters = contact.matches.map(\.encounter).sorted { $0.firstSeen < $1.firstSeen }
            #expect(encounters.count == 2)
            // The node stored the raw RSSI (calibrated minus the offset) and the advertised TX power.
            #expect(encounters.first?.rssiMax == -65)
            #expect(encounters.first?.rssiSum == -255)
            #expect(encounters.first?.txPower == -20)
            // C was never heard, so its published ids match nothing.
            #expect(sessions["t1:C->B"]?.matches.isEmpty == true)
            // B heard A first (t = 60 s, A heard B at 100 s), so B connected and wrote: B learned
            // no reading of A's, in either window.
            #expect(encounters.allSatisfy { $0.reportedRSSI == nil })
        }

        @Test func theWriterReportsWhatItHeardOncePerWindow() throws {
            // A's store: B heard A first in window 1 (60 s against 100 s) and alone in window 2
            // (960 s), so B wrote to A both times, reporting its first reading of A. Window 2 is
            // known to A only through that write.
            let calibrated = try #require(try replayed()["t1:B->A"])
            let windows = calibrated.matches.map(\.encounter).sorted { $0.firstSeen < $1.firstSeen }
            #expect(windows.count == 2)
            #expect(windows.map(\.reportedRSSI) == [-60, -73])  // calibrated: B applied its offset of 5 dB
            #expect(windows.map(\.rssiCount) == [1, 0])
            #expect(windows.first?.firstSeen == windows.first.map { $0.ownWindowStart + 60 })
            #expect(calibrated.receiverTxPower == -20)  // A's TX power, from A->B
            // B's raw RSSI (today's protocol): 5 dB weaker.
            #expect(try replayed(reports: .raw)["t1:B->A"]?.matches.map(\.encounter.reportedRSSI).sorted { ($0 ?? 0) > ($1 ?? 0) } == [-65, -78])
            // Without the exchange modelled, A never learns of window 2.
            #expect(try replayed(reports: .none)["t1:B->A"]?.matches.count == 1)
            // Both directions: window 1 is A's −50 dBm from B's TX −25 (25 dB) or −20 − (−60) = 40 dB: 25.
            var both = RiskModel.standard
            both.directions = .both
            #expect(calibrated.assessment(with: both).days.count == 1)
            let attenuations = windows.map { window in
                var model = both
                model.ownTxPower = calibrated.receiverTxPower
                model.rssiCorrection = calibrated.session.receiverRSSIOffset
                return model.attenuation(of: window)
            }
            #expect(attenuations == [25, 53])
        }

        @Test func theVerdictIsTheRiskModelsOverTheMatchedRows() throws {
            let sessions = try replayed()
            let contact = try #require(sessions["t1:A->B"])
            // The Exposure Notification example (mean RSSI, 60 s per sighting): window 1 lasts 600 − 60 + 60 s = 10 min
            // at mean −85 + 5 = −80 dBm → 60 dB, medium, × 0.5 = 5; window 2 is 1 min at −73 dBm →
            // 53 dB, near, × 1 = 1. Six weighted minutes: low.
            let standard = contact.assessment(with: .exposureNotificationExample)
            #expect(standard.days.first?.weightedMinutes == 6)
            #expect(standard.level == .low)
            // Uncalibrated, window 2 is 58 dB, medium: 5 + 0.5.
            #expect(contact.assessment(with: .exposureNotificationExample, calibration: .none).days.first?.weightedMinutes == 5.5)
            // The strongest reading (−65 + 5 = −60 dBm, 40 dB) makes window 1 near: 10 + 1 = 11.
            var strongest = RiskModel.exposureNotificationExample
            strongest.attenuationSummary = .strongest
            strongest.highMinutes = 10
            let assessment = contact.assessment(with: strongest)
            #expect(assessment.days.first?.weightedMinutes == 11)
            #expect(assessment.level == .high)
            #expect(sessions["t1:C->B"]?.assessment(with: strongest).level == RiskLevel.none)
        }

        @Test func aMissingColumnIsNamed() throws {
            let directory = NSTemporaryDirectory() + "tracer-replay-test-" + UUID().uuidString
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(atPath: directory) }
            try "session_id,test_id\nx,y\n".write(toFile: directory + "/s.csv", atomically: true, encoding: .utf8)
            try Self.readingsCSV.write(toFile: directory + "/r.csv", atomically: true, encoding: .utf8)
            #expect(throws: ReplayError.missingColumn("environment", path: directory + "/s.csv")) {
                try ReplayRecording(sessionsCSV: directory + "/s.csv", readingsCSV: directory + "/r.csv")
            }
        }

        @Test func figuresMatchHandComputedValues() {
            // Positives score 3 and 2, negatives 2 and 1: of four pairs, three are ordered and one
            // ties, so the area is 3.5 / 4.
            let scored = ScoredTruths([(3, true), (2, false), (2, true), (1, false)])
            #expect(scored.areaUnderCurve == 0.875)
            #expect(scored.lowestFalsePositiveRate(reaching: 1.0)?.fpr == 0.5)
            // Wilson for 0/10: upper bound z² / (n + z²) = 3.8415 / 13.8415.
            let none = Proportion(0, of: 10).wilson95
            #expect(none.low == 0)
            #expect(abs(none.high - 0.2775) < 0.0001)
        }

        @Test func theClusterBootstrapResamplesWholeTests() throws {
            // Test a detects all 50 of its positives, test b none of its 50: pairs taken as
            // independent give 0.50 with a Wilson interval of about [0.40, 0.60]; whole tests
            // resampled give 0, 0.5 or 1 (two tests, each drawn twice with probability 1/4), so
            // the 95 % interval spans [0, 1]. Each test has one negative, never flagged, scored
            // below every positive: the FPR is always 0 and the area always 1.
            func test(_ name: String, detected: Bool) -> [ClusterBootstrap.Pair] {
                Array(repeating: .init(cluster: name, verdict: detected, score: 2, truth: true), count: 50)
                    + [.init(cluster: name, verdict: false, score: 1, truth: false)]
            }
            let pairs = test("a", detected: true) + test("b", detected: false)
            let wilson = Proportion(50, of: 100).wilson95
            #expect(wilson.low > 0.39 && wilson.high < 0.61)
            let intervals = try #require(ClusterBootstrap(resamples: 400).intervals(pairs))
            #expect(intervals.truePositiveRate == (0, 1))
            #expect(intervals.falsePositiveRate == (0, 0))
            #expect(intervals.areaUnderCurve == (1, 1))
            // Tests that all look alike leave nothing to vary: TPR 1/2 in every draw.
            let alike = ["x", "y", "z"].flatMap { name in
                [ClusterBootstrap.Pair(cluster: name, verdict: true, score: 1, truth: true),
                 .init(cluster: name, verdict: false, score: 1, truth: true)]
            }
            let alikeIntervals = try #require(ClusterBootstrap(resamples: 50).intervals(alike))
            #expect(alikeIntervals.truePositiveRate == (0.5, 0.5))
            #expect(ClusterBootstrap().intervals([]) == nil)
        }
    }
}

extension MatchingTests.ExposureReplayTests {
    func recording() throws -> ReplayRecording {
        let directory = NSTemporaryDirectory() + "tracer-stress-test-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try Self.sessionsCSV.write(toFile: directory + "/sessions.csv", atomically: true, encoding: .utf8)
        try Self.readingsCSV.write(toFile: directory + "/readings.csv", atomically: true, encoding: .utf8)
        return try ReplayRecording(sessionsCSV: directory + "/sessions.csv", readingsCSV: directory + "/readings.csv")
    }

    @Test func aCalibrationShiftMovesEveryReadingOfAPairByItsReceiversAndItsSendersShift() throws {
        let recording = try recording()
        // Seed 1, ±8 dB: the first SplitMix64 output seeded with 1 xor FNV-1a("receiver\u{1f}B") is
        // 2 mod 17, so B receives 2 - 8 = -6 dB off; likewise A sends 1 dB more than it advertises,
        // A receives 7 dB off and B sends 8 dB more (worked out from the two functions' published
        // definitions, outside Swift).
        #expect(ReplayStress.shift(of: "B", role: "receiver", seed: 1, maximumDB: 8) == -6)
        #expect(ReplayStress.shift(of: "A", role: "sender", seed: 1, maximumDB: 8) == 1)
        #expect(ReplayStress.shift(of: "A", role: "receiver", seed: 1, maximumDB: 8) == 7)
        #expect(ReplayStress.shift(of: "B", role: "sender", seed: 1, maximumDB: 8) == 8)
        let shifted = ReplayStress.calibrationShift(seed: 1, maximumDB: 8).apply(to: recording)
        // A → B: -6 + 1 = -5 dB on each of -60, -90, -90, -73; B → A: 7 + 8 = +15 dB on -50.
        #expect(shifted.readings["t1:A->B"]?.map(\.calibratedRSSI) == [-65, -95, -95, -78])
        #expect(shifted.readings["t1:B->A"]?.map(\.calibratedRSSI) == [-35])
        // The node is told the same calibration as before.
        #expect(shifted.sessions == recording.sessions)
        #expect(ReplayStress.calibrationShift(seed: 1, maximumDB: 0).apply(to: recording).readings == recording.readings)
        for phone in ["A", "B", "C"] {
            #expect((-8...8).contains(ReplayStress.shift(of: phone, role: "receiver", seed: 7, maximumDB: 8)))
        }
    }

    @Test func calibratedReceiversKeepTheSendersShiftsAndOnlyAResidualOfTheirOwn() throws {
        let recording = try recording()
        // With no residual only the senders move, by the same amounts as in the seed's
        // calibration shift: A sends 1 dB more, B 8 dB more (see the test above).
        let exact = ReplayStress.calibratedReceivers(seed: 1, senderMaximumDB: 8, receiverResidualDB: 0).apply(to: recording)
        #expect(exact.readings["t1:A->B"]?.map(\.calibratedRSSI) == [-59, -89, -89, -72])
        #expect(exact.readings["t1:B->A"]?.map(\.calibratedRSSI) == [-42])
        #expect(exact.sessions == recording.sessions)
        // A residual of 2 dB moves each pair by at most 2 dB more than that.
        let residual = ReplayStress.calibratedReceivers(seed: 1, senderMaximumDB: 8, receiverResidualDB: 2).apply(to: recording)
        for (id, readings) in residual.readings {
            for (moved, sendersOnly) in zip(readings, exact.readings[id]!) {
                #expect(abs(moved.calibratedRSSI - sendersOnly.calibratedRSSI) <= 2)
            }
        }
        #expect(ReplayStress.calibratedReceivers(seed: 1, senderMaximumDB: 8, receiverResidualDB: 2).name
            == "senders ±8 dB, receivers calibrated to ±2 dB, seed 1")
    }

    @Test func aMinimumScanGapKeepsTheFirstScanThenEachOneFarEnoughFromTheLastKept() throws {
        let recording = try recording()
        // B scanned at 60, 300, 600 and 960 s: with 300 s, 300 is 240 s after 60 (dropped), 600 is
        // 540 s after 60 (kept), 960 is 360 s after 600 (kept).
        let slower = ReplayStress.minimumScanGap(seconds: 300).apply(to: recording)
        #expect(slower.readings["t1:A->B"]?.map(\.scanStart) == [60, 600, 960])
        #expect(slower.readings["t1:B->A"]?.map(\.scanStart) == [100])
        // With 400 s, 960 is only 360 s after 600.
        #expect(ReplayStress.minimumScanGap(seconds: 400).apply(to: recording).readings["t1:A->B"]?.map(\.scanStart) == [60, 600])
    }

    @Test func onePerScanKeepsTheFirstReadingOfEachScanAndHalfTheScansDropsWholeScans() throws {
        let session = try #require(try recording().sessions.first)
        let readings = [
            ReplayReading(seconds: 61, calibratedRSSI: -70, scanStart: 60), ReplayReading(seconds: 60, calibratedRSSI: -60, scanStart: 60),
            ReplayReading(seconds: 300, calibratedRSSI: -80, scanStart: 300), ReplayReading(seconds: 302, calibratedRSSI: -81, scanStart: 300),
        ]
        let recording = ReplayRecording(sessions: [session], readings: [session.id: readings])
        #expect(ReplayStress.onePerScan.apply(to: recording).readings[session.id]?.map(\.calibratedRSSI) == [-60, -80])
        for seed: UInt64 in [1, 2, 3] {
            let kept = try #require(ReplayStress.halfTheScans(seed: seed).apply(to: recording).readings[session.id])
            // Whole scans: both readings of a scan or neither; the same seed keeps the same scans.
            #expect(Set([60.0, 300.0]).allSatisfy { scan in kept.filter { $0.scanStart == scan }.count % 2 == 0 })
            #expect(ReplayStress.halfTheScans(seed: seed).apply(to: recording).readings[session.id] == kept)
        }
    }
}

extension MatchingTests.ExposureReplayTests {
    @Test func theAugmentedTrainingPoolIsTheRecordingAndOneShiftedCopyPerTrainingSeed() throws {
        let recording = try recording()
        let augmentation = StressAugmentation(seeds: [101, 102], maximumDB: 8)
        let copies = augmentation.recordings(of: recording)
        #expect(copies.count == 3)
        #expect(copies[0].readings == recording.readings)
        #expect(copies[1].readings == ReplayStress.calibrationShift(seed: 101, maximumDB: 8).apply(to: recording).readings)
        #expect(copies[2].readings == ReplayStress.calibrationShift(seed: 102, maximumDB: 8).apply(to: recording).readings)
        #expect(copies[1].readings != recording.readings)
        // Every copy keeps the sessions (and labels); only the readings move.
        #expect(copies.allSatisfy { $0.sessions == recording.sessions })
        // The shipped augmentation trains on seeds the stress cells never score with.
        #expect(StressAugmentation.training.seeds == [101, 102, 103, 104, 105])
        #expect(StressAugmentation.training.isDisjoint(fromScoringSeeds: [1, 2, 3, 4, 5]))
        #expect(!augmentation.isDisjoint(fromScoringSeeds: [5, 102]))
    }

    @Test func aHeldOutTestLeavesTheTrainingPoolInEveryReplay() {
        // Two tests, pooled as recorded, then two shifted copies: t1 t2 | t1 t2 | t1 t2.
        let groups = ["t1", "t2", "t1", "t2", "t1", "t2"]
        #expect(StressAugmentation.trainingIndices(groups: groups, heldOut: "t1") == [1, 3, 5])
        #expect(StressAugmentation.trainingIndices(groups: groups, heldOut: "t2") == [0, 2, 4])
        #expect(StressAugmentation.trainingIndices(groups: groups, heldOut: nil) == [0, 1, 2, 3, 4, 5])
        #expect(StressAugmentation.trainingIndices(groups: groups, heldOut: "t3").count == 6)
    }
}
