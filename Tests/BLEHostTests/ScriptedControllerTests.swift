import Synchronization
import Testing
import TestTiers
@testable import BLEHost
import BLEHostTestSupport

/// The sequences a spec-faithful controller (RootCanal, real silicon) produces and a lenient one
/// (Bumble) hides, each against `ScriptedController`: who owns a connection attempt's end, what a
/// refusal leads to, and whether the host can always leave the state it is in. The node's policy
/// on top (ProximityExchange) meets the same controller in GATTExchangeTests'
/// ExchangeScriptedControllerTests.
@Suite(.tags(.unit), .timeLimit(.minutes(1)))
struct ScriptedControllerTests {
    static let peerA = BluetoothAddress(string: "3A:00:00:00:00:0A")!
    static let peerB = BluetoothAddress(string: "3B:00:00:00:00:0B")!
    static let peerC = BluetoothAddress(string: "3C:00:00:00:00:0C")!

    static func openHost(_ controller: ScriptedController) async throws -> LEHost {
        var configuration = LEHost.Configuration()
        configuration.cancelGrace = .milliseconds(500)
        return try await LEHost.open(
            transport: controller, databaseForLink: { _ in try GATTDatabase(services: []) }, configuration: configuration)
    }

    /// The host on a clock the test moves, for checks that something did not happen by a time.
    static func openHost(_ controller: ScriptedController, clock: ManualHostClock) async throws -> LEHost {
        var configuration = LEHost.Configuration()
        configuration.cancelGrace = .milliseconds(500)
        return try await LEHost.open(
            transport: controller, databaseForLink: { _ in try GATTDatabase(services: []) },
            configuration: configuration, clock: clock)
    }

