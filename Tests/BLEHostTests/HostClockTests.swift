import Testing
import TestTiers
@testable import BLEHost
import BLEHostTestSupport

/// The host stack's timeouts on a manual clock: each fires at its deadline to the millisecond and
/// not a millisecond before, whatever loads the machine, and a 30 s spec timeout costs no 30 s.
@Suite(.tags(.unit), .timeLimit(.minutes(1)))
struct HostClockTests {
    static let peer = BluetoothAddress(string: "3A:00:00:00:00:0A")!

    static func openHost(_ controller: ScriptedController, clock: ManualHostClock) async throws -> LEHost {
        try await ScriptedControllerTests.openHost(controller, clock: clock)
    }

    /// Moves the clock to a millisecond short of `deadline`, after making sure no armed timer comes
    /// due on the way: then nothing the host does on its clock can have happened yet, and a check
    /// that it did not needs no wait (a sleep there passed on a slow machine without testing).
    static func advance(_ clock: ManualHostClock, toJustBefore deadline: Duration) throws {
        let target = deadline - .milliseconds(1)
        let due = clock.pendingDeadlines.filter { $0 <= target }
        try #require(due.isEmpty, "timers armed at \(due) would fire before \(deadline)")
        clock.advance(by: target - clock.elapsed)
    }

    /// Waits until a timer is armed for `offset` after the clock's start.
    static func armed(_ clock: ManualHostClock, at offset: Duration) async -> Bool {
        await eventually { clock.pendingDeadlines.contains(offset) }
    }

    @Test func anUnansweredSightingEndsTheAttemptAtTheWaitAndNotBefore() async throws {
        let clock = ManualHostClock()
        let controller = ScriptedController()
        let host = try await Self.openHost(controller, clock: clock)
        let attempt = Task { try await host.connect(to: Self.peer, type: .random, timeout: .seconds(20)) }
        // The host dates the attempt when the controller's status arrives, which a loaded machine
        // may deliver after the controller took the command: wait for the date, not the command.
        try #require(await eventually { await host.attempt?.initiatingSince != nil })
        // Only a sighting after the attempt began counts, and this clock stands still unless moved.
        clock.advance(by: .milliseconds(10))
        controller.advertise(from: Self.peer)
        try #require(await Self.armed(clock, at: .milliseconds(110)), "no check was armed at the sighting")

        try Self.advance(clock, toJustBefore: .milliseconds(110))
        #expect(controller.state.withLock { $0.attemptTimeline } == ["create \(Self.peer)"], "cancelled before the wait")

        clock.advance(by: .milliseconds(1))
        await #expect(throws: GAPError.peerAdvertisedWithoutConnecting(peer: Self.peer, advertisements: 1)) {
            try await attempt.value
        }
        #expect(controller.state.withLock { $0.attemptTimeline } == ["create \(Self.peer)", "cancel", "ended 0x2"])
        #expect(clock.elapsed == .milliseconds(110))
        await host.close()
    }

    @Test func anAttemptNobodyAnswersIsCancelledAtItsTimeout() async throws {
        let clock = ManualHostClock()
        let controller = ScriptedController()
        let host = try await Self.openHost(controller, clock: clock)
        let attempt = Task { try await host.connect(to: Self.peer, type: .random, timeout: .milliseconds(1500)) }
        try #require(await eventually { controller.initiatingPeer == Self.peer })
        try #require(await Self.armed(clock, at: .milliseconds(1500)))

        try Self.advance(clock, toJustBefore: .milliseconds(1500))
        #expect(controller.initiatingPeer == Self.peer, "cancelled before the timeout")

        clock.advance(by: .milliseconds(1))
        await #expect(throws: GAPError.connectionTimedOut(peer: Self.peer, after: .milliseconds(1500))) {
            try await attempt.value
        }
        #expect(controller.state.withLock { $0.attemptTimeline } == ["create \(Self.peer)", "cancel", "ended 0x2"])
        await host.close()
    }

    /// Bumble's quirk: a cancel taken and no end reported. The attempt waits out the grace on the
    /// host's clock, then gives up on the cancel, and a link that forms later is closed.
    @Test func anIgnoredCancelIsGivenUpAfterTheGrace() async throws {
        let clock = ManualHostClock()
        let controller = ScriptedController()
        controller.state.withLock { $0.cancelEnding = .ignored }
        let host = try await Self.openHost(controller, clock: clock)
        let attempt = Task { try await host.connect(to: Self.peer, type: .random, timeout: .milliseconds(100)) }
        try #require(await eventually { controller.initiatingPeer == Self.peer })
        try #require(await Self.armed(clock, at: .milliseconds(100)))
        clock.advance(by: .milliseconds(100))
        try #require(await eventually { controller.state.withLock { $0.attemptTimeline }.last == "cancel" })
        try #require(await Self.armed(clock, at: .milliseconds(600)), "no grace armed after the cancel")

        try Self.advance(clock, toJustBefore: .milliseconds(600))
        #expect(await !host.quirks.contains(.cancelTakenWithoutEndingAttempt), "gave up on the cancel before the grace ended")

        clock.advance(by: .milliseconds(1))
        await #expect(throws: GAPError.connectionTimedOut(peer: Self.peer, after: .milliseconds(100))) {
            try await attempt.value
        }
        #expect(await host.quirks.contains(.cancelTakenWithoutEndingAttempt))
        await host.close()
    }

    /// Core Spec Vol 3 Part F 3.3.3: a request unanswered for 30 s ends the transaction and the
    /// bearer. On the manual clock that is exactly 30 s of clock time and no wall time.
    @Test func anATTRequestTimesOutAfterThirtySecondsOfClockTime() async throws {
        let clock = ManualHostClock()
        let (ours, theirs) = InMemoryFixedChannel.pair()
        let silentPeer = RawATTPeer.attached(to: theirs)
        let bearer = ATTBearer(channel: ours, clock: clock)
        #expect(bearer.configuration.transactionTimeout == .seconds(30))
        let request = Task { try await bearer.request(.readRequest(ATTReadRequest(handle: 1))) }
        #expect(await silentPeer.next() == [0x0A, 0x01, 0x00])
        try #require(await Self.armed(clock, at: .seconds(30)))

        try Self.advance(clock, toJustBefore: .seconds(30))
        #expect(await bearer.closeReason == nil, "timed out early")

        clock.advance(by: .milliseconds(1))
        await #expect(throws: ATTBearerError.transactionTimedOut(request: .readRequest)) { try await request.value }
        #expect(await bearer.closeReason == .transactionTimeout(.readRequest))
        ours.close()
    }

    /// The manual clock itself: a sleeper armed before an advance wakes at its deadline only,
    /// and a cancelled one throws and is forgotten.
    @Test func theManualClockWakesSleepersAtTheirDeadlines() async throws {
        let clock = ManualHostClock()
        let woke = Task { try await clock.sleep(until: clock.start.advanced(by: .seconds(2))) }
        let cancelled = Task { try await clock.sleep(until: clock.start.advanced(by: .seconds(5))) }
        try #require(await eventually { clock.pendingDeadlines == [.seconds(2), .seconds(5)] })
        clock.advance(by: .seconds(1))
        #expect(clock.pendingDeadlines == [.seconds(2), .seconds(5)])
        clock.advance(by: .seconds(1))
        try await woke.value
        cancelled.cancel()
        await #expect(throws: CancellationError.self) { try await cancelled.value }
        #expect(clock.pendingDeadlines.isEmpty)
        // A deadline already passed returns at once.
        try await clock.sleep(until: clock.start)
    }
}
