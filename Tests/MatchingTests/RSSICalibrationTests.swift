import Testing
import TestTiers
@testable import Matching

extension MatchingTests {
    @Suite(.tags(.unit)) struct RSSICalibrationTests {
        @Test func medianOfOddAndEvenCounts() {
            #expect(RSSICalibration.median([-60, -70, -50]) == -60)
            #expect(RSSICalibration.median([-61, -70, -50, -60]) == -60.5)
            #expect(RSSICalibration.median([-55]) == -55)
            #expect(RSSICalibration.median([]) == nil)
        }

        @Test func correctionBringsTheOneMetreAttenuationToTheModelsReference() throws {
            // TX 0 dBm heard at a median of -62 dBm: 62 dB at 1 m, 22 dB more than the 40 assumed.
            let readings = [-60, -61, -62, -62, -62, -63, -64, -58, -70, -62, -62]
            let calibration = try RSSICalibration(rssiReadings: readings, txPower: 0)
            #expect(calibration.readings == 11)
            #expect(calibration.medianRSSI == -62)
            #expect(calibration.attenuationAtOneMetre == 62)
            #expect(calibration.correction == 22)
            // The corrected reading gives the reference attenuation, as the risk model computes it.
            #expect(calibration.txPower - (Int(calibration.medianRSSI) + calibration.correction) == RSSICalibration.referenceAttenuationAtOneMetre)
        }

        @Test func aRadioThatReadsStrongGetsANegativeCorrection() throws {
            // TX -8 dBm heard at -41/-42 (median -41.5): 33.5 dB at 1 m, 6.5 dB below 40 → -7 (half away from zero).
            let readings = Array(repeating: -41, count: 6) + Array(repeating: -42, count: 6)
            let calibration = try RSSICalibration(rssiReadings: readings, txPower: -8)
            #expect(calibration.medianRSSI == -41.5)
            #expect(calibration.attenuationAtOneMetre == 33.5)
            #expect(calibration.correction == -7)
        }

        @Test func fewerThanTenReadingsGiveNoValue() {
            #expect(throws: CalibrationError.tooFewReadings(9, needed: 10)) {
                try RSSICalibration(rssiReadings: Array(repeating: -60, count: 9), txPower: 0)
            }
            #expect(throws: CalibrationError.tooFewReadings(0, needed: 10)) {
                try RSSICalibration(rssiReadings: [], txPower: 0)
            }
            #expect((try? RSSICalibration(rssiReadings: Array(repeating: -60, count: 10), txPower: 0))?.correction == 20)
        }

        @Test func correctionsOutsideTheSettingsBoundsAreRefused() throws {
            #expect(RSSICalibration.correctionRange == -40...40)
            // 80 dB at 1 m needs +40: the edge is accepted; 81 dB needs +41 and is refused.
            #expect(try RSSICalibration(rssiReadings: Array(repeating: -80, count: 10), txPower: 0).correction == 40)
            #expect(throws: CalibrationError.correctionOutOfRange(41, allowed: -40...40, attenuation: 81)) {
                try RSSICalibration(rssiReadings: Array(repeating: -81, count: 10), txPower: 0)
            }
            // 0 dB at 1 m (TX 0 dBm heard at 0 dBm) needs -40; -1 dB needs -41.
            #expect(try RSSICalibration(rssiReadings: Array(repeating: 0, count: 10), txPower: 0).correction == -40)
            #expect(throws: CalibrationError.correctionOutOfRange(-41, allowed: -40...40, attenuation: -1)) {
                try RSSICalibration(rssiReadings: Array(repeating: 1, count: 10), txPower: 0)
            }
        }

        @Test func figuresPrintToOneDecimal() {
            #expect(RSSICalibration.decibels(-60) == "-60")
            #expect(RSSICalibration.decibels(-60.5) == "-60.5")
            #expect(RSSICalibration.decibels(33.46) == "33.5")
        }
    }
}
