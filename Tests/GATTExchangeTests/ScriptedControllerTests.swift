import IDRotation
import Synchronization
import Testing
@testable import BLEHost
import BLEHostTestSupport
@testable import GATTExchange

/// The sequences a spec-faithful controller (RootCanal, real silicon) produces and a lenient one
/// (Bumble) hides, each against `ScriptedController`: who owns a connection attempt's end, what a
/// refusal leads to, and whether the node can always leave the state it is in.
@Suite(.timeLimit(.minutes(1)))
struct ScriptedControllerTests {
    static let peerA = BluetoothAddress(string: "3A:00:00:00:00:0A")!
    static let peerB = BluetoothAddress(string: "3B:00:00:00:00:0B")!

    static func openHost(_ controller: ScriptedController, identity: AdvertisedIdentity = AdvertisedIdentity()) async throws -> LEHost {
        var configuration = LEHost.Configuration()
        configuration.cancelGrace = .milliseconds(500)
        let (_, writes) = AsyncStream.makeStream(of: PeerWriteEvent.self)
        return try await LEHost.open(
            transport: controller, databaseForLink: TracerGATTServer.databaseForLink(identity: identity, writes: writes),
            configuration: configuration)
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
        // Long enough for the 0x02 to arrive while the second attempt is under way, if it started too early.
        try await Task.sleep(for: .milliseconds(100))
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
        let controller = ScriptedController()
        let host = try await Self.openHost(controller)
        let started = ContinuousClock.now
        let attempt = Task { try await host.connect(to: Self.peerA, type: .random, timeout: .seconds(20)) }
        #expect(await eventually { controller.initiatingPeer == Self.peerA })
        controller.advertise(from: Self.peerB)
        try await Task.sleep(for: .milliseconds(300))
        #expect(controller.initiatingPeer == Self.peerA, "another peer's advertising is no sign")
        controller.advertise(from: Self.peerA)
        await #expect(throws: GAPError.peerAdvertisedWithoutConnecting(peer: Self.peerA, advertisements: 1)) {
            try await attempt.value
        }
        #expect(ContinuousClock.now - started < .seconds(10), "the attempt ran to its timeout")
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
        #expect(await !host.cancelIsUnreliable)
        await host.close()
    }

    /// A controller that connects at the peer's first advertisement is left alone.
    @Test func aPeerHeardOnceAndConnectedIsAnOrdinaryConnection() async throws {
        let controller = ScriptedController()
        let host = try await Self.openHost(controller)
        let attempt = Task { try await host.connect(to: Self.peerA, type: .random, timeout: .seconds(20)) }
        #expect(await eventually { controller.initiatingPeer == Self.peerA })
        controller.advertise(from: Self.peerA)
        controller.connectInitiatedConnection(handle: 0x0045)
        #expect(try await attempt.value.handle == 0x0045)
        try await Task.sleep(for: .milliseconds(300))
        #expect(controller.state.withLock { $0.attemptTimeline } == ["create \(Self.peerA)"], "a cancel followed the link")
        await host.close()
    }

    /// The node's policy on that sign: ask the same peer again at once (on RootCanal, the request
    /// that clears the pending one) with advertising off, and when that goes unanswered too, have
    /// the controller reset.
    @Test func aPeerAdvertisingThroughTwoAttemptsLeadsToAReset() async throws {
        let (controller, _, host, exchange, _) = try await Self.runningExchange { configuration in
            Self.connectAtOnce(&configuration)
            configuration.connectionTimeout = .seconds(20)
        }
        controller.advertise(from: Self.peerA)
        for attempt in 1...2 {
            #expect(await eventually { controller.state.withLock { $0.createConnections } == attempt && controller.initiatingPeer == Self.peerA })
            #expect(controller.state.withLock { $0.advertising } == (attempt == 1), "advertising must be off while asking again")
            controller.advertise(from: Self.peerA)
        }
        let reason = await exchange.waitUntilControllerIsStuck()
        #expect(reason?.contains("went unanswered, and asking that peer again brought no link") == true, "reason: \(String(describing: reason))")
        #expect(controller.state.withLock { $0.attemptTimeline } == [
            "create \(Self.peerA)", "cancel", "ended 0x2", "create \(Self.peerA)", "cancel", "ended 0x2",
        ])
        await exchange.stop()
        await host.close()
    }

    /// The peer is gone when asked again: only a link to it would have cleared the unanswered
    /// request, so the controller may still be stuck, and it is reset rather than left advertising.
    @Test func aRetryThatFindsThePeerGoneAlsoLeadsToAReset() async throws {
        let (controller, _, host, exchange, _) = try await Self.runningExchange { configuration in
            Self.connectAtOnce(&configuration)
            configuration.connectionTimeout = .milliseconds(300)
        }
        controller.advertise(from: Self.peerA)
        #expect(await eventually { controller.initiatingPeer == Self.peerA })
        controller.advertise(from: Self.peerA)
        let reason = await exchange.waitUntilControllerIsStuck()
        #expect(reason != nil)
        #expect(controller.state.withLock { $0.createConnections } == 2)
        #expect(!controller.state.withLock { $0.advertising }, "advertising resumed on a controller about to be reset")
        await exchange.stop()
        await host.close()
    }

    /// Peers rotate with us at the window's end: no connect request starts in its last moments, nor
    /// after it until our rotation ran, where it could go unanswered; the same sighting in a
    /// current window starts one.
    @Test func noAttemptStartsJustBeforeOurWindowEnds() async throws {
        let (controller, _, host, exchange, _) = try await Self.runningExchange { configuration in
            Self.connectAtOnce(&configuration)
        }
        let now = SystemWallClock().now()
        await exchange.rotate(to: OwnID(id: .random(), window: IDWindow(start: now - 10, end: now + 2)))
        // Heard again and again, as a peer advertising every 50 ms is (scanning restarts after a rotation).
        for _ in 0..<10 {
            controller.advertise(from: Self.peerA)
            try await Task.sleep(for: .milliseconds(50))
        }
        #expect(controller.state.withLock { $0.createConnections } == 0, "an attempt started just before the rotation")
        // The window is over and our rotation has not run yet (a loaded machine runs it late):
        // peers have moved on, so still no attempt.
        await exchange.rotate(to: OwnID(id: .random(), window: IDWindow(start: now - 20, end: now - 1)))
        for _ in 0..<10 {
            controller.advertise(from: Self.peerA)
            try await Task.sleep(for: .milliseconds(50))
        }
        #expect(controller.state.withLock { $0.createConnections } == 0, "an attempt started after the window ended")
        await exchange.rotate(to: OwnID(id: .random(), window: IDWindow(start: now, end: now + 600)))
        #expect(await eventually {
            controller.advertise(from: Self.peerA)
            try? await Task.sleep(for: .milliseconds(50))
            return controller.state.withLock { $0.createConnections } == 1
        })
        await exchange.stop()
        await host.close()
    }

    /// A connect request the scanner cannot witness could leave a RootCanal controller stuck with
    /// no sign of it: attempts start only while the scan burst is on, and the burst ends only
    /// after the attempts under way, even when candidates are still waiting at its end.
    @Test func noAttemptStartsWhileTheScannerIsOff() async throws {
        let (controller, _, host, exchange, _) = try await Self.runningExchange { configuration in
            Self.connectAtOnce(&configuration)
            configuration.connectionTimeout = .milliseconds(250)
            configuration.pauseAfterFailedConnection = .milliseconds(50)
            configuration.scanOnTime = .milliseconds(300)
            configuration.scanBurstExtension = .milliseconds(200)
            configuration.scanOffTime = .seconds(30)
        }
        let peers = (0..<8).map { _ in BluetoothAddress.randomNonResolvablePrivate() }
        for peer in peers { controller.advertise(from: peer) }
        #expect(await eventually(timeout: .seconds(5)) {
            controller.state.withLock { !$0.scanning && $0.initiating == nil && $0.createConnections > 0 }
        })
        try await Task.sleep(for: .seconds(1))
        let (attempts, unwitnessed) = controller.state.withLock { ($0.createConnections, $0.createConnectionsWhileNotScanning) }
        #expect(unwitnessed == 0, "\(unwitnessed) of \(attempts) connect attempts started with the scanner off")
        #expect(attempts < peers.count, "the burst should have ended with candidates left")
        await exchange.stop()
        await host.close()
    }

    /// A rotation stops the scanner to change the address; the scan burst it interrupted goes on
    /// after it and still ends on time. Ending it there phase-locked every node's bursts to the
    /// rotation, which follows the wall clock: a crowd of 20 on RootCanal then scanned and
    /// initiated in the same 10 s before each boundary and logged 70 % of its pairs.
    @Test func aRotationInsideAScanBurstDoesNotEndIt() async throws {
        let (controller, _, host, exchange, _) = try await Self.runningExchange { configuration in
            configuration.scanOnTime = .seconds(2)
            configuration.scanOffTime = .seconds(30)
        }
        #expect(await eventually { controller.state.withLock { $0.scanning } })
        await exchange.rotate(to: Self.ownID(start: 60))
        #expect(await eventually { controller.state.withLock { $0.scanning } }, "the burst ended at the rotation")
        #expect(await eventually(timeout: .seconds(5)) { !controller.state.withLock { $0.scanning } },
                "the burst outlived its time")
        await exchange.stop()
        await host.close()
    }

    /// A session that starts during the pause between bursts (after a controller reset) waits for
    /// the next burst instead of starting one of its own: in a RootCanal crowd, with frequent
    /// resets, fresh bursts had nodes scanning and initiating almost all the time.
    @Test func aSessionStartedDuringThePauseWaitsForTheNextBurst() async throws {
        let schedule = ScanSchedule(onTime: .seconds(1), offTime: .milliseconds(700))
        _ = schedule.phase(at: .now)
        schedule.burstEnded(at: .now, jitter: 1)
        let pauseEnds = ContinuousClock.now + .milliseconds(700)
        let (controller, _, host, exchange, _) = try await Self.runningExchange(scanSchedule: schedule) { configuration in
            configuration.scanOnTime = .seconds(1)
            configuration.scanOffTime = .milliseconds(700)
        }
        try await Task.sleep(until: pauseEnds - .milliseconds(200))
        #expect(!controller.state.withLock { $0.scanning }, "a new session scanned during the pause")
        #expect(await eventually { controller.state.withLock { $0.scanning } }, "the next burst never came")
        await exchange.stop()
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

    /// Rotation while the controller still initiates for nobody (it refuses the new address with
    /// Command Disallowed): the node ends that initiation, changes the address, serves the new id
    /// and advertises again; it is never left dark.
    @Test func aRefusedAddressChangeIsMendedAndAdvertisingResumes() async throws {
        let (controller, identity, host, exchange, _) = try await Self.runningExchange()
        controller.startStrayInitiation(to: Self.peerB)
        let addressBefore = await host.randomAddress

        let second = Self.ownID(start: 60)
        await exchange.rotate(to: second)
        #expect(identity.ownID == second)
        #expect(await host.randomAddress != addressBefore)
        #expect(controller.state.withLock { $0.advertising }, "advertising did not resume")
        #expect(await host.condition.advertising == nil)
        await exchange.stop()
        await host.close()
    }

    /// A controller that refuses every new address: the new id never goes on air (not from the
    /// old address, nor at all) and the node asks for a controller reset instead of going dark.
    @Test func anAddressTheControllerAlwaysRefusesLeadsToAReset() async throws {
        let (controller, identity, host, exchange, first) = try await Self.runningExchange()
        controller.state.withLock { $0.refuseAddressChanges = true }

        await exchange.rotate(to: Self.ownID(start: 60))
        #expect(identity.ownID == first, "the new id was served from the old address")
        let reason = await exchange.waitUntilControllerIsStuck()
        #expect(reason?.contains("refused a new address") == true, "reason: \(String(describing: reason))")
        await exchange.stop()
        await host.close()
    }

    /// The controller stops advertising behind our back (a link formed, a command it dropped):
    /// the audit notices it and turns advertising on again.
    @Test func theAuditFindsAdvertisingOffAndTurnsItOn() async throws {
        let controller = ScriptedController()
        let host = try await Self.openHost(controller)
        try await host.startAdvertising(TracerService.advertisingData(txPower: 0))
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
        try await host.startAdvertising(TracerService.advertisingData(txPower: 0))
        let enablesBefore = Self.advertisingEnables(controller)
        for (index, peer) in [Self.peerA, Self.peerB].enumerated() {
            let attempt = Task { try await host.connect(to: peer, type: .random, timeout: .seconds(20)) }
            #expect(await eventually { controller.initiatingPeer == peer })
            controller.connectInitiatedConnection(handle: 0x0040 + UInt16(index))
            let connection = try await attempt.value
            await host.disconnect(connection)
            _ = await connection.disconnected()
        }
        try await Task.sleep(for: .milliseconds(200))
        #expect(Self.advertisingEnables(controller) == enablesBefore, "advertising enabled again after central links")
        #expect(controller.state.withLock { $0.advertising })
        await host.close()
    }

    /// A central connecting to us stops legacy advertising: the host enables it once, at once, and
    /// not again when that link closes while advertising is on.
    @Test func aPeerConnectingToUsGetsAdvertisingEnabledOnce() async throws {
        let controller = ScriptedController()
        let host = try await Self.openHost(controller)
        try await host.startAdvertising(TracerService.advertisingData(txPower: 0))
        let enablesBefore = Self.advertisingEnables(controller)
        controller.acceptIncoming(handle: 0x0050, from: Self.peerA)
        #expect(await eventually { controller.state.withLock { $0.advertising } })
        #expect(await eventually { await !host.connections.isEmpty })
        let connection = try #require(await host.connections.values.first)
        await host.disconnect(connection)
        _ = await connection.disconnected()
        try await Task.sleep(for: .milliseconds(200))
        #expect(Self.advertisingEnables(controller) == enablesBefore + 1)
        await host.close()
    }

    // MARK: Helpers

    static func advertisingEnables(_ controller: ScriptedController) -> Int {
        controller.state.withLock { $0.commands.filter { $0 == LESetAdvertisingEnable.opcode }.count }
    }

    /// An id whose window begins `start` seconds from now and lasts 10 minutes: the exchange
    /// starts no connection attempt for an id whose window is over.
    static func ownID(start: UnixSeconds) -> OwnID {
        let now = SystemWallClock().now()
        return OwnID(id: UserID.random(), window: IDWindow(start: now + start, end: now + start + 600))
    }

    /// A heard peer is tried at once: no initiation spread, no deferral to the peer.
    static func connectAtOnce(_ configuration: inout ExchangeConfiguration) {
        configuration.initiationSpread = .zero
        configuration.deferToPeerDelay = .zero
    }

    /// An exchange on a scripted controller, started with a first id.
    static func runningExchange(
        scanSchedule: ScanSchedule? = nil, configure: (inout ExchangeConfiguration) -> Void = { _ in }
    ) async throws -> (ScriptedController, AdvertisedIdentity, LEHost, ProximityExchange, OwnID) {
        let controller = ScriptedController()
        let identity = AdvertisedIdentity()
        let host = try await openHost(controller, identity: identity)
        let (writes, _) = AsyncStream.makeStream(of: PeerWriteEvent.self)
        var configuration = ExchangeConfiguration()
        configuration.scanOffTime = .zero
        configure(&configuration)
        let exchange = ProximityExchange(host: host, identity: identity, peerWrites: writes, sink: DiscardingSink(),
                                         configuration: configuration, scanSchedule: scanSchedule)
        let first = ownID(start: 0)
        await exchange.rotate(to: first)
        try await exchange.start()
        return (controller, identity, host, exchange, first)
    }

    struct DiscardingSink: EncounterSink {
        func record(_ sighting: Sighting) async {}
    }
}
