import Testing
import TestTiers
@testable import BLEHost
import BLEHostTestSupport

/// Advertising that a peer's link stopped comes back without waiting behind connection attempts,
/// and attempts that turn advertising off let peers hear the node between them. In a 20-node
/// RootCanal crowd, nodes went unheard for 2 to 3.5 s: after a peer's link, the resume waited
/// behind one attempt and then behind the next, which turned advertising off itself.
/// On the manual clock where a check is about time, so that no check depends on the machine's load.
@Suite(.tags(.unit), .timeLimit(.minutes(1)))
struct LEHostAdvertisingResumeTests {
    static let peerA = BluetoothAddress(string: "3A:00:00:00:00:0A")!
    static let peerB = BluetoothAddress(string: "3B:00:00:00:00:0B")!
    static let peerC = BluetoothAddress(string: "3C:00:00:00:00:0C")!
    /// The hold before going quiet at the default advertising interval (250 ms).
    static let hold = LEHost.Configuration().advertisingHeldBeforeGoingQuiet

    static func advertising(_ controller: ScriptedController) -> Bool {
        controller.state.withLock { $0.advertising }
    }

    /// A central connects to us while our attempt to another peer runs: advertising comes back
    /// while the attempt still initiates, not at its end (up to the attempt's timeout later).
    @Test func advertisingStoppedByAPeersLinkComesBackDuringAnAttempt() async throws {
        let controller = ScriptedController()
        let host = try await ScriptedControllerTests.openHost(controller, clock: ManualHostClock())
        try await host.startAdvertising(ScriptedController.nodeAdvertisingData)
        let attempt = Task { try await host.connect(to: Self.peerA, type: .random, timeout: .seconds(20)) }
        try #require(await eventually { controller.initiatingPeer == Self.peerA })

        controller.acceptIncoming(handle: 0x0060, from: Self.peerB)
        #expect(await eventually { Self.advertising(controller) }, "advertising stayed off while the attempt ran")
        #expect(controller.initiatingPeer == Self.peerA, "the attempt ended instead of going on")
        controller.connectInitiatedConnection(handle: 0x0061)
        #expect(try await attempt.value.handle == 0x0061)
        await host.close()
    }

    /// Resuming advertising inside an attempt does not restart its timeout: 1.5 s before the
    /// peer's link and 0.6 s after it end a 2 s attempt.
    @Test func anAttemptThatResumedAdvertisingKeepsItsTimeout() async throws {
        let clock = ManualHostClock()
        let controller = ScriptedController()
        let host = try await ScriptedControllerTests.openHost(controller, clock: clock)
        try await host.startAdvertising(ScriptedController.nodeAdvertisingData)
        let attempt = Task { try await host.connect(to: Self.peerA, type: .random, timeout: .seconds(2)) }
        try #require(await eventually { controller.initiatingPeer == Self.peerA && clock.pendingDeadlines.contains(.seconds(2)) })
        clock.advance(by: .milliseconds(1500))

        controller.acceptIncoming(handle: 0x0062, from: Self.peerB)
        try #require(await eventually { Self.advertising(controller) })
        try #require(await eventually { clock.pendingDeadlines.contains(.seconds(2)) }, "the attempt does not wait on")
        clock.advance(by: .milliseconds(600))
        #expect(await eventually { controller.state.withLock { $0.attemptTimeline }.contains("cancel") },
                "the attempt outlived its timeout after resuming advertising")
        await #expect(throws: GAPError.connectionTimedOut(peer: Self.peerA, after: .seconds(2))) { try await attempt.value }
        await host.close()
    }

    /// A peer's link while another procedure holds the turn (here, starting the scanner) and an
    /// attempt that turns advertising off waits: the resume goes first, so that the node is on
    /// the air before that attempt, rather than after it.
    @Test func theResumeGoesBeforeAttemptsWaitingForTheirTurn() async throws {
        let clock = ManualHostClock()
        let controller = ScriptedController()
        let host = try await ScriptedControllerTests.openHost(controller, clock: clock)
        try await host.startAdvertising(ScriptedController.nodeAdvertisingData)
        controller.state.withLock { $0.holdAnswerTo = LESetScanEnable.opcode }
        let scanning = Task { try await host.startScanning() }
        try #require(await eventually { controller.isHoldingAnswer })
        let quietAttempt = Task {
            try await host.connect(to: Self.peerA, type: .random, timeout: .seconds(20), advertisingOff: true)
        }
        try #require(await eventually { await host.waitingProcedures == 1 })

        controller.acceptIncoming(handle: 0x0063, from: Self.peerB)
        try #require(await eventually { await host.waitingProcedures == 2 }, "no resume was asked for")
        controller.releaseHeldAnswer()
        _ = try await scanning.value
        #expect(await eventually { Self.advertising(controller) }, "the attempt went before the resume")
        #expect(controller.initiatingPeer == nil)

        // The attempt then lets peers hear an advertising event before it turns advertising off.
        try #require(await eventually { clock.pendingDeadlines.contains(Self.hold) })
        clock.advance(by: Self.hold)
        #expect(await eventually { controller.initiatingPeer == Self.peerA })
        #expect(!Self.advertising(controller))
        controller.connectInitiatedConnection(handle: 0x0064)
        _ = try await quietAttempt.value
        await host.close()
    }

    /// Two attempts that turn advertising off, one right after the other: the first resumes
    /// advertising before it returns, and the second keeps it on for a little over one
    /// advertising interval before turning it off, so that peers hear the node between them.
    @Test func twoQuietAttemptsLetPeersHearUsBetweenThem() async throws {
        let clock = ManualHostClock()
        let controller = ScriptedController()
        let host = try await ScriptedControllerTests.openHost(controller, clock: clock)
        try await host.startAdvertising(ScriptedController.nodeAdvertisingData)
        clock.advance(by: .seconds(1))  // advertising has been on long enough: the first goes quiet at once
        let first = Task { try await host.connect(to: Self.peerA, type: .random, timeout: .seconds(20), advertisingOff: true) }
        try #require(await eventually { controller.initiatingPeer == Self.peerA })
        #expect(!Self.advertising(controller))
        let second = Task { try await host.connect(to: Self.peerC, type: .random, timeout: .seconds(20), advertisingOff: true) }
        try #require(await eventually { await host.waitingProcedures == 1 })

        controller.connectInitiatedConnection(handle: 0x0065)
        #expect(try await first.value.handle == 0x0065)
        #expect(Self.advertising(controller), "the first attempt returned with advertising still off")

        let resumedAt = clock.elapsed
        try #require(await eventually { clock.pendingDeadlines.contains(resumedAt + Self.hold) },
                     "the second attempt did not wait for peers to hear us")
        #expect(Self.advertising(controller) && controller.initiatingPeer == nil)
        clock.advance(by: Self.hold)
        #expect(await eventually { controller.initiatingPeer == Self.peerC })
        #expect(!Self.advertising(controller))
        controller.connectInitiatedConnection(handle: 0x0066)
        _ = try await second.value
        #expect(Self.advertising(controller))
        await host.close()
    }
}
