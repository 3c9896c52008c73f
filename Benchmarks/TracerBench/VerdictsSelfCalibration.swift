import ExposureReplay
import Foundation
import Matching

/// Issue 37, item 3: what each piece of the calibration a node can do for itself buys under the
/// calibration stress. The pieces: hearing the peer's reading of us at all (the exchange's report),
/// the writer applying its own correction before it reports (`PeerReports.calibrated`), averaging
/// the two directions rather than taking the stronger (a per-device error of either side then
/// counts half), and the receiver's own offset measured with `tracer calibrate`
/// (`ReplayStress.calibratedReceivers`: what is left of it is a residual of ±2 dB, an assumption
/// stated with the figures). Reported, not a choice: each piece is scored with the third round's
/// procedure refitted per fold for that piece (so a threshold is not judged on readings it was not
/// chosen for) and with the physics rule, which has nothing fitted.
extension VerdictsBenchmark {
    struct CalibrationPiece {
        var name: String
        var reports: ExposureReplay.PeerReports
        var directions: RiskModel.Directions
    }

    static let calibrationPieces = [
        CalibrationPiece(name: "our readings only (no exchange)", reports: .none, directions: .ours),
        CalibrationPiece(name: "the peer's raw report, the stronger of the two (today)", reports: .raw, directions: .both),
        CalibrationPiece(name: "the peer's raw report, both averaged", reports: .raw, directions: .average),
        CalibrationPiece(name: "the peer's calibrated report, the stronger of the two", reports: .calibrated, directions: .both),
        CalibrationPiece(name: "the peer's calibrated report, both averaged", reports: .calibrated, directions: .average),
    ]

    /// What a receiver calibrated with `tracer calibrate` is assumed to keep of its offset.
    static let calibratedReceiverResidualDB = 2

    func selfCalibrationRun(_ recording: ReplayRecording, seeds: [UInt64]) throws {
        let started = ContinuousClock.now
        let baseInterval = recording.medianScanIntervalSeconds
        say("### Calibration the node can do for itself (issue 37, item 3; reported, not a choice)")
        say("Each piece scored with the third round's procedure refitted per fold on the recording as it is for that piece (held out by test), "
            + "and with the physics rule (55/70 dB, strongest, 1/0.5/0, exit 3 from 5 min; nothing fitted). Exit 3, all labelled pairs, held out. "
            + "Cells: as recorded; every device's calibration ±8 dB (seeds \(seeds.map(String.init).joined(separator: ", "))); "
            + "the same senders' errors with every receiver calibrated to ±\(Self.calibratedReceiverResidualDB) dB (an assumed residual of `tracer calibrate`).")
        say("")
        struct Cell { var name: String; var stress: ReplayStress?; var kind: String }
        var cells = [Cell(name: "as recorded", stress: nil, kind: "as recorded")]
        cells += seeds.map { Cell(name: "calibration ±8 dB, seed \($0)", stress: .calibrationShift(seed: $0, maximumDB: 8), kind: "calibration ±8 dB") }
        cells += seeds.map {
            Cell(name: "receivers calibrated, seed \($0)",
                 stress: .calibratedReceivers(seed: $0, senderMaximumDB: 8, receiverResidualDB: Self.calibratedReceiverResidualDB),
                 kind: "senders ±8 dB, receivers calibrated to ±\(Self.calibratedReceiverResidualDB) dB")
        }
        let reportKinds = Array(Set(Self.calibrationPieces.map(\.reports))).sorted { $0.rawValue < $1.rawValue }

        // The per-fold rules of each piece, chosen on the recording as it is.
        var clock = ContinuousClock.now
        var base: [ExposureReplay.PeerReports: [ReplayedSession]] = [:]
        for reports in reportKinds {
            base[reports] = try ExposureReplay.replay(recording, directory: directory, reports: reports).filter { $0.session.label != nil }
        }
        let tests = Set(base[.none]!.map(\.session.test))
        let folds = Self.calibrationPieces.map { piece in
            stepsPerFold(base[piece.reports]!, samplingPeriod: baseInterval, directions: piece.directions, groups: tests, group: \.session.test)
        }
        say("per-fold rules of \(Self.calibrationPieces.count) pieces fitted in \(format(seconds(ContinuousClock.now - clock), 1)) s")

        // figures[piece][rule: 0 per fold, 1 physics][cell]
        var figures = Array(repeating: [[CellFigures]](repeating: [], count: 2), count: Self.calibrationPieces.count)
        for cell in cells {
            clock = .now
            var replays = base
            if let stress = cell.stress {
                let stressed = stress.apply(to: recording)
                for reports in reportKinds {
                    replays[reports] = try ExposureReplay.replay(stressed, directory: directory, reports: reports).filter { $0.session.label != nil }
                }
            }
            for (index, piece) in Self.calibrationPieces.enumerated() {
                var physics = Self.physicsRule(summary: .strongest, directions: piece.directions)
                physics.samplingPeriodSeconds = baseInterval
                let sessions = replays[piece.reports]!
                let perFold = sessions.compactMap { session in folds[index][session.session.test].map { outcome(of: session, model: $0) } }
                let fixed = sessions.map { outcome(of: $0, model: physics) }
                for (rule, outcomes) in [perFold, fixed].enumerated() {
                    let exit3 = VerdictCounts(outcomes.map { ($0.exit3, $0.truth) })
                    let area = ScoredTruths(outcomes.map { ($0.score, $0.truth) }).areaUnderCurve
                    figures[index][rule].append(CellFigures(tpr: exit3.truePositiveRate.value, fpr: exit3.falsePositiveRate.value, area: area))
                }
            }
            say("cell \"\(cell.name)\": replayed and scored in \(format(seconds(ContinuousClock.now - clock), 1)) s")
        }
        say("")
        let kinds = ["as recorded", cells[1].kind, cells.last!.kind]
        say("| piece | rule | " + kinds.map { "\($0): TPR / FPR, ROC area (mean; worst TPR, worst FPR, worst area)" }.joined(separator: " | ") + " |")
        say("|---|---|" + kinds.map { _ in "---|" }.joined())
        for (index, piece) in Self.calibrationPieces.enumerated() {
            for (rule, ruleName) in ["third round's procedure per fold", "physics 55/70, ≥ 5 min"].enumerated() {
                let row = kinds.map { kind -> String in
                    let chosen = cells.indices.filter { cells[$0].kind == kind }.map { figures[index][rule][$0] }
                    let mean = { (values: [Double]) in values.reduce(0, +) / Double(values.count) }
                    let tprs = chosen.map(\.tpr), fprs = chosen.map(\.fpr), areas = chosen.map(\.area)
                    let summary = "\(format(mean(tprs), 2)) / \(format(mean(fprs), 2)), \(format(mean(areas), 3))"
                    return chosen.count == 1 ? summary
                        : summary + " (\(format(tprs.min()!, 2)), \(format(fprs.max()!, 2)), \(format(areas.min()!, 3)))"
                }
                say("| \(piece.name) | \(ruleName) | " + row.joined(separator: " | ") + " |")
            }
        }
        say("")
        say("self-calibration run: \(cells.count) cells, \(Self.calibrationPieces.count) pieces, \(cells.count * reportKinds.count) replays, in \(format(seconds(ContinuousClock.now - started), 1)) s")
        say("")
    }
}
