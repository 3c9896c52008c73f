import ExposureReplay
import Foundation
import IDRotation
import Testing
import TestTiers
@testable import Matching
import TracerCore

extension MatchingTests {
    /// Issue 26, fifth round: a day's score other than its total of weighted minutes
    /// (`risk.score`), and the logistic score's arithmetic.
    @Suite(.tags(.unit)) struct DayScoreTests {
        let day: UnixSeconds = 1_795_305_600  // 2026-11-22T00:00:00Z

        /// Four id windows: 5 and 7 near minutes in two successive windows, then an hour later 14
        /// medium minutes (7 weighted) and 15 far ones (0). Each window its own peer id, as on the air.
        func assessment(_ score: RiskModel.DayScore, model base: RiskModel = .standard) -> ExposureAssessment {
            var model = base
            model.dayScore = score
            let encounters = [
                encounter(1, from: day, to: day + 240, rssi: -45),                  // 45 dB, 5 min
                encounter(2, from: day + 900, to: day + 900 + 360, rssi: -48),      // 48 dB, 7 min
                encounter(3, from: day + 3_600, to: day + 3_600 + 780, rssi: -53),  // 53 dB, 14 min × 0.5
                encounter(4, from: day + 4_500, to: day + 4_500 + 840, rssi: -70),  // 70 dB, 15 min × 0
            ]
            return ExposureAssessment(
                matches: encounters.map { ExposureMatch(encounter: $0, listed: listed($0.peer.rawValue, from: day, to: day + 86_400)) },
                model: model)
        }

        @Test func aDayIsDescribedWindowByWindow() throws {
            let features = try #require(assessment(.total).days.first?.features)
            #expect(features.weightedMinutes == 19)
            #expect(features.bestWindowMinutes == 7)
            // The first two windows start 15 minutes apart; the last two start an hour later.
            #expect(features.bestHalfHourMinutes == 12)
            #expect(features.strongestAttenuation == 45)
            #expect(features.medianAttenuation == 50.5)
            #expect(features.windows == 4)
            #expect(features.longestNearRun == 2)
            // 5 + 7 near and 14 medium; the far window's 15 minutes are not close contact.
            #expect(features.closeContactMinutes == 26)
        }

        @Test func theScoreSettingDecidesTheLevel() {
            // 19 weighted minutes in the day: high from 18.4. But no half hour holds more than 12,
            // no window more than 7: low (exit 3 from 5.8).
            #expect(assessment(.total).level == .high)
            #expect(assessment(.total).days.first?.score == 19)
            #expect(assessment(.bestHalfHour).level == .low)
            #expect(assessment(.bestHalfHour).days.first?.score == 12)
            #expect(assessment(.bestWindow).days.first?.score == 7)
            var stricter = RiskModel.standard
            stricter.lowMinutes = 10
            #expect(assessment(.bestWindow, model: stricter).level == .none)
            #expect(assessment(.bestHalfHour, model: stricter).level == .low)
            // The day's weighted minutes stay what they are whatever decides the level.
            #expect(assessment(.bestWindow).days.first?.weightedMinutes == 19)
        }

        @Test func theLogisticScoreIsTheProbabilityOfItsLinearPredictor() {
            let score = LogisticScore(intercept: 1, coefficients: [2, 0, -0.1, 0, 0, 0], lowProbability: 0.4, highProbability: 0.7)
            // log(1 + (e − 1)) = 1: 1 + 2 · 1 − 0.1 · 30 = 0, probability 1/2.
            let even = DayFeatures(weightedMinutes: exp(1) - 1, bestWindowMinutes: 0, bestHalfHourMinutes: 0, strongestAttenuation: 30,
                                   medianAttenuation: 30, windows: 1, longestNearRun: 1)
            #expect(abs(score.probability(of: even) - 0.5) < 1e-12)
            // 10 dB weaker: the predictor falls by 1, to 1/(1 + e).
            var weaker = even
            weaker.strongestAttenuation = 40
            #expect(abs(score.probability(of: weaker) - 1 / (1 + exp(1))) < 1e-12)
            // No window measured: the attenuation counts as 100 dB.
            weaker.strongestAttenuation = nil
            #expect(LogisticScore.inputs(weaker)[2] == LogisticScore.unmeasuredAttenuation)
            // Its own thresholds decide the level, not the minutes'.
            var model = RiskModel.standard
            model.dayScore = .logistic
            model.logistic = score
            #expect(model.level(score: 0.39) == .none)
            #expect(model.level(score: 0.4) == .low)
            #expect(model.level(score: 0.7) == .high)
            #expect(model.level(score: 19) == .high)
        }

        @Test func theShippedLogisticScoreIsTheFittedOne() {
            // docs/risk-model.md, "Fifth round": fitted on all 24 labelled tests over two features,
            // the day's weighted minutes and its strongest attenuation; the default in the sixth
            // round, with its floor of close contact minutes; since the seventh, `risk.score =
            // logistic` selects it and the default is the day's total.
            #expect(RiskModel.standard.dayScore == .total)
            let fitted = RiskModel.fittedLogistic
            #expect(fitted.coefficients.count == LogisticScore.featureNames.count)
            #expect(fitted.coefficients[0] > 0)
            #expect(fitted.coefficients[2] < 0)
            #expect([1, 3, 4, 5].allSatisfy { fitted.coefficients[$0] == 0 })
            var model = RiskModel.standard
            model.dayScore = .logistic
            let day = assessment(.logistic).days[0]
            let expected = 1 / (1 + exp(-(fitted.intercept + fitted.coefficients[0] * log(20) + fitted.coefficients[2] * 45)))
            #expect(abs((day.score ?? 0) - expected) < 1e-12)
            #expect(day.level == model.level(score: expected))
        }

        /// One diagnosed id heard for `minutes` (a node's 60 s per sighting) at `rssi`, scored alone.
        func level(minutes: Int64, rssi: Int8, model: RiskModel) -> RiskLevel {
            let heard = encounter(9, from: day, to: day + (minutes - 1) * 60, rssi: rssi)
            return ExposureAssessment(matches: [ExposureMatch(encounter: heard, listed: listed(9, from: day, to: day + 900))], model: model).level
        }

        @Test func theLogisticScoreNeedsTheLabelsMinutesLessAScanCycle() {
            var model = RiskModel.standard
            model.dayScore = .logistic
            #expect(model.minContactMinutes == 10)
            // The fitted coefficients alone make one minute at 45 dB an exposure (the recordings
            // hold no brief contacts): the floor of 10 close minutes does not.
            #expect(level(minutes: 1, rssi: -45, model: model) == .none)
            #expect(level(minutes: 9, rssi: -45, model: model) == .none)
            #expect(level(minutes: 10, rssi: -45, model: model) > .none)
            #expect(level(minutes: 12, rssi: -45, model: model) > .none)
            // Medium minutes count towards the floor (53 dB: medium), far ones do not (60 dB).
            #expect(level(minutes: 12, rssi: -53, model: model) > .none)
            #expect(level(minutes: 30, rssi: -60, model: model) == .none)
            // The score itself is 0 under the floor, so no threshold reaches it.
            let brief = ExposureAssessment(
                matches: [ExposureMatch(encounter: encounter(9, from: day, to: day, rssi: -45), listed: listed(9, from: day, to: day + 900))],
                model: model)
            #expect(brief.days.first?.score == 0)
            #expect(brief.days.first?.features?.closeContactMinutes == 1)
            // Whatever the thresholds: not even a threshold of 0 lets a day under the floor through.
            var anything = model
            anything.logistic.lowProbability = 0
            #expect(level(minutes: 1, rssi: -45, model: anything) == .none)
            // Turned off, the fitted score's own verdict comes back.
            model.minContactMinutes = 0
            #expect(level(minutes: 1, rssi: -45, model: model) == .low)
            #expect(level(minutes: 1, rssi: -60, model: model) == .none)
        }

        /// The sixth round's default: the logistic score with its floor, as `risk.score = logistic` selects it.
        static var logisticDefault: RiskModel {
            var model = RiskModel.standard
            model.dayScore = .logistic
            return model
        }

        /// A contact the exchange alone proved (no signal measured either way) counts as `total`
        /// counts it, like medium minutes: long enough, it is an exposure under either score.
        @Test func anUnmeasuredContactCanStillBeAnExposure() {
            func unmeasured(minutes: Int64, model: RiskModel = .standard) -> ExposureAssessment {
                let heard = encounter(9, from: day, to: day + (minutes - 1) * 60, rssi: nil, txPower: nil)
                return ExposureAssessment(matches: [ExposureMatch(encounter: heard, listed: listed(9, from: day, to: day + 3_600))], model: model)
            }
            // The default (`total`): unmeasured minutes weigh 0.5, one sighting a minute. 30 minutes
            // are 15 weighted (low: 5.8 ≤ 15 < 18.4), 12 are 6 (low), 11 are 5.5 (none).
            #expect(RiskModel.standard.dayScore == .total)
            #expect(unmeasured(minutes: 30).days.first?.weightedMinutes == 15)
            #expect(unmeasured(minutes: 30).level == .low)
            #expect(unmeasured(minutes: 12).level == .low)
            #expect(unmeasured(minutes: 11).level == .none)
            // The logistic score: the same contact, in the middle of the medium range.
            let logistic = Self.logisticDefault
            #expect(unmeasured(minutes: 30, model: logistic).level > .none)
            #expect(unmeasured(minutes: 12, model: logistic).level > .none, "as 12 medium minutes are")
            #expect(unmeasured(minutes: 30, model: logistic).days.first?.features?.strongestAttenuation
                    == (RiskModel.standard.nearAttenuation + RiskModel.standard.farAttenuation) / 2)
            #expect(unmeasured(minutes: 5, model: logistic).level == .none, "under the floor")
        }

