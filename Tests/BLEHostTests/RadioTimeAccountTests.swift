import Testing
import TestTiers
@testable import BLEHost
import BLEHostTestSupport

/// The radio's account (issue 40, item 2): the receiver's scheduled time, advertising events and
/// connections, from what the host asked of its controller, over the last hour and day. On the
/// manual clock, so every figure is exact.
@Suite(.tags(.unit), .timeLimit(.minutes(1)))
struct RadioTimeAccountTests {
    /// The default scan: a 30 ms window every 60 ms.
    static let minuteBurstScan = RadioUse.Listening(windowUnits: 0x0030, intervalUnits: 0x0060)

    static func close(_ value: Double, _ expected: Double, within tolerance: Double = 0.001) -> Bool {
        abs(value - expected) <= tolerance
    }

    // MARK: The ledger

    /// Bursts of 10 s a minute with a 30 ms window every 60 ms (the `minute-bursts` plan): the
    /// receiver is on 1/12 of the time, as the README's arithmetic says (10/60 × 30/60).
    @Test func scanBurstsCountTheirWindowsOnly() {
        let clock = ManualHostClock()
        let account = RadioTimeAccount(clock: clock)
        for _ in 0..<10 {
            account.record(RadioUse(scanning: Self.minuteBurstScan))
            clock.advance(by: .seconds(10))
            account.record(.idle)
            clock.advance(by: .seconds(50))
        }
        let hour = account.summary(over: .seconds(3600))
        #expect(Self.close(hour.observedSeconds, 600))
        #expect(Self.close(hour.scanningSeconds, 50), "\(hour)")
        #expect(Self.close(hour.receiverSeconds, 50), "\(hour)")
        #expect(Self.close(hour.receiverFraction, 1.0 / 12), "\(hour)")
        #expect(hour.connectionAttempts == 0 && hour.connections == 0 && hour.advertisingEvents == 0)
    }

    /// Advertising every 250 ms is one event every 255 ms on average (the controller's random
    /// delay of 0-10 ms), each on three channels; the time advertising is the time it was on.
    @Test func advertisingEventsFollowTheIntervalAndTheMeanDelay() {
        let clock = ManualHostClock()
        let account = RadioTimeAccount(clock: clock)
        account.record(RadioUse(advertisingInterval: .milliseconds(250)))
        clock.advance(by: .seconds(51))
        account.record(.idle)
        clock.advance(by: .seconds(9))
        let summary = account.summary(over: .seconds(3600))
        #expect(summary.advertisingEvents == 200, "\(summary)")
        #expect(Self.close(summary.advertisingSeconds, 51))
        #expect(summary.receiverSeconds == 0, "advertising is not listening: \(summary)")
    }

    /// An attempt listens all the time (the initiator's window fills its interval), a link for
    /// 2 ms of each connection event, and scanning beside them never takes the receiver past 100 %.
    @Test func attemptsAndLinksAddListeningButNeverMoreThanTheTime() {
        let clock = ManualHostClock()
        let account = RadioTimeAccount(clock: clock)
        let initiating = RadioUse.Listening(windowUnits: 0x0030, intervalUnits: 0x0030)
        account.record(RadioUse(scanning: Self.minuteBurstScan, initiating: initiating))
        clock.advance(by: .seconds(2))
        account.record(RadioUse(scanning: Self.minuteBurstScan, links: [0x40: .milliseconds(30)]))
        clock.advance(by: .seconds(3))
        account.record(RadioUse(scanning: Self.minuteBurstScan, links: [0x40: .milliseconds(30), 0x41: .milliseconds(30)]))
        clock.advance(by: .seconds(3))
        account.record(.idle)
        clock.advance(by: .seconds(52))
        let summary = account.summary(over: .seconds(3600))
        #expect(summary.connectionAttempts == 1 && summary.connections == 2, "\(summary)")
        #expect(Self.close(summary.initiatingSeconds, 2))
        #expect(Self.close(summary.scanningSeconds, 4))
        #expect(Self.close(summary.linkSeconds, 3 + 6))
        // 2 ms of every 30 ms: 3 s with one link, 3 s with two.
        #expect(Self.close(summary.linkListeningSeconds, 0.2 + 0.4), "\(summary)")
        // Capped while initiating (0.5 + 1 of each second), summed after: 2 + 3 × 0.5667 + 3 × 0.6333.
        #expect(Self.close(summary.receiverSeconds, 2 + 1.7 + 1.9), "\(summary)")
    }

