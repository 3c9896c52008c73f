import IDRotation
import Testing
import TestTiers
@testable import Matching
import TracerCore

extension MatchingTests {
    @Suite(.tags(.unit)) struct RiskModelTests {
        let day: UnixSeconds = 1_795_305_600  // 2026-11-22T00:00:00Z
        // The bucket arithmetic is checked on the Exposure Notification example (55/70 dB, the
        // mean RSSI), whose numbers these cases were written for; the measured defaults have
        // their own test below.
        let model = RiskModel.exposureNotificationExample

        @Test func bucketsSplitAWindowsTimeByItsReadings() {
            var buckets = RiskModel.standard
            buckets.attenuationSummary = .buckets
            buckets.samplingPeriodSeconds = 0
            // Eight minutes; 3 readings near (50 dB), 1 medium (56 dB), 4 far (70 dB).
            var value = encounter(1, from: day, to: day + 480, rssi: -50, txPower: 0)
            value.rssiHistogram = RSSIHistogram([-50: 3, -56: 1, -70: 4])
            let split = buckets.minutesByProximity(of: value)
            #expect(split == [.near: 3, .medium: 1, .far: 4])
            let assessment = ExposureAssessment(matches: [ExposureMatch(encounter: value, listed: listed(1, from: day, to: day + 900))], model: buckets)
            #expect(assessment.days.first?.weightedMinutes == 3 + 0.5)
            // The strongest value puts all eight minutes in "near"; a row without a histogram
            // (logged before schema v3) is scored that way under buckets too.
            var strongest = buckets
            strongest.attenuationSummary = .strongest
            #expect(strongest.minutesByProximity(of: value) == [.near: 8])
            value.rssiHistogram = RSSIHistogram()
            #expect(buckets.minutesByProximity(of: value) == [.near: 8])
        }

        @Test func theDefaultsAreTheMeasuredOnes() {
            // docs/risk-model.md, "Measured on real recordings": the strongest RSSI of a window or
            // the peer's report, near below 51 dB, medium to 56 dB, an exposure from 5.8 weighted
            // minutes, high from 18.4.
            let standard = RiskModel.standard
            #expect(standard.attenuationSummary == .strongest)
            #expect(standard.directions == .both)
            #expect((standard.nearAttenuation, standard.farAttenuation) == (51, 56))
            #expect((standard.lowMinutes, standard.highMinutes) == (5.8, 18.4))
            // Since the seventh round the day's total decides (docs/risk-model.md, "Seventh round").
            #expect(standard.dayScore == .total)
            // One sighting at −50 dBm and one at −80: the mean (65 dB) would be far, the strongest
            // (50 dB) is near.
            var value = encounter(1, from: day, to: day + 60, rssi: -50)
            value.rssiSum = -50 + -80
            value.rssiCount = 2
            value.rssiMin = -80
            #expect(standard.attenuation(of: value) == 50)
            #expect(standard.proximity(of: value) == .near)
            #expect(model.proximity(of: value) == .medium)
            // The receiver's calibration is added to what it measured: −50 + 6 = −44 dBm, 44 dB.
            var calibrated = standard
            calibrated.rssiCorrection = 6
            #expect(calibrated.attenuation(of: value) == 44)
            // 51 dB is medium, 56 dB still medium, 57 dB far.
            #expect(standard.proximity(of: encounter(1, from: day, to: day, rssi: -50, txPower: 0)) == .near)
            #expect(standard.proximity(of: encounter(1, from: day, to: day, rssi: -51, txPower: 0)) == .medium)
            #expect(standard.proximity(of: encounter(1, from: day, to: day, rssi: -56, txPower: 0)) == .medium)
            #expect(standard.proximity(of: encounter(1, from: day, to: day, rssi: -57, txPower: 0)) == .far)
            // 5.8 weighted minutes are an exposure (tracer check exits 3), 18.4 are high.
            #expect(standard.level(weightedMinutes: 5.7) == .none)
            #expect(standard.level(weightedMinutes: 5.8) == .low)
            #expect(standard.level(weightedMinutes: 18.3) == .low)
            #expect(standard.level(weightedMinutes: 18.4) == .high)
        }

        @Test func attenuationBucketsFollowTheExposureNotificationDefaults() {
            // Attenuation = TX power − mean RSSI: 0 − (−54) = 54 dB is near, 55 and 70 medium, 71 far.
            #expect(model.proximity(of: encounter(1, from: day, to: day, rssi: -54, txPower: 0)) == .near)
            #expect(model.proximity(of: encounter(1, from: day, to: day, rssi: -55, txPower: 0)) == .medium)
            #expect(model.proximity(of: encounter(1, from: day, to: day, rssi: -70, txPower: 0)) == .medium)
            #expect(model.proximity(of: encounter(1, from: day, to: day, rssi: -71, txPower: 0)) == .far)
            // A peer advertising +8 dBm heard at −60 dBm: 68 dB, medium.
            #expect(model.attenuation(of: encounter(1, from: day, to: day, rssi: -60, txPower: 8)) == 68)
            // No TX power advertised: the model's assumption (0 dBm) stands in.
            #expect(model.attenuation(of: encounter(1, from: day, to: day, rssi: -60, txPower: nil)) == 60)
            // We measured nothing, the peer reported what it heard of us.
            #expect(model.attenuation(of: encounter(1, from: day, to: day, rssi: nil, txPower: 0, reportedRSSI: -40)) == 40)
            #expect(model.proximity(of: encounter(1, from: day, to: day, rssi: nil, txPower: 0)) == .unknown)
        }

        @Test func averagedDirectionsTakeTheMeanWhereBothExist() {
            var average = RiskModel.standard
            average.directions = .average
            // Ours 70 dB (TX 0 heard at −70 dBm), the report 45 dB (−45 dBm): (70 + 45) / 2 = 57.5,
            // rounded down to 57.
            #expect(average.attenuation(of: encounter(1, from: day, to: day, rssi: -70, txPower: 0, reportedRSSI: -45)) == 57)
            // With our own TX power of −20 dBm the report is −20 − (−45) = 25 dB: (70 + 25) / 2 = 47.5 → 47.
            average.ownTxPower = -20
            #expect(average.attenuation(of: encounter(1, from: day, to: day, rssi: -70, txPower: 0, reportedRSSI: -45)) == 47)
            // A weaker report pulls the mean the other way: (70 + 70) / 2 with −20 − (−90) = 70 dB.
            #expect(average.attenuation(of: encounter(1, from: day, to: day, rssi: -70, txPower: 0, reportedRSSI: -90)) == 70)
            // One direction alone: ours, or the report when we measured nothing.
            #expect(average.attenuation(of: encounter(1, from: day, to: day, rssi: -70, txPower: 0)) == 70)
            #expect(average.attenuation(of: encounter(1, from: day, to: day, rssi: nil, txPower: 0, reportedRSSI: -45)) == 25)
        }

        @Test func bothDirectionsTakeTheSmallerAttenuation() {
            var both = RiskModel.standard
            var ours = RiskModel.standard
            ours.directions = .ours
            // We heard the peer (TX 0) at −70 dBm at best: 70 dB. It heard us at −45 dBm.
            let value = encounter(1, from: day, to: day, rssi: -70, txPower: 0, reportedRSSI: -45)
            #expect(ours.attenuation(of: value) == 70)  // ours alone: the report is ignored
            #expect(both.attenuation(of: value) == 45)
            // Our own TX power (−20 dBm) is what the peer's reading measures: −20 − (−45) = 25 dB.
            both.ownTxPower = -20
            #expect(both.attenuation(of: value) == 25)
            // The weaker of the two never wins: a report of −90 dBm leaves our 70 dB.
            #expect(both.attenuation(of: encounter(1, from: day, to: day, rssi: -70, txPower: 0, reportedRSSI: -90)) == 70)
            // A window we measured nothing in: the report alone, under either setting.
            let reportOnly = encounter(1, from: day, to: day, rssi: nil, txPower: 0, reportedRSSI: -45)
            #expect(both.attenuation(of: reportOnly) == 25)
            #expect(ours.attenuation(of: reportOnly) == 45)
        }

        @Test func theLinearCurveWeighsEachDecibelBetweenTheThresholds() {
            var linear = RiskModel.standard
            linear.weightCurve = .linear
            linear.directions = .ours
            (linear.nearAttenuation, linear.farAttenuation) = (40, 60)
            linear.samplingPeriodSeconds = 0
            // Weight 1 up to 40 dB, 0 from 60 dB, and a straight line between: 45 dB weighs 0.75.
            #expect(linear.weight(ofAttenuation: 35) == 1)
            #expect(linear.weight(ofAttenuation: 40) == 1)
            #expect(linear.weight(ofAttenuation: 45) == 0.75)
            #expect(linear.weight(ofAttenuation: 50) == 0.5)
            #expect(linear.weight(ofAttenuation: 60) == 0)
            #expect(linear.weight(ofAttenuation: 70) == 0)
            // With a far weight of 0.1 the line ends there: 50 dB weighs 0.55.
            var floor = linear
            floor.farWeight = 0.1
            #expect(abs(floor.weight(ofAttenuation: 50) - 0.55) < 1e-12)
            // Ten minutes at 45 dB (strongest −45 dBm, TX 0) are 7.5 weighted minutes; steps would give 5.
            let value = encounter(1, from: day, to: day + 600, rssi: -45, txPower: 0)
            #expect(linear.weightedMinutes(of: value) == 7.5)
            var steps = linear
            steps.weightCurve = .steps
            #expect(steps.weightedMinutes(of: value) == 5)
            // Per reading (the window's histogram): 2 readings at 40 dB and 2 at 60 dB over 10 minutes.
            var perReading = linear
            perReading.attenuationSummary = .buckets
            var split = encounter(1, from: day, to: day + 600, rssi: -40, txPower: 0)
            split.rssiHistogram = RSSIHistogram([-40: 2, -60: 2])
            #expect(perReading.weightedMinutes(of: split) == 5)
            // A window measured by nobody weighs the unknown weight.
            #expect(linear.weightedMinutes(of: encounter(1, from: day, to: day + 600, rssi: nil, txPower: 0)) == 5)
            // The day's score is the sum over its encounters.
            let assessment = ExposureAssessment(
                matches: [ExposureMatch(encounter: value, listed: listed(1, from: day, to: day + 900))], model: linear)
            #expect(assessment.days.first?.weightedMinutes == 7.5)
        }

        @Test func theUpperQuartileIgnoresOneLuckyReading() {
            var quartile = RiskModel.standard
            quartile.attenuationSummary = .upperQuartile
            // Eight readings: one at −40, one at −60, six at −70. A quarter is two readings: the
            // strongest value two reach is −60 (60 dB), not the lucky −40.
            var value = encounter(1, from: day, to: day, rssi: -40, txPower: 0)
            value.rssiHistogram = RSSIHistogram([-40: 1, -60: 1, -70: 6])
            #expect(RiskModel.upperQuartile(of: value.rssiHistogram) == -60)
            #expect(quartile.attenuation(of: value) == 60)
            #expect(RiskModel.standard.attenuation(of: value) == 40)
            // Four readings: one reading is a quarter, so the strongest counts.
            #expect(RiskModel.upperQuartile(of: RSSIHistogram([-40: 1, -70: 3])) == -40)
            #expect(RiskModel.upperQuartile(of: RSSIHistogram()) == nil)
            // A row without a histogram falls back to its strongest value.
            value.rssiHistogram = RSSIHistogram()
            #expect(quartile.attenuation(of: value) == 40)
        }

        @Test func theMeanRSSIOfAllSightingsDecides() {
            var value = encounter(1, from: day, to: day + 60, rssi: -40)
            value.rssiSum = -40 + -80
            value.rssiCount = 2
            #expect(model.attenuation(of: value) == 60)
        }

        @Test func contactTimeRunsFromFirstToLastSightingPlusOneScanCycle() {
            #expect(model.contactSeconds(of: encounter(1, from: day, to: day)) == 60)
            #expect(model.contactSeconds(of: encounter(1, from: day, to: day + 600)) == 660)
        }

        @Test func daysAreScoredSeparatelyWithWeights() {
            let near = encounter(1, from: day + 3_600, to: day + 3_600 + 840, rssi: -50)         // 15 min near
            let medium = encounter(2, from: day + 7_200, to: day + 7_200 + 540, rssi: -60)       // 10 min medium → 5
            let far = encounter(3, from: day + 86_400 + 100, to: day + 86_400 + 1_300, rssi: -90) // 21 min far → 0
            let nextDayNear = encounter(4, from: day + 86_400 + 5_000, to: day + 86_400 + 5_360, rssi: -45) // 7 min → 7
            let matches = [near, medium, far, nextDayNear].map {
                ExposureMatch(encounter: $0, listed: listed($0.peer.rawValue, from: day, to: day + 200_000))
            }
            let assessment = ExposureAssessment(matches: matches, model: model)

            #expect(assessment.days.map(\.day) == ["2026-11-22", "2026-11-23"])
            #expect(assessment.days[0].weightedMinutes == 20)
            #expect(assessment.days[0].level == .high)
            #expect(assessment.days[0].diagnosedIDs == 2)
            #expect(assessment.days[0].closest == .near)
            #expect(assessment.days[1].weightedMinutes == 7)
            #expect(assessment.days[1].minutes[.far] == 21)
            #expect(assessment.days[1].level == .low)
            #expect(assessment.level == .high)
        }

        @Test func briefOrDistantContactStaysBelowTheThreshold() {
            let brief = encounter(1, from: day, to: day + 60, rssi: -50)  // 2 min near
            let assessment = ExposureAssessment(
                matches: [ExposureMatch(encounter: brief, listed: listed(1, from: day, to: day + 900))], model: model)
            #expect(assessment.level == .none)
            #expect(assessment.days.count == 1)
            #expect(assessment.exposureDays.isEmpty)
        }

        @Test func anEncounterMatchedTwiceCountsOnce() {
            let met = encounter(1, from: day, to: day + 840, rssi: -50)
            let match = ExposureMatch(encounter: met, listed: listed(1, from: day, to: day + 900))
            #expect(ExposureAssessment(matches: [match, match], model: model).days[0].weightedMinutes == 15)
        }

        @Test func civilDatesAreComputedInUTC() {
            #expect(ExposureAssessment.dayName(0) == "1970-01-01")
            #expect(ExposureAssessment.dayName(951_782_400) == "2000-02-29")
            #expect(ExposureAssessment.dayName(1_795_305_600) == "2026-11-22")
            #expect(ExposureAssessment.dayName(4_107_542_400) == "2100-03-01")
            #expect(ExposureAssessment.dayName(-86_400) == "1969-12-31")
        }

        @Test func badSettingsAreNamed() {
            var model = RiskModel.standard
            #expect(model.problem == nil)
            model.farAttenuation = 50
            #expect(model.problem?.contains("far_attenuation") == true)
            model = .standard
            model.highMinutes = 1
            #expect(model.problem?.contains("high_minutes") == true)
        }
    }
}