    /// Issue 12, steps 1-3: an attempt times out and is cancelled while a second waits. The
    /// cancelled attempt's 0x02 arrives after the cancel's answer; it must end the first attempt,
    /// and the second may start only after it, never to be handed that 0x02.
    @Test func aCancelledAttemptsCompletionEndsThatAttemptAndNoOther() async throws {
        let controller = ScriptedController()
        controller.state.withLock { $0.cancelCompletionDelay = .milliseconds(50) }
        let host = try await Self.openHost(controller)
        let first = Task { try await host.connect(to: Self.peerA, type: .random, timeout: .milliseconds(150)) }
        #expect(await eventually { controller.initiatingPeer == Self.peerA })
        let second = Task { try await host.connect(to: Self.peerB, type: .random, timeout: .seconds(5)) }

        await #expect(throws: GAPError.connectionTimedOut(peer: Self.peerA, after: .milliseconds(150))) { try await first.value }
        #expect(await eventually { controller.initiatingPeer == Self.peerB })
        // The 0x02 sent (the controller sends it after the cancel's answer, on its own time): a
        // second attempt started too early would now stand before it.
        #expect(await eventually { controller.state.withLock { $0.attemptTimeline }.contains("ended 0x2") })
        #expect(controller.state.withLock { $0.attemptTimeline } == ["create \(Self.peerA)", "cancel", "ended 0x2", "create \(Self.peerB)"],
                "the second attempt must start only after the first one's end")
        controller.connectInitiatedConnection(handle: 0x0041)
        let connection = try await second.value
        #expect(connection.peerAddress == Self.peerB)
        #expect(connection.handle == 0x0041)
        let refused = controller.state.withLock { $0.refusedCreateConnections }
        #expect(refused == 0, "an LE Create Connection was sent while another was under way")
        let timeline = controller.state.withLock { $0.attemptTimeline }
        #expect(timeline == ["create \(Self.peerA)", "cancel", "ended 0x2", "create \(Self.peerB)"],
                "the second attempt must start only after the first one's end")
        await host.close()
    }

    /// A connection that forms while its attempt is being cancelled is the attempt's result: it is
    /// returned to the caller, not dropped or left open with no owner.
    @Test func aLateSuccessAfterCancelIsHandedToItsAttempt() async throws {
        let controller = ScriptedController()
        controller.state.withLock { $0.cancelEnding = .lateSuccess(handle: 0x0042) }
        let host = try await Self.openHost(controller)
        let connection = try await host.connect(to: Self.peerA, type: .random, timeout: .milliseconds(100))
        #expect(connection.peerAddress == Self.peerA)
        #expect(connection.isConnected)
        #expect(!controller.state.withLock { $0.commands }.contains(Disconnect.opcode), "the late link was closed")
        #expect(await host.openConnections.map(\.handle) == [0x0042])
        await host.close()
    }

    /// RootCanal's initiator, once a connect request of its went unanswered, ignores every
    /// advertiser while its scanner still reports them. The peer heard advertising with no
    /// connection following ends the attempt there and then, with a reason that says so, not at
    /// the timeout.
    @Test func aPeerHeardAdvertisingWithoutAConnectionEndsTheAttemptEarly() async throws {
        let clock = ManualHostClock()
        let controller = ScriptedController()
        let host = try await Self.openHost(controller, clock: clock)
        let attempt = Task { try await host.connect(to: Self.peerA, type: .random, timeout: .seconds(20)) }
        try #require(await eventually { await host.attempt?.initiatingSince != nil })
        clock.advance(by: .milliseconds(10))  // only a sighting after the attempt began counts
        controller.advertise(from: Self.peerB)
        controller.advertise(from: Self.peerA)
        // The peer's sighting arms the check; the other peer's report came before it on the same
        // event stream, so it has been handled too, and must have counted for nothing.
        try #require(await eventually { clock.pendingDeadlines.contains(.milliseconds(110)) }, "the peer's sighting armed no check")
        #expect(await host.attempt?.peerSightings == 1, "another peer's advertising is no sign")
        #expect(controller.state.withLock { $0.attemptTimeline } == ["create \(Self.peerA)"])
        clock.advance(by: .milliseconds(100))
        await #expect(throws: GAPError.peerAdvertisedWithoutConnecting(peer: Self.peerA, advertisements: 1)) {
            try await attempt.value
        }
        #expect(clock.elapsed == .milliseconds(110), "the attempt ran to its timeout")
        #expect(controller.state.withLock { $0.attemptTimeline } == ["create \(Self.peerA)", "cancel", "ended 0x2"])
        await host.close()
    }

    /// The attempt vanished without an end (RootCanal's stuck initiator): the cancel is refused as
    /// "not initiating" and no end follows. The attempt ends shortly after the refusal with the
    /// same sign, and the controller is not taken for one that ignores cancels.
    @Test func anAttemptThatVanishesWithoutAnEndIsReportedAsUnanswered() async throws {
        let controller = ScriptedController()
        let host = try await Self.openHost(controller)
        let attempt = Task { try await host.connect(to: Self.peerA, type: .random, timeout: .seconds(20)) }
        #expect(await eventually { controller.initiatingPeer == Self.peerA })
        controller.dropInitiationSilently()
        controller.advertise(from: Self.peerA)
        await #expect(throws: GAPError.peerAdvertisedWithoutConnecting(peer: Self.peerA, advertisements: 1)) {
            try await attempt.value
        }
        #expect(await !host.quirks.contains(.cancelTakenWithoutEndingAttempt))
        await host.close()
    }

    /// The end of an attempt may reach the host after its cancel's refusal (the controller had
    /// just stopped initiating; link events come through L2CAP, command answers directly). The
    /// attempt waits for it on a controller with no quirk too, and so owns it: the link is the
    /// attempt's result. With no end at all, the wait is bounded (`endAfterRefusedCancel`). This
    /// is why the wait is no quirk's: gated, the link here would be closed as an abandoned one's.
    @Test(arguments: [true, false])
    func anEndThatTrailsARefusedCancelIsAwaitedOnEveryController(endComes: Bool) async throws {
        let controller = ScriptedController()
        let clock = ManualHostClock()
        let host = try await Self.openHost(controller, clock: clock)
        #expect(await host.quirks == [])
        let attempt = Task { try await host.connect(to: Self.peerA, type: .random, timeout: .seconds(2)) }
        #expect(await eventually { controller.initiatingPeer == Self.peerA && clock.pendingDeadlines.contains(.seconds(2)) })
        controller.dropInitiationSilently()
        clock.advance(by: .seconds(2))
        // The cancel refused, the attempt waits for its end.
        #expect(await eventually { clock.pendingDeadlines.contains(.milliseconds(2300)) }, "no wait after the refused cancel")
        if endComes {
            controller.inject(ScriptedController.connectionComplete(
                status: .success, handle: 0x0046, role: .central, peer: Self.peerA.littleEndianBytes))
            let connection = try await attempt.value
            #expect(connection.handle == 0x0046 && connection.isConnected)
            #expect(!controller.state.withLock { $0.commands }.contains(Disconnect.opcode), "the late link was closed")
        } else {
            clock.advance(by: .milliseconds(300))
            await #expect(throws: GAPError.connectionTimedOut(peer: Self.peerA, after: .seconds(2))) { try await attempt.value }
        }
        #expect(await host.quirks == [], "a refused cancel is no sign of an ignored one")
        await host.close()
    }

    /// Issue 38: an LE Create Connection whose end never comes, and whose cancel is neither
    /// answered nor obeyed, holds the host's turn only for the attempt's timeout, the cancel's
    /// command timeout and the cancel grace: the attempt fails, and the procedure queued behind it
    /// (an audit) runs. Nothing here waits for ever; the controller still initiates afterwards.
    @Test func anAttemptWhoseEndAndCancelNeverComeGivesTheControllerBackWithinItsBounds() async throws {
        let controller = ScriptedController()
        controller.state.withLock { state in
            state.cancelEnding = .ignored
            state.holdAnswerTo = LECreateConnectionCancel.opcode
        }
        let clock = ManualHostClock()
        let host = try await Self.openHost(controller, clock: clock)
        let attempt = Task { try await host.connect(to: Self.peerA, type: .random, timeout: .seconds(2)) }
        // Each timer is awaited before the clock moves to it (offsets from the clock's start).
        #expect(await eventually { controller.initiatingPeer == Self.peerA && clock.pendingDeadlines.contains(.seconds(2)) })
        let audit = Task { await host.audit() }
        #expect(await eventually { await host.waitingProcedures == 1 })
        clock.advance(by: .seconds(2))
        // The cancel's own command timeout, then the grace for an end that does not come.
        #expect(await eventually { controller.isHoldingAnswer && clock.pendingDeadlines.contains(.seconds(4)) }, "no cancel at the attempt's timeout")
        clock.advance(by: .seconds(2))
        #expect(await eventually { clock.pendingDeadlines.contains(.milliseconds(4500)) }, "no wait for the cancel's end")
        clock.advance(by: .milliseconds(500))
        await #expect(throws: GAPError.connectionTimedOut(peer: Self.peerA, after: .seconds(2))) { try await attempt.value }
        // The audit ran behind it (its cancel waits one command timeout for the late answer first).
        #expect(await eventually { await host.waitingProcedures == 0 })
        clock.advance(by: .seconds(2))
        _ = await audit.value
        #expect(await host.quirks.contains(.cancelTakenWithoutEndingAttempt))
        #expect(controller.initiatingPeer == Self.peerA, "the controller was meant to go on initiating")
        await host.close()
    }

    /// A controller that connects at the peer's first advertisement is left alone.
    @Test func aPeerHeardOnceAndConnectedIsAnOrdinaryConnection() async throws {
        let clock = ManualHostClock()
        let controller = ScriptedController()
        let host = try await Self.openHost(controller, clock: clock)
        let attempt = Task { try await host.connect(to: Self.peerA, type: .random, timeout: .seconds(20)) }
        try #require(await eventually { clock.pendingDeadlines.contains(.seconds(20)) }, "the attempt armed no timeout")
        clock.advance(by: .milliseconds(10))
        controller.advertise(from: Self.peerA)
        try #require(await eventually { clock.pendingDeadlines.contains(.milliseconds(110)) }, "the sighting armed no check")
        controller.connectInitiatedConnection(handle: 0x0045)
        #expect(try await attempt.value.handle == 0x0045)
        #expect(controller.state.withLock { $0.attemptTimeline } == ["create \(Self.peerA)"], "a cancel followed the link")
        // Only the attempt's timers could send a cancel later; none may outlive it.
        let left = clock.pendingDeadlines
        #expect(!left.contains(.milliseconds(110)) && !left.contains(.seconds(20)), "the attempt left timers armed: \(left)")
        await host.close()
    }

    /// The controller is initiating for nobody (a host before us, or a cancel it took without
    /// effect): LE Create Connection is refused with Command Disallowed. The node must end that
    /// initiation, so that the next attempt goes through, instead of failing forever.
    @Test func commandDisallowedWhileInitiatingEndsTheStrayAttempt() async throws {
        let controller = ScriptedController()
        let host = try await Self.openHost(controller)
        controller.startStrayInitiation(to: Self.peerB)

        await #expect(throws: GAPError.hci(.commandFailed(opcode: LECreateConnection.opcode, status: .commandDisallowed))) {
            try await host.connect(to: Self.peerA, type: .random, timeout: .seconds(1))
        }
        #expect(controller.initiatingPeer == nil, "the stray initiation was not ended")
        let next = Task { try await host.connect(to: Self.peerA, type: .random, timeout: .seconds(5)) }
        #expect(await eventually { controller.initiatingPeer == Self.peerA })
        controller.connectInitiatedConnection(handle: 0x0043)
        #expect(try await next.value.peerAddress == Self.peerA)
        await host.close()
    }

    /// A controller that takes a cancel and never ends the attempt (Bumble): the caller is told
    /// the attempt timed out, and the link that forms later is closed at once.
    @Test func anIgnoredCancelLeavesNoOwnerlessLink() async throws {
        let controller = ScriptedController()
        controller.state.withLock { $0.cancelEnding = .ignored }
        let host = try await Self.openHost(controller)
        await #expect(throws: GAPError.connectionTimedOut(peer: Self.peerA, after: .milliseconds(100))) {
            try await host.connect(to: Self.peerA, type: .random, timeout: .milliseconds(100))
        }
        controller.connectInitiatedConnection(handle: 0x0044)
        #expect(await eventually { controller.state.withLock { $0.commands }.contains(Disconnect.opcode) })
        #expect(await eventually { await host.openConnections.isEmpty })
        await host.close()
    }

    /// A controller reuses a handle without a Disconnection Complete: the old link ends (its
    /// waiters hear it), the new one is a new link with its own channel.
    @Test func aHandleReusedWithoutDisconnectionEndsTheOldLink() async throws {
        let controller = ScriptedController()
        let host = try await Self.openHost(controller)
        var incoming = host.incomingConnections.makeAsyncIterator()
        controller.acceptIncoming(handle: 0x0040, from: Self.peerA)
        let old = try #require(await incoming.next())
        controller.acceptIncoming(handle: 0x0040, from: Self.peerB)
        let new = try #require(await incoming.next())
        #expect(await old.disconnected() == .unknownConnectionIdentifier)
        #expect(new.isConnected && new.peerAddress == Self.peerB)
        #expect(new.channel !== old.channel)
        #expect(await host.openConnections.map(\.peerAddress) == [Self.peerB])
        await host.close()
    }

    /// Issue 38: a Disconnect the controller accepts but never completes left the link open for
    /// ever: its owner (the exchange's incoming-link task) waited for its end, and after four such
    /// links the node refused every peer that connected to it. The link is closed on our side once
    /// the longest supervision timeout the specification allows has passed.
    @Test func aDisconnectionThatNeverCompletesEndsTheLinkAfterTheLongestSupervisionTimeout() async throws {
        let controller = ScriptedController()
        let clock = ManualHostClock()
        let host = try await Self.openHost(controller, clock: clock)
        var incoming = host.incomingConnections.makeAsyncIterator()
        controller.acceptIncoming(handle: 0x0041, from: Self.peerA)
        let link = try #require(await incoming.next())
        controller.state.withLock { $0.disconnectionsLeftIncomplete = true }
        await host.disconnect(link)
        clock.advance(by: LEHost.disconnectionCompleteWait - .seconds(1))
        #expect(await eventually(timeout: .milliseconds(200)) { !link.isConnected } == false, "closed before the wait ran out")
        clock.advance(by: .seconds(1))
        #expect(await eventually { !link.isConnected }, "the link stays open for ever")
        #expect(await host.openConnections.isEmpty)
        await host.close()
    }

    /// A link given up on after its Disconnect never completed gives back its ACL buffer credits
    /// and fails the sends queued for it: the controller reports no completed packets for a link
    /// it flushed, and a cheap adapter has only a few buffers, which such links would otherwise
    /// hold for ever, leaving every later link's sends waiting.
    /// Also when the controller refuses the Disconnect as a link it does not know (ended
    /// without telling the host): the host closes its side, HCI's credits and queued sends included.
    @Test(arguments: [false, true])
    func aLinkWhoseDisconnectionNeverCompletesReturnsItsACLBuffers(refusedAsUnknown: Bool) async throws {
        let controller = ScriptedController()
        let clock = ManualHostClock()
        let host = try await Self.openHost(controller, clock: clock)
        await host.hci.configureACLBuffers(ACLBufferSize(packetLength: 27, packetCount: 1))
        var incoming = host.incomingConnections.makeAsyncIterator()
        controller.acceptIncoming(handle: 0x0041, from: Self.peerA)
        let link = try #require(await incoming.next())
        // Our controller never reports completed packets: the one buffer stays taken by this link.
        let packet: @Sendable (UInt16) -> ACLDataPacket = { handle in
            ACLDataPacket(connectionHandle: handle, packetBoundary: .firstNonFlushable, data: [0x03, 0x00, 0x04, 0x00, 0x03, 0x17, 0x00])
        }
        try await host.hci.sendACL([packet(0x0041)])
        #expect(await host.hci.availableACLCredits == 0)
        // Ended sends, watched without awaiting them: unfixed, they wait until the host closes.
        let queuedEnding = Mutex<Result<Void, HCIError>?>(nil)
        Task {
            do throws(HCIError) {
                try await host.hci.sendACL([packet(0x0041)])
                queuedEnding.withLock { $0 = .success(()) }
            } catch { queuedEnding.withLock { $0 = .failure(error) } }
        }
        #expect(await eventually { await host.hci.queuedACLPackets == 1 })
        controller.state.withLock {
            if refusedAsUnknown { $0.disconnectsRefusedAsUnknown = true } else { $0.disconnectionsLeftIncomplete = true }
        }
        await host.disconnect(link)
        clock.advance(by: LEHost.disconnectionCompleteWait)
        #expect(await eventually { !link.isConnected })
        #expect(await eventually { queuedEnding.withLock { $0 != nil } }, "the send queued for the abandoned link still waits")
        let ending = queuedEnding.withLock { $0 }
        if case .failure(.connectionClosed(handle: 0x0041))? = ending {} else {
            Issue.record("the send queued for the abandoned link: \(String(describing: ending))")
        }
        #expect(await host.hci.availableACLCredits == 1, "the abandoned link kept its buffer")
        controller.acceptIncoming(handle: 0x0042, from: Self.peerB)
        _ = try #require(await incoming.next())
        let secondSent = Mutex(false)
        Task {
            try await host.hci.sendACL([packet(0x0042)])
            secondSent.withLock { $0 = true }
        }
        #expect(await eventually { secondSent.withLock { $0 } }, "a later link's send waits for a buffer that never frees")
        await host.close()
    }

    /// The controller stops advertising behind our back (a link formed, a command it dropped):
    /// the audit notices it and turns advertising on again.
    @Test func theAuditFindsAdvertisingOffAndTurnsItOn() async throws {
        let controller = ScriptedController()
        let host = try await Self.openHost(controller)
        try await host.startAdvertising(ScriptedController.nodeAdvertisingData)
        var clean = await host.audit()
        #expect(clean.isClean, "a controller doing what we believe needs no mending: \(clean)")
        controller.state.withLock { $0.advertising = false }
        let findings = await host.audit()
        #expect(findings.advertisingWasOff)
        #expect(controller.state.withLock { $0.advertising })
        controller.startStrayInitiation(to: Self.peerA)
        clean = await host.audit()
        #expect(clean.strayInitiationEnded)
        #expect(controller.initiatingPeer == nil)
        await host.close()
    }

    /// Our own central links leave advertising as it is, so the host must not enable it again when
    /// they close: RootCanal restarts the advertising interval at every enable, and a node enabling
    /// after each of a burst of exchanges went unheard for 2.7 s in a 20-node crowd.
    @Test func closingOurCentralLinksDoesNotEnableAdvertisingAgain() async throws {
        let controller = ScriptedController()
        let host = try await Self.openHost(controller)
        try await host.startAdvertising(ScriptedController.nodeAdvertisingData)
        let enablesBefore = Self.advertisingEnables(controller)
        for (index, peer) in [Self.peerA, Self.peerB].enumerated() {
            let attempt = Task { try await host.connect(to: peer, type: .random, timeout: .seconds(20)) }
            #expect(await eventually { controller.initiatingPeer == peer })
            controller.connectInitiatedConnection(handle: 0x0040 + UInt16(index))
            let connection = try await attempt.value
            await host.disconnect(connection)
            _ = await connection.disconnected()
        }
        try await Self.settle(host, controller)
        #expect(Self.advertisingEnables(controller) == enablesBefore, "advertising enabled again after central links")
        #expect(controller.state.withLock { $0.advertising })
        await host.close()
    }

    /// A central connecting to us stops legacy advertising: the host enables it once, at once, and
    /// not again when that link closes while advertising is on.
    @Test func aPeerConnectingToUsGetsAdvertisingEnabledOnce() async throws {
        let controller = ScriptedController()
        let host = try await Self.openHost(controller)
        try await host.startAdvertising(ScriptedController.nodeAdvertisingData)
        let enablesBefore = Self.advertisingEnables(controller)
        controller.acceptIncoming(handle: 0x0050, from: Self.peerA)
        #expect(await eventually { controller.state.withLock { $0.advertising } })
        #expect(await eventually { await !host.connections.isEmpty })
        let connection = try #require(await host.connections.values.first)
        await host.disconnect(connection)
        _ = await connection.disconnected()
        try await Self.settle(host, controller)
        #expect(Self.advertisingEnables(controller) == enablesBefore + 1)
        await host.close()
    }

    /// Advertising parameters are refused only while advertising is on: a host asked to advertise
    /// when the controller already does (turned on by another path in the meantime) takes it as on,
    /// sets the data, and reports no outage.
    @Test func advertisingFoundOnAlreadyIsNoOutage() async throws {
        let controller = ScriptedController()
        let host = try await Self.openHost(controller)
        try await host.startAdvertising(ScriptedController.nodeAdvertisingData)
        let dataWrites = controller.state.withLock { $0.commands.filter { $0 == LESetAdvertisingData.opcode }.count }
        try await host.startAdvertising(ScriptedController.nodeAdvertisingData)
        #expect(await host.condition.advertising == nil)
        #expect(controller.state.withLock { $0.advertising })
        #expect(controller.state.withLock { $0.commands.filter { $0 == LESetAdvertisingData.opcode }.count } == dataWrites + 1)
        await host.close()
    }

    /// An address change takes the old address off the air before it waits for the attempt under
    /// way to end, which can take the cancel grace: the old address must not outlive its window.
    @Test func anAddressChangeStopsAdvertisingBeforeEndingTheAttempt() async throws {
        let controller = ScriptedController()
        let host = try await Self.openHost(controller)
        try await host.startAdvertising(ScriptedController.nodeAdvertisingData)
        let attempt = Task { try? await host.connect(to: Self.peerA, type: .random, timeout: .seconds(20)) }
        #expect(await eventually { controller.initiatingPeer == Self.peerA })
        let mark = controller.state.withLock { $0.commands.count }
        try await host.changeRandomAddress(to: BluetoothAddress.randomNonResolvablePrivate()) {}
        let after = controller.state.withLock { Array($0.commands[mark...]) }
        let disable = try #require(after.firstIndex(of: LESetAdvertisingEnable.opcode), "advertising never stopped")
        let cancel = try #require(after.firstIndex(of: LECreateConnectionCancel.opcode), "the attempt was not cancelled")
        #expect(disable < cancel, "the attempt was ended before the old address went off the air")
        #expect(!controller.state.withLock { $0.advertising })
        _ = await attempt.value
        await host.close()
    }

    // MARK: Helpers

    static func advertisingEnables(_ controller: ScriptedController) -> Int {
        controller.state.withLock { $0.commands.filter { $0 == LESetAdvertisingEnable.opcode }.count }
    }

    /// Returns once the host has handled every link event so far and run every procedure they
    /// asked for. A central link nobody asked for comes through the same ordered stream after
    /// them, and the host closes it (a Disconnect the controller sees); an audit, submitted after
    /// that, runs behind any procedure the earlier events queued. Not a sleep: a slow machine
    /// makes it slower, never wrong.
    static func settle(_ host: LEHost, _ controller: ScriptedController) async throws {
        let disconnects = { controller.state.withLock { $0.commands.filter { $0 == Disconnect.opcode }.count } }
        let before = disconnects()
        controller.inject(ScriptedController.connectionComplete(
            status: .success, handle: 0x0070, role: .central, peer: Self.peerC.littleEndianBytes))
        try #require(await eventually { disconnects() > before }, "the host never closed the link nobody asked for")
        _ = await host.audit()
    }
}
