import Testing
import TestTiers
@testable import GATTExchange

/// The scan plans against the discovery bound they are chosen from (`ScanPlan`).
@Suite(.tags(.unit)) struct ScanPlanTests {
    /// The share of the time a plan's bursts keep the receiver on, with the pause at its mean.
    static func receiverShare(_ configuration: ExchangeConfiguration) -> Double {
        guard configuration.scanOffTime > .zero else { return 1 }
        let listening = configuration.scanOnTime * (Double(configuration.radio.scanWindow) / Double(configuration.radio.scanInterval))
        return listening / (configuration.scanOnTime + configuration.scanOffTime)
    }

    @Test func theDefaultIsTheStandardPlan() {
        let byDefault = ExchangeConfiguration()
        let standard = ExchangeConfiguration(scanPlan: .standard)
        #expect(byDefault.scanOnTime == standard.scanOnTime && byDefault.scanOffTime == standard.scanOffTime)
        #expect(byDefault.radio.scanWindow == standard.radio.scanWindow && byDefault.radio.scanInterval == standard.radio.scanInterval)
    }

    /// One advertising interval (250 ms), the advertising delay's 10 ms, 10 ms to tune in.
    @Test func theDiscoveryWindowCoversOneAdvertisingEventOfAPeerLikeUs() {
        let configuration = ExchangeConfiguration()
        #expect(configuration.radio.advertisingInterval == 0x0190)
        #expect(configuration.discoveryWindow == .milliseconds(270))
        var faster = ExchangeConfiguration()
        faster.radio.advertisingInterval = 0x00A0  // 100 ms
        #expect(faster.discoveryWindow == .milliseconds(120))
        ScanPlan.standard.apply(to: &faster)
        #expect(faster.scanOnTime == .milliseconds(120))
        #expect(faster.radio.scanWindow == 192 && faster.radio.scanInterval == 192, "120 ms is 192 units of 0.625 ms")
    }

    /// A burst listens without a break for the whole window: a scan window shorter than its
    /// interval would leave gaps an advertising event can fall into.
    @Test func burstsListenUnbroken() {
        for plan in [ScanPlan.standard, .lowPower, .continuous] {
            let configuration = ExchangeConfiguration(scanPlan: plan)
            #expect(configuration.radio.scanWindow == configuration.radio.scanInterval, "\(plan)")
            #expect(configuration.radio.scanWindow == 432, "\(plan): 270 ms is 432 units")
            #expect(configuration.scanOnTime >= configuration.discoveryWindow, "\(plan)")
        }
    }

    /// Issue 40's targets: the receiver on at most 2 % by default and 1 % in low power, and a peer
    /// heard within 30 s by default.
    @Test func theStandardAndLowPowerPlansMeetTheirBudgets() {
        let standard = ExchangeConfiguration(scanPlan: .standard)
        #expect(Self.receiverShare(standard) <= 0.02, "\(Self.receiverShare(standard))")
        #expect(standard.longestScanCycle <= .seconds(21), "\(standard.longestScanCycle)")
        let lowPower = ExchangeConfiguration(scanPlan: .lowPower)
        #expect(Self.receiverShare(lowPower) <= 0.01, "\(Self.receiverShare(lowPower))")
        #expect(lowPower.longestScanCycle <= .seconds(41), "\(lowPower.longestScanCycle)")
    }

    /// The schedule before issue 40, kept to compare against: 10 s of a 30 ms window every 60 ms,
    /// every minute on average, 1/6 × 1/2 of the time.
    @Test func minuteBurstsAreTheOldSchedule() {
        let configuration = ExchangeConfiguration(scanPlan: .minuteBursts)
        #expect(configuration.scanOnTime == .seconds(10) && configuration.scanOffTime == .seconds(50))
        #expect(configuration.radio.scanWindow == 0x0030 && configuration.radio.scanInterval == 0x0060)
        #expect(abs(Self.receiverShare(configuration) - 1.0 / 12) < 1e-9)
    }

    /// With short bursts, the side of a pair that does not go first gives the other one whole
    /// scan cycle (its longest pause, a burst), its spread and a connection's time; with bursts of
    /// seconds, or none, the 2.5 s that serves where both sides hear each other at once.
    @Test func theSideThatWaitsGivesTheOtherAWholeCycleWithShortBursts() {
        for plan in [ScanPlan.standard, .lowPower] {
            let configuration = ExchangeConfiguration(scanPlan: plan)
            #expect(configuration.scannerRestsUntilTurns, "\(plan)")
            #expect(configuration.deferToPeerDelay >= configuration.longestScanCycle + configuration.initiationSpread
                    + configuration.connectionTimeout, "\(plan): \(configuration.deferToPeerDelay)")
        }
        #expect(ExchangeConfiguration(scanPlan: .standard).deferToPeerDelay == .milliseconds(23_770))
        for plan in [ScanPlan.continuous, .minuteBursts] {
            let configuration = ExchangeConfiguration(scanPlan: plan)
            #expect(!configuration.scannerRestsUntilTurns, "\(plan)")
            #expect(configuration.deferToPeerDelay == .milliseconds(2500), "\(plan)")
        }
    }

    @Test func continuousNeverPauses() {
        #expect(ExchangeConfiguration(scanPlan: .continuous).scanOffTime == .zero)
    }

    @Test func settingNamesAreStable() {
        #expect(ScanPlan.allCases.map(\.rawValue) == ["standard", "low-power", "continuous", "minute-bursts"])
    }
}