        /// A 15-minute near contact from 23:52 to 00:07 UTC falls in two days of 8 minutes each,
        /// both under the floor of 10 alone: each day counts the other's minutes that follow on.
        @Test func aContactOverMidnightIsNotCutUnderTheFloor() {
            let logistic = Self.logisticDefault
            let midnight = day + 86_400
            let evening = encounter(7, from: midnight - 480, to: midnight - 60, rssi: -45)  // 8 min
            let morning = encounter(7, from: midnight, to: midnight + 420, rssi: -45)       // 8 min
            let assessed = ExposureAssessment(
                matches: [evening, morning].map { ExposureMatch(encounter: $0, listed: listed(7, from: day, to: midnight + 86_400)) },
                model: logistic)
            #expect(assessed.days.count == 2)
            #expect(assessed.days.allSatisfy { $0.level > .none }, "\(assessed.days.map(\.level))")
            // Days apart do not add up: the same 8 minutes a day later than the evening stay under it.
            let apart = ExposureAssessment(
                matches: [evening, encounter(7, from: midnight + 43_200, to: midnight + 43_620, rssi: -45)]
                    .map { ExposureMatch(encounter: $0, listed: listed(7, from: day, to: midnight + 86_400)) },
                model: logistic)
            #expect(apart.level == .none)
        }

