import Testing
import TestTiers
@testable import BLEHost
import BLEHostTestSupport
@testable import GATTExchange

/// The exchange waits on its host's clock, so its schedule can be driven by hand against a
/// scripted controller: a minute of duty cycle runs in a second or two, and exactly.
@Suite(.tags(.unit), .timeLimit(.minutes(1)))
struct ExchangeClockTests {
    /// Moves the clock to `offset` from its start in 100 ms steps, letting the tasks woken by each
    /// step run before the next.
    static func run(_ clock: ManualHostClock, to offset: Duration) async throws {
        while clock.elapsed < offset {
            clock.advance(by: .milliseconds(100))
            try await Task.sleep(for: .milliseconds(2))
        }
    }

    /// The default duty cycle (10 s bursts, 50 s pauses jittered by ±25 %): the burst ends at its
    /// time and not before, the scanner stays off through the shortest pause, and the next burst
    /// begins by the end of the longest one (the pause starts when the stopped burst is seen, up to 0.5 s late here).
    @Test func scanBurstsAndPausesFollowTheHostClock() async throws {
        let clock = ManualHostClock()
        let controller = ScriptedController()
        let identity = AdvertisedIdentity()
        let (_, writes) = AsyncStream.makeStream(of: PeerWriteEvent.self)
        let host = try await LEHost.open(
            transport: controller, databaseForLink: TracerGATTServer.databaseForLink(identity: identity, writes: writes),
            configuration: LEHost.Configuration(), clock: clock)
        let (peerWrites, _) = AsyncStream.makeStream(of: PeerWriteEvent.self)
        var configuration = ExchangeConfiguration(scanPlan: .minuteBursts)
        configuration.scanOnTime = .seconds(10)
        configuration.scanOffTime = .seconds(50)
        let exchange = ProximityExchange(
            host: host, identity: identity, peerWrites: peerWrites, sink: ExchangeScriptedControllerTests.DiscardingSink(),
            configuration: configuration)
        await exchange.rotate(to: ExchangeScriptedControllerTests.ownID(start: 0))
        try await exchange.start()
        let wallStart = ContinuousClock.now
        func scanning() -> Bool { controller.state.withLock { $0.scanning } }

        #expect(await eventually { scanning() }, "the first burst did not begin")
        try await Self.run(clock, to: .milliseconds(9_900))
        #expect(scanning(), "the burst ended before its 10 s")
        try await Self.run(clock, to: .milliseconds(10_500))
        #expect(await eventually { !scanning() }, "the burst outlived its 10 s")
        try await Self.run(clock, to: .seconds(10 + 37))
        #expect(!scanning(), "scanning again before the shortest pause (37.5 s) was over")
        var nextBurst: Duration?
        while nextBurst == nil, clock.elapsed < .milliseconds(10_500 + 62_500) {
            try await Self.run(clock, to: clock.elapsed + .milliseconds(100))
            if scanning() { nextBurst = clock.elapsed }
        }
        #expect(nextBurst != nil, "no burst by the end of the longest pause (62.5 s)")
        #expect(ContinuousClock.now - wallStart < .seconds(30), "the schedule ran on the wall clock")

        await exchange.stop()
        await host.close()
    }
}