    /// The hour holds the last 60 minutes only; the day holds them all, and a stretch the node has
    /// not run for in full is measured over what it saw.
    @Test func theLastHourForgetsWhatTheDayKeeps() {
        let clock = ManualHostClock()
        let account = RadioTimeAccount(clock: clock)
        account.record(RadioUse(scanning: .init(window: .milliseconds(60), interval: .milliseconds(60))))
        clock.advance(by: .seconds(7200))
        account.record(.idle)
        clock.advance(by: .seconds(3600))
        let hour = account.summary(over: .seconds(3600))
        let day = account.summary(over: .seconds(86_400))
        #expect(Self.close(hour.observedSeconds, 3600) && hour.receiverSeconds == 0, "\(hour)")
        #expect(Self.close(day.observedSeconds, 10_800) && Self.close(day.receiverSeconds, 7200), "\(day)")
        #expect(Self.close(day.receiverFraction, 2.0 / 3), "\(day)")
    }

    /// A minute's bucket is used again a day later: what it held is gone, not added to.
    @Test func aDayLaterTheBucketsStartAgain() {
        let clock = ManualHostClock()
        let account = RadioTimeAccount(clock: clock)
        account.record(RadioUse(scanning: .init(window: .milliseconds(60), interval: .milliseconds(60))))
        clock.advance(by: .seconds(60))
        account.record(.idle)
        clock.advance(by: .seconds(86_400 + 1800))
        let day = account.summary(over: .seconds(86_400))
        #expect(day.receiverSeconds == 0, "\(day)")
        #expect(Self.close(day.observedSeconds, 86_400, within: 60), "\(day)")
    }

    // MARK: Fed by the host

    /// The host records what the controller accepted: scanning from LE Set Scan Enable to its
    /// end, advertising until a central's link stops it and again once resumed, an attempt from
    /// LE Create Connection to its LE Connection Complete, and the link at the interval that event
    /// gave (30 ms here). A controller that goes away counts as nothing on.
    @Test func theHostRecordsWhatTheControllerWasAskedToDo() async throws {
        let clock = ManualHostClock()
        let account = RadioTimeAccount(clock: clock)
        let controller = ScriptedController()
        var configuration = LEHost.Configuration()
        configuration.radioTimeAccount = account
        let host = try await LEHost.open(
            transport: controller, databaseForLink: { _ in try GATTDatabase(services: []) },
            configuration: configuration, clock: clock)
        try await host.startAdvertising(ScriptedController.nodeAdvertisingData)
        let sightings = try await host.startScanning()
        _ = sightings
        clock.advance(by: .seconds(10))
        try await host.stopScanning()
        clock.advance(by: .seconds(10))

        let peer = BluetoothAddress(string: "3A:00:00:00:00:0A")!
        let attempt = Task { try await host.connect(to: peer, type: .random, timeout: .seconds(20)) }
        // The host's own state, not the controller's: the controller changes before it answers,
        // and the host counts from the answer.
        try #require(await eventually { await host.attempt?.initiatingSince != nil })
        clock.advance(by: .seconds(2))
        controller.connectInitiatedConnection(handle: 0x0061)
        let link = try await attempt.value
        clock.advance(by: .seconds(3))
        await host.disconnect(link)
        try #require(await eventually { await host.openConnections.isEmpty })

        controller.acceptIncoming(handle: 0x0062, from: BluetoothAddress(string: "3B:00:00:00:00:0B")!)
        try #require(await eventually {
            let linked = await host.openConnections.count == 1
            let advertising = await host.advertisingIsOn
            return linked && advertising
        }, "advertising was not resumed")
        clock.advance(by: .seconds(5))
        await host.close()
        clock.advance(by: .seconds(30))

        let summary = account.summary(over: .seconds(3600))
        #expect(Self.close(summary.observedSeconds, 60), "\(summary)")
        #expect(Self.close(summary.scanningSeconds, 5), "half of 10 s: \(summary)")
        #expect(Self.close(summary.initiatingSeconds, 2), "\(summary)")
        #expect(summary.connectionAttempts == 1 && summary.connections == 2, "\(summary)")
        // Our central link for 3 s, the peer's link for the 5 s until the host closed.
        #expect(Self.close(summary.linkSeconds, 8), "\(summary)")
        #expect(Self.close(summary.linkListeningSeconds, 8 * 2.0 / 30), "\(summary)")
        // On from the start until the host closed, 30 s, less nothing: the peer's link stopped it
        // and the resume came with no time passing on this clock.
        #expect(Self.close(summary.advertisingSeconds, 30), "\(summary)")
        #expect(summary.receiverSeconds > 0 && summary.receiverFraction < 1, "\(summary)")
    }
}