        @Test func theMinuteScoresAreNotFloored() {
            // 6 near minutes reach risk.low_minutes (5.8) under the minute-based scores although
            // they are under the logistic score's floor of 10.
            for score in [RiskModel.DayScore.total, .bestWindow, .bestHalfHour] {
                var model = RiskModel.standard
                model.dayScore = score
                #expect(level(minutes: 6, rssi: -45, model: model) == .low)
            }
        }

        @Test func theFitRecoversAKnownModel() throws {
            // Probabilities from intercept 1, +2 per unit of feature 0, −0.1 per dB of feature 2;
            // 400 examples per grid point with the nearest whole number of positives.
            var examples: [(inputs: [Double], truth: Bool)] = []
            for step in 0...6 {
                for attenuation in stride(from: 20.0, through: 60, by: 10) {
                    let x = Double(step) / 2
                    let p = 1 / (1 + exp(-(1 + 2 * x - 0.1 * attenuation)))
                    let positives = Int((p * 400).rounded())
                    for index in 0..<400 { examples.append(([x, 0, attenuation, 0, 0, 0], index < positives)) }
                }
            }
            let fit = try #require(LogisticFit(ridge: 0, features: [0, 2]).fit(examples))
            #expect(abs(fit.intercept - 1) < 0.05)
            #expect(abs(fit.coefficients[0] - 2) < 0.02)
            #expect(abs(fit.coefficients[2] + 0.1) < 0.002)
            #expect(fit.coefficients[1] == 0 && fit.coefficients[3] == 0)
            // One class only: nothing to fit.
            #expect(LogisticFit().fit(examples.filter(\.truth)) == nil)
        }
    }
}
