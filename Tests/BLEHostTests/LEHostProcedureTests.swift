import Testing
import TestTiers
@testable import BLEHost
import BLEHostTestSupport

/// LEHost's procedures run whole, one at a time (`ProcedureQueue`), against `ScriptedController`:
/// the interleavings a reentrant actor allowed across an `await`, each reproduced, and what
/// cancelling a procedure's task does. No test sleeps: each waits for the state it needs.
@Suite(.tags(.unit), .timeLimit(.minutes(1)))
struct LEHostProcedureTests {
    static let peerA = BluetoothAddress(string: "3A:00:00:00:00:0A")!
    static let peerB = BluetoothAddress(string: "3B:00:00:00:00:0B")!

    /// Issue 27: the audit turned advertising on while `connect(advertisingOff:)` had just turned
    /// it off for its attempt (a strict controller initiating beside advertising refuses peers).
    /// The audit must wait for the attempt's end.
    @Test func theAuditWaitsForAnAttemptThatTurnedAdvertisingOff() async throws {
        let controller = ScriptedController()
        let host = try await ScriptedControllerTests.openHost(controller)
        try await host.startAdvertising(ScriptedController.nodeAdvertisingData)
        let attempt = Task {
            try await host.connect(to: Self.peerA, type: .random, timeout: .seconds(20), advertisingOff: true)
        }
        try #require(await eventually { controller.initiatingPeer == Self.peerA })
        #expect(!controller.state.withLock { $0.advertising })

        let audit = Task { await host.audit() }
        // Either the audit waits for its turn, or its commands reach the controller at once.
        try #require(await eventually {
            await host.waitingProcedures == 1 || controller.state.withLock { $0.advertisingCommandsWhileInitiating } > 0
        })
        #expect(controller.state.withLock { $0.advertisingCommandsWhileInitiating } == 0,
                "the audit sent advertising commands during an attempt that turned advertising off")
        #expect(!controller.state.withLock { $0.advertising })

        controller.connectInitiatedConnection(handle: 0x0040)
        #expect(try await attempt.value.peerAddress == Self.peerA)
        _ = await audit.value
        #expect(controller.state.withLock { $0.advertisingCommandsWhileInitiating } == 0)
        #expect(await eventually { controller.state.withLock { $0.advertising } }, "advertising did not come back after the link")
        await host.close()
    }

    /// The audit had found advertising off and was turning it on when an address change began:
    /// its last commands fell between the change's, advertising came on again, and the controller
    /// refused the new address (or took it with the old advertising on air). The change must wait
    /// for the audit to finish, then find everything off and set the address at the first try.
    @Test func anAddressChangeWaitsForTheAuditUnderWay() async throws {
        let controller = ScriptedController()
        let host = try await ScriptedControllerTests.openHost(controller)
        try await host.startAdvertising(ScriptedController.nodeAdvertisingData)
        controller.state.withLock {
            $0.advertising = false  // stopped behind the host's back
            $0.holdAnswerTo = LESetAdvertisingData.opcode
        }
        let audit = Task { await host.audit() }
        try #require(await eventually { controller.isHoldingAnswer }, "the audit did not start turning advertising on")

        let mark = controller.state.withLock { $0.commands.count }
        let address = BluetoothAddress.randomNonResolvablePrivate()
        let change = Task { try await host.changeRandomAddress(to: address) {} }
        try #require(await eventually { await !host.isAdvertising }, "the address change did not begin")
        controller.releaseHeldAnswer()
        try await change.value
        _ = await audit.value

        let after = controller.state.withLock { Array($0.commands[mark...]) }
        #expect(after.filter { $0 == LESetRandomAddress.opcode }.count == 1, "the new address was refused first: \(after)")
        #expect(controller.state.withLock { $0.randomAddress } == address.littleEndianBytes)
        #expect(!controller.state.withLock { $0.advertising }, "advertising came back on during the address change")
        await host.close()
    }

    /// A connection attempt whose task is cancelled while it waits for its turn leaves the queue:
    /// it sends nothing and the attempt under way goes on.
    @Test func aProcedureWaitingForItsTurnLeavesWhenItsTaskIsCancelled() async throws {
        let controller = ScriptedController()
        let host = try await ScriptedControllerTests.openHost(controller)
        let first = Task { try await host.connect(to: Self.peerA, type: .random, timeout: .seconds(20)) }
        try #require(await eventually { controller.initiatingPeer == Self.peerA })
        let second = Task { try await host.connect(to: Self.peerB, type: .random, timeout: .milliseconds(500)) }
        try #require(await eventually { await host.waitingProcedures == 1 })

        second.cancel()
        #expect(await eventually { await host.waitingProcedures == 0 }, "the cancelled procedure still waits for its turn")
        controller.connectInitiatedConnection(handle: 0x0041)
        #expect(try await first.value.peerAddress == Self.peerA)
        await #expect(throws: GAPError.cancelled) { try await second.value }
        #expect(controller.state.withLock { $0.attemptTimeline } == ["create \(Self.peerA)"])
        await host.close()
    }

    /// A running attempt whose task is cancelled is not dropped half-way: it is cancelled at the
    /// controller and its end awaited, as an address change does, so the controller is left idle.
    @Test func aRunningAttemptWhoseTaskIsCancelledEndsAtTheController() async throws {
        let controller = ScriptedController()
        let host = try await ScriptedControllerTests.openHost(controller)
        let attempt = Task { try await host.connect(to: Self.peerA, type: .random, timeout: .seconds(20)) }
        try #require(await eventually { controller.initiatingPeer == Self.peerA })

        attempt.cancel()
        #expect(await eventually { controller.state.withLock { $0.attemptTimeline }.count == 3 },
                "the attempt went on although its task was cancelled")
        await #expect(throws: GAPError.connectionTimedOut(peer: Self.peerA, after: .seconds(20))) { try await attempt.value }
        #expect(controller.state.withLock { $0.attemptTimeline } == ["create \(Self.peerA)", "cancel", "ended 0x2"])
        #expect(controller.initiatingPeer == nil)
        await host.close()
    }

    /// Events are not procedures: a peer's link reaches its owner while an attempt holds the turn.
    @Test func anIncomingLinkArrivesWhileAnAttemptHoldsTheTurn() async throws {
        let controller = ScriptedController()
        let host = try await ScriptedControllerTests.openHost(controller)
        var incoming = host.incomingConnections.makeAsyncIterator()
        let attempt = Task { try await host.connect(to: Self.peerA, type: .random, timeout: .seconds(20)) }
        try #require(await eventually { controller.initiatingPeer == Self.peerA })

        controller.acceptIncoming(handle: 0x0050, from: Self.peerB)
        let link = try #require(await incoming.next())
        #expect(link.peerAddress == Self.peerB)
        #expect(controller.initiatingPeer == Self.peerA, "the attempt ended before the link was handed over")
        controller.connectInitiatedConnection(handle: 0x0051)
        #expect(try await attempt.value.handle == 0x0051)
        await host.close()
    }

    /// A controller known to take cancels without effect is not probed with one by the audit,
    /// which would only wait out the cancel grace; one that has not shown it is.
    @Test func aKnownIgnoredCancelIsNotUsedToProbe() async throws {
        for known in [ControllerQuirks(), .cancelTakenWithoutEndingAttempt] {
            let controller = ScriptedController()
            var configuration = LEHost.Configuration()
            configuration.knownQuirks = known
            let host = try await LEHost.open(
                transport: controller, databaseForLink: { _ in try GATTDatabase(services: []) }, configuration: configuration)
            _ = await host.audit()
            let probes = controller.state.withLock { $0.commands.filter { $0 == LECreateConnectionCancel.opcode }.count }
            #expect(probes == (known.isEmpty ? 1 : 0), "quirks \(known)")
            #expect(await host.quirks == known)
            await host.close()
        }
    }
}
