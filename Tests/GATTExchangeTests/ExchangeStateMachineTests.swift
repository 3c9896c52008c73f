import IDRotation
import Synchronization
import Testing
import TestTiers
@testable import BLEHost
import BLEHostTestSupport
@testable import GATTExchange

/// The exchange's transitions (see `ProximityExchange`'s comment) against the scripted controller
/// on a manual clock: each transition happens on its event, with the clock standing still, or
/// on its timer, when the clock reaches it and not before. Nothing polls, so a loop that still
/// did would sleep on the standing clock for ever and the test would fail.
@Suite(.tags(.unit), .timeLimit(.minutes(1)))
struct ExchangeStateMachineTests {
    static let peerA = ExchangeScriptedControllerTests.peerA
    static let peerB = ExchangeScriptedControllerTests.peerB

    struct Running {
        let clock: ManualHostClock
        let controller: ScriptedController
        let host: LEHost
        let exchange: ProximityExchange

        func stop() async {
            await exchange.stop()
            await host.close()
        }

        var createConnections: Int { controller.state.withLock { $0.createConnections } }

        /// Whether some task sleeps on the clock until `offset` from its start.
        func sleeps(until offset: Duration) -> Bool { clock.pendingDeadlines.contains(offset) }
    }

    /// An exchange on a scripted controller and a manual clock, scanning without pause, with one
    /// connect slot, trying a heard peer at once unless `configure` says otherwise.
    static func running(
        clock: ManualHostClock = ManualHostClock(), hostClock: (any HostClock)? = nil,
        configure: (inout ExchangeConfiguration) -> Void = { _ in }
    ) async throws -> Running {
        let controller = ScriptedController()
        let identity = AdvertisedIdentity()
        var radio = LEHost.Configuration()
        radio.cancelGrace = .milliseconds(500)
        let (_, writes) = AsyncStream.makeStream(of: PeerWriteEvent.self)
        let host = try await LEHost.open(
            transport: controller, databaseForLink: TracerGATTServer.databaseForLink(identity: identity, writes: writes),
            configuration: radio, clock: hostClock ?? clock)
        var configuration = ExchangeConfiguration(scanPlan: .continuous)
        configuration.maxOutgoingConnections = 1
        ExchangeScriptedControllerTests.connectAtOnce(&configuration)
        configure(&configuration)
        let (peerWrites, _) = AsyncStream.makeStream(of: PeerWriteEvent.self)
        let exchange = ProximityExchange(
            host: host, identity: identity, peerWrites: peerWrites, sink: ExchangeScriptedControllerTests.DiscardingSink(),
            configuration: configuration)
        await exchange.rotate(to: ExchangeScriptedControllerTests.ownID(start: 0))
        try await exchange.start()
        #expect(await eventually { controller.state.withLock { $0.scanning } }, "the scanner never started")
        return Running(clock: clock, controller: controller, host: host, exchange: exchange)
    }

    /// A random address that, by the rule both sides compute from the two addresses, goes first
    /// toward `host` (`goesFirst`), or waits for `host` to.
    static func peer(of host: LEHost, goesFirst: Bool) async throws -> BluetoothAddress {
        let ours = try #require(await host.randomAddress)
        var peer = BluetoothAddress.randomNonResolvablePrivate()
        while InitiatorRule.initiates(ours, toward: peer) != !goesFirst { peer = .randomNonResolvablePrivate() }
        return peer
    }

    /// A peer that, by the rule both sides compute from the two addresses, waits for us to go first.
    static func peerWeInitiateTo(on node: Running) async throws -> BluetoothAddress {
        try await peer(of: node.host, goesFirst: false)
    }

    /// A peer that, by the rule both sides compute from the two addresses, goes first: we wait for it.
    static func peerWeDeferTo(on node: Running) async throws -> BluetoothAddress {
        try await peer(of: node.host, goesFirst: true)
    }

    /// idle → connecting, on the advertising report alone: no timer is involved.
    @Test func aSightingStartsAnAttemptWithTheClockStandingStill() async throws {
        let node = try await Self.running()
        #expect(await node.controller.advertise(from: Self.peerA, until: { node.createConnections == 1 }), "no attempt started on the sighting")
        #expect(node.controller.initiatingPeer == Self.peerA)
        #expect(await node.exchange.attemptStates.first.map {
            if case .connecting(Self.peerA, _, false) = $0 { return true } else { return false }
        } == true)
        #expect(node.clock.elapsed == .zero)
        await node.stop()
    }

    /// idle → connecting on a timer: a peer we defer to is tried when its turn comes on the clock, not before.
    @Test func aDeferredPeerIsTriedWhenItsTurnComesOnTheClock() async throws {
        let node = try await Self.running { configuration in
            configuration.deferToPeerDelay = .seconds(1)
            configuration.candidateLifetime = .seconds(5)
        }
        let peer = try await Self.peerWeDeferTo(on: node)
        // The slot has seen the candidate once it sleeps until the peer's turn: only then does
        // "no attempt yet" test anything.
        #expect(await node.controller.advertise(from: peer, until: { node.sleeps(until: .seconds(1)) }), "no slot waits for the deferred peer's turn, 1 s on; sleepers: \(node.clock.pendingDeadlines)")
        #expect(node.createConnections == 0, "a deferred peer was tried at once")
        // Nothing sleeps until 900 ms or before, so moving the clock there wakes no one.
        #expect(!node.clock.pendingDeadlines.contains { $0 <= .milliseconds(900) }, "sleepers: \(node.clock.pendingDeadlines)")
        node.clock.advance(by: .milliseconds(900))
        #expect(node.createConnections == 0, "a deferred peer was tried before its turn")
        node.clock.advance(by: .milliseconds(200))
        #expect(await eventually(timeout: .seconds(2)) { node.createConnections == 1 }, "the turn came and no attempt started")
        #expect(node.controller.initiatingPeer == peer)
        await node.stop()
    }

    /// connecting → exchanging → idle when the link closes in the middle of the GATT steps: the
    /// step fails at once, the exchange counts as failed, and the slot is free for the next peer
    /// without waiting for the exchange's deadline.
    @Test func aLinkClosingMidExchangeFreesTheSlot() async throws {
        let node = try await Self.running()
        #expect(await node.controller.advertise(from: Self.peerA, until: { node.createConnections == 1 }))
        node.controller.connectInitiatedConnection(handle: 0x0040)
        #expect(await eventually { await node.exchange.attemptStates == [.exchanging(peer: Self.peerA)] },
                "the slot did not move to exchanging when the link opened")
        // The scripted controller answers no ATT request: the exchange waits on its first step.
        node.controller.inject([0x04, 0x05, 0x04, 0x00, 0x40, 0x00, 0x13])
        #expect(await eventually { await node.exchange.failedExchanges == 1 }, "the closed link did not fail the exchange")
        #expect(await eventually { await node.exchange.attemptStates == [.idle] }, "the slot stayed busy after the link closed")
        #expect(await node.exchange.completedExchanges == 0)
        #expect(await node.controller.advertise(from: Self.peerB, until: { node.createConnections == 2 }), "no attempt to the next peer after the link closed")
        #expect(node.controller.initiatingPeer == Self.peerB)
        #expect(node.clock.elapsed == .zero)
        await node.stop()
    }

    /// The scan burst's end on the clock, then its extension and its draining, each left on its
    /// event: no candidate waits (the only one was taken), and the attempt under way has formed a
    /// link. The scanner stays on while the attempt connects (only a listening scanner can tell
    /// that the request went unanswered; `LEHost`'s procedure queue holds the stop behind the
    /// connect too) and stops the moment it has connected, not at the draining's timer 10 s later.
    @Test func aBurstEndsOnceItsLastAttemptHasConnected() async throws {
        let node = try await Self.running { configuration in
            configuration.scanOnTime = .seconds(1)
            configuration.scanOffTime = .seconds(30)
            configuration.scanBurstExtension = .seconds(10)
            configuration.connectionTimeout = .seconds(20)
        }
        #expect(await node.controller.advertise(from: Self.peerA, until: { node.createConnections == 1 }))
        node.clock.advance(by: .seconds(1))
        // The burst's end has been handled once the scanner drains, waiting for the attempt under
        // way until 10 s after the extension (1 + 10 + 10 s): only then does "still scanning" test anything.
        #expect(await eventually { await node.exchange.scanState == .draining && node.sleeps(until: .seconds(21)) },
                "the burst did not drain at its end; sleepers: \(node.clock.pendingDeadlines)")
        #expect(node.controller.state.withLock { $0.scanning }, "the scanner stopped while an attempt was connecting")
        node.controller.connectInitiatedConnection(handle: 0x0041)
        #expect(await eventually { !node.controller.state.withLock { $0.scanning } },
                "the burst went on after its last attempt connected")
        #expect(node.clock.elapsed == .seconds(1))
        await node.stop()
    }

    /// A rotation during an attempt ends it (connecting → cooling down), holds the slot while the
    /// address changes, and resumes the scan burst on its end (rotating → burst, an event); the
    /// slot starts again only when its cooling-down timer fires.
    @Test func aRotationDuringAnAttemptEndsItAndTheBurstResumes() async throws {
        let node = try await Self.running { configuration in
            configuration.pauseAfterFailedConnection = .milliseconds(600)
        }
        #expect(await node.controller.advertise(from: Self.peerA, until: { node.createConnections == 1 }))
        let addressBefore = await node.host.randomAddress
        await node.exchange.rotate(to: ExchangeScriptedControllerTests.ownID(start: 60))
        #expect(await node.host.randomAddress != addressBefore, "the address did not change")
        #expect(await eventually { node.controller.state.withLock { $0.scanning } }, "the burst did not resume after the rotation")
        var coolingDownUntil: ContinuousClock.Instant?
        #expect(await eventually {
            if case .coolingDown(let until) = await node.exchange.attemptStates.first { coolingDownUntil = until }
            return coolingDownUntil != nil
        }, "the attempt the rotation ended did not leave the slot cooling down")
        let cooledDown = node.clock.start.duration(to: try #require(coolingDownUntil))
        // The slot sleeps on the clock until then, where no sighting can wake it.
        #expect(await eventually { node.sleeps(until: cooledDown) }, "the slot does not sleep until its cooling down ends")
        let handled = await node.exchange.tracerSightingsHandled
        #expect(await node.controller.advertise(from: Self.peerB, until: { await node.exchange.tracerSightingsHandled > handled }), "peer B was never heard")
        #expect(node.createConnections == 1, "an attempt started while the slot was cooling down")
        node.clock.advance(by: cooledDown - node.clock.elapsed)
        #expect(await node.controller.advertise(from: Self.peerB, until: { node.createConnections == 2 }), "the slot did not start again after cooling down")
        #expect(node.controller.initiatingPeer == Self.peerB)
        await node.stop()
    }

    /// A rotation while a retry lets peers hear us before it turns advertising off
    /// (`LEHost.Configuration.advertisingHeldBeforeGoingQuiet`) gives the retry up before it reaches
    /// the controller, and the rotation goes ahead. The controller is still reset: only a link to
    /// that peer would have cleared the first attempt's unanswered request, and after the rotation
    /// none can form.
    @Test func aRotationWhileARetryHoldsAdvertisingGivesTheRetryUp() async throws {
        let node = try await Self.running()
        #expect(await node.controller.advertise(from: Self.peerA, until: { node.createConnections == 1 }))
        // Heard during the attempt, which the controller does not answer: it ends after
        // `unansweredAdvertisingWait` on the clock, and the peer is asked again with advertising off.
        // (Sightings count from after the attempt began, so the clock moves first.)
        node.clock.advance(by: .milliseconds(10))
        let wait = LEHost.Configuration().unansweredAdvertisingWait
        try #require(await node.controller.advertise(from: Self.peerA, until: { node.sleeps(until: .milliseconds(10) + wait) }))
        node.clock.advance(by: wait)
        // Advertising came on at the start (clock at zero): the retry holds it on until then.
        let hold = LEHost.Configuration().advertisingHeldBeforeGoingQuiet
        try #require(await eventually { node.sleeps(until: hold) }, "the retry does not hold advertising; sleepers: \(node.clock.pendingDeadlines)")
        #expect(await node.exchange.attemptStates.first.map {
            if case .connecting(Self.peerA, _, true) = $0 { return true } else { return false }
        } == true)

        let addressBefore = await node.host.randomAddress
        let rotation = Task { await node.exchange.rotate(to: ExchangeScriptedControllerTests.ownID(start: 60)) }
        try #require(await eventually { await !node.host.isAdvertising }, "the rotation did not begin")
        node.clock.advance(by: hold - node.clock.elapsed)
        await rotation.value
        #expect(await node.host.randomAddress != addressBefore, "the address did not change")
        #expect(await eventually { await node.exchange.failedExchanges == 1 }, "the retry did not end")
        #expect(node.createConnections == 1, "the retry reached the controller after the rotation withdrew advertising")
        #expect(await node.exchange.stuckReason?.contains("asking that peer again brought no link") == true)
        await node.stop()
    }

    /// A peer heard again while it waits for its turn changes nothing a waiting loop decides on:
    /// no announcement, no loop woken. Advertisers repeat every 20 ms to 10 s, so a crowd
    /// announcing each refresh woke every loop of every node hundreds of times a second.
    @Test func aPeerHeardAgainWakesNoLoop() async throws {
        let node = try await Self.running { configuration in
            configuration.deferToPeerDelay = .seconds(5)
            configuration.candidateLifetime = .seconds(10)
            configuration.auditInterval = .seconds(60)
        }
        let peer = try await Self.peerWeDeferTo(on: node)
        let before = await node.exchange.announcements
        #expect(await node.controller.advertise(from: peer, until: { await node.exchange.announcements > before }), "the new candidate was not announced")
        // The slot has seen it once it sleeps until the peer's turn; announcements made up to then are the offer's.
        #expect(await eventually { node.sleeps(until: .seconds(5)) }, "no slot waits for the peer's turn")
        let offered = await node.exchange.announcements
        let handled = await node.exchange.tracerSightingsHandled
        for _ in 0..<10 {
            node.controller.advertise(from: peer)
        }
        // Wait for the exchange to have handled all ten, so the check below tests something.
        #expect(await eventually { await node.exchange.tracerSightingsHandled >= handled + 10 }, "the refreshes never reached the exchange")
        #expect(await node.exchange.announcements == offered, "a peer heard again was announced")
        // Its turn still comes, on the clock.
        node.clock.advance(by: .seconds(5))
        #expect(await eventually(timeout: .seconds(2)) { node.createConnections == 1 }, "the turn came and no attempt started")
        #expect(node.controller.initiatingPeer == peer)
        await node.stop()
    }

    /// cooling down → idle → connecting, with time passing inside the connect slot's pass: the
    /// clock moves on right after the pass reads it, past the turn of the candidate that waits.
    /// A pass that read the clock again to find the next turn found none, and the candidate waited
    /// for the next announcement (here: for ever); a pass that reads it once waits for that turn,
    /// which has come.
    @Test func aTurnComingWhileTheSlotDecidesIsNotMissed() async throws {
        let manual = ManualHostClock()
        let clock = JumpingClock(manual)
        let node = try await Self.running(clock: manual, hostClock: clock) { configuration in
            configuration.deferToPeerDelay = .seconds(1)
            configuration.candidateLifetime = .seconds(10)
            configuration.pauseAfterFailedConnection = .milliseconds(600)
            configuration.auditInterval = .seconds(60)
        }
        // An attempt that a rotation ends leaves the slot cooling down, until a moment on the clock.
        let first = try await Self.peerWeInitiateTo(on: node)
        #expect(await node.controller.advertise(from: first, until: { node.createConnections == 1 }), "no attempt to the first peer")
        await node.exchange.rotate(to: ExchangeScriptedControllerTests.ownID(start: 60))
        #expect(await eventually { node.controller.state.withLock { $0.scanning } }, "the burst did not resume after the rotation")
        var coolingDownUntil: ContinuousClock.Instant?
        #expect(await eventually {
            if case .coolingDown(let until) = await node.exchange.attemptStates.first { coolingDownUntil = until }
            return coolingDownUntil != nil
        }, "the slot is not cooling down")
        let cooledDown = try #require(coolingDownUntil)
        // Meanwhile a peer we defer to is heard: its turn comes 1 s from now, after the cooling down.
        let peer = try await Self.peerWeDeferTo(on: node)
        // The slot sleeps on the clock until its cooling down ends, where no sighting can wake it.
        #expect(await eventually { node.sleeps(until: manual.start.duration(to: cooledDown)) }, "the slot does not sleep while cooling down")
        let handled = await node.exchange.tracerSightingsHandled
        #expect(await node.controller.advertise(from: peer, until: { await node.exchange.tracerSightingsHandled > handled }), "the peer was never heard")
        #expect(node.createConnections == 1)
        let turn = manual.now + .seconds(1)
        #expect(cooledDown < turn)
        // The slot's pass after the cooling down reads the clock before the turn; time then passes it.
        clock.jumpAfterNextReading(by: cooledDown.duration(to: turn) + .milliseconds(100))
        manual.advance(by: manual.now.duration(to: cooledDown))
        #expect(await eventually(timeout: .seconds(3)) { node.createConnections == 2 },
                "the candidate whose turn came during the slot's pass was not tried")
        #expect(node.controller.initiatingPeer == peer)
        await node.stop()
    }
}

/// A manual clock that, once told to, moves on right after the next reading: the time that
/// passes, on a real clock, between two readings.
final class JumpingClock: HostClock {
    private let manual: ManualHostClock
    private let pendingJump = Mutex<Duration?>(nil)

    init(_ manual: ManualHostClock) { self.manual = manual }

    var now: ContinuousClock.Instant {
        let now = manual.now
        if let jump = pendingJump.withLock({ pending in defer { pending = nil }; return pending }) {
            manual.advance(by: jump)
        }
        return now
    }

    func sleep(until deadline: ContinuousClock.Instant) async throws {
        try await manual.sleep(until: deadline)
    }

    func jumpAfterNextReading(by duration: Duration) {
        pendingJump.withLock { $0 = duration }
    }
}
