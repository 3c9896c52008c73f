import BLEHost
import IDRotation
import Logging
import TracerCore
import Waits

/// What a node does all day on one controller: advertise the Tracer service, scan for it, swap ids
/// with the peers it hears, file their sightings, and change address with its id.
///
/// It coordinates; the pieces live elsewhere: `LEHost` (radio roles), `PeerRegistry` (whom to
/// connect to), `TracerPeerExchange` (the GATT steps), `EncounterSink` (the log).
///
/// ## States, events, transitions
///
/// Nothing here polls. Each loop waits for the event it needs: a report from the controller
/// (advertising report, link opened or closed, GATT result), a change another loop announces on
/// `changes` (an `EventCount`), or a timer on the host's clock, each named below with its reason.
///
/// - Scanning (`scanLoop`, one task): *pause* → (timer: the pause's end) → *burst* → (timer:
///   the burst's end) → *extension*, while heard candidates wait → (event: no candidate left, or
///   every one waits for a turn far enough off to rest the scanner until the first
///   (`scannerRestsUntilTurns`), or timer: the extension's end) → *draining*, no new attempt
///   starts → (event: no attempt connecting, or timer: 10 s after the extension) → *pause*, until
///   that first turn if the scanner rests. A rotation inside a burst
///   stops the scanner: *burst* → *rotating* → (event: rotation over) → *burst* again.
///   The scanner's `ScanState` is *listening* in *burst* and *extension*, *draining* in
///   *draining*, and *off* otherwise (a pause, a rotation, the scanner starting).
/// - Each connect slot (`connectLoop`, `maxOutgoingConnections` tasks) is an `AttemptState`:
///   *idle* → (event: a candidate eligible while listening, not rotating, not in the quiet time
///   before our rotation; timer: the next candidate's eligibility) → *connecting* → (controller:
///   peer advertised without connecting) → *connecting, asked again* → (controller: link opened)
///   → *exchanging* → (GATT result, link closed, or timer: `exchangeTimeout`) → *idle*; a failed
///   connection goes to *cooling down* → (timer: `pauseAfterFailedConnection`) → *idle*.
/// - Rotation (`rotate(to:)`, from the rotator), a `RotationState`: *settled* → (rotate) →
///   *rotating*: the candidates cleared, every slot held *idle*, the scanner stopped, the audit
///   and new sightings ignored → (the address changed, or the change failed) → *settled*, which it
///   announces.
/// - Incoming links (`acceptIncoming`): each lives until the peer closes it or its timer
///   (`incomingLinkLifetime`) does.
/// - Audit (`auditLoop`): a timer every `auditInterval`.
public actor ProximityExchange {
    private let host: LEHost
    private let identity: AdvertisedIdentity
    private let sink: any EncounterSink
    private let configuration: ExchangeConfiguration
    /// The controller's advertising TX power as it reported it at start-up (nil: it did not),
    /// which the node then advertises and writes instead of `ExchangeConfiguration.txPower`.
    public nonisolated let controllerTxPower: Int8?
    private let scanSchedule: ScanSchedule
    private let addresses: IDAddresses
    private let wallClock: any WallClock
    /// The host's clock: every wait and every instant here, so that a test on a manual clock
    /// runs a minute of scan schedule in no time.
    private let clock: any HostClock
    private let logger: Logger
    private let peerWrites: AsyncStream<PeerWriteEvent>
    /// Hears the wall time of each audit that completed: see `auditLoop`.
    private let onProgress: @Sendable (UnixSeconds) async -> Void

    private var registry: PeerRegistry
    private var candidates: ConnectionCandidates
    private var incomingCount = 0
    /// Where the address change stands (see the type's comment).
    enum RotationState: Equatable {
        case settled
        case rotating
    }
    private var rotation = RotationState.settled
    /// Where each connect slot is in its attempt (see the type's comment).
    enum AttemptState: Equatable {
        case idle
        case connecting(peer: BluetoothAddress, since: ContinuousClock.Instant, askedAgain: Bool)
        case exchanging(peer: BluetoothAddress)
        /// After a failed connection: no initiating until then, so that peers get through to us.
        case coolingDown(until: ContinuousClock.Instant)

        var isConnecting: Bool {
            if case .connecting = self { return true }
            return false
        }
    }
    private var slots: [AttemptState] = []
    /// Where each connect slot is, for tests and status.
    var attemptStates: [AttemptState] { slots }
    /// Announces each change a loop may wait for: see the type's comment.
    private let changes = EventCount()
    /// How many changes have been announced, for tests.
    var announcements: UInt64 { changes.count }
    /// How many Tracer advertisements have been handled, for tests: the positive event a test
    /// awaits before checking that handling them announced nothing.
    private(set) var tracerSightingsHandled = 0
    /// For each connect slot, the generation of `changes` at which it last looked for a candidate,
    /// found none to take and went to wait, for tests: the positive event a test awaits before
    /// checking that no attempt started.
    private(set) var slotsFoundNothingAt: [UInt64] = []
    /// Where the scanner is in its burst (see the type's comment).
    enum ScanState: Equatable {
        /// A pause, a rotation, or the scanner starting: no attempt starts.
        case off
        /// The scanner is on and stays on for any attempt that starts now: attempts start only then.
        case listening
        /// The burst has run its time: no attempt starts, and the scanner stops once those under way end.
        case draining
    }
    private var scanner = ScanState.off
    /// Where the scanner is, for tests and status.
    var scanState: ScanState { scanner }
    /// Rotations begun, so that a scan burst knows whether one stopped its scanner.
    private var rotations = 0
    /// When the burst that ends rested the scanner until a candidate's turn: the next one begins then.
    private var scannerReturnsAt: ContinuousClock.Instant?
    private var tasks: [Task<Void, Never>] = []
    private let stuck = OnceSignal<String>()
    /// Why the controller was found stuck, once it was, for tests.
    var stuckReason: String? { stuck.value }
    private var initiatorHealth: InitiatorHealth
    public private(set) var completedExchanges = 0
    public private(set) var failedExchanges = 0

    /// - Parameters:
    ///   - peerWrites: the stream fed by `TracerGATTServer.databaseForLink` on the same host.
    ///   - scanSchedule: when to scan; a session after a controller reset passes on the one before's.
    ///   - addresses: the address of each id; a session after a controller reset passes on the one before's.
    ///   - onProgress: hears the wall time of each completed audit, the exchange's proof that no
    ///     operation holds the controller for ever (`auditLoop`).
    public init(
        host: LEHost, identity: AdvertisedIdentity, peerWrites: AsyncStream<PeerWriteEvent>, sink: any EncounterSink,
        configuration: ExchangeConfiguration = ExchangeConfiguration(), scanSchedule: ScanSchedule? = nil,
        addresses: IDAddresses = IDAddresses(), wallClock: any WallClock = SystemWallClock(), logger: Logger = Logger(label: "tracer.exchange"),
        controllerTxPower: Int8? = nil, onProgress: @escaping @Sendable (UnixSeconds) async -> Void = { _ in }
    ) {
        self.onProgress = onProgress
        self.host = host
        self.identity = identity
        self.peerWrites = peerWrites
        self.sink = sink
        var configuration = configuration
        if let controllerTxPower { configuration.txPower = controllerTxPower }
        self.configuration = configuration
        self.controllerTxPower = controllerTxPower
        clock = host.clock
        self.scanSchedule = scanSchedule
            ?? ScanSchedule(onTime: configuration.scanOnTime, offTime: configuration.scanOffTime, start: host.clock.now)
        self.addresses = addresses
        self.wallClock = wallClock
        self.logger = logger
        registry = PeerRegistry(configuration: configuration)
        candidates = ConnectionCandidates(lifetime: configuration.candidateLifetime)
        initiatorHealth = InitiatorHealth(
            resetAfterHeardTimeouts: configuration.resetAfterConnectionTimeouts,
            resetAfterTimeoutStreak: configuration.resetAfterTimeoutStreak)
    }

    /// Starts advertising (the identity must be set: see `rotate(to:)`), scanning and exchanging.
    public func start() async throws(GAPError) {
        try await host.startAdvertising(TracerService.advertisingData(txPower: configuration.txPower))
        tasks.append(Task { await self.scanLoop() })
        tasks.append(Task { await self.acceptIncoming() })
        tasks.append(Task { await self.receivePeerWrites() })
        tasks.append(Task { await self.auditLoop() })
        let slotCount = max(1, configuration.maxOutgoingConnections)
        slots = Array(repeating: .idle, count: slotCount)
        slotsFoundNothingAt = Array(repeating: 0, count: slotCount)
        for slot in 0..<slotCount {
            tasks.append(Task { await self.connectLoop(slot: slot) })
        }
    }

    public func stop() async {
        for task in tasks { task.cancel() }
        tasks = []
        try? await host.stopAdvertising()
        try? await host.stopScanning()
        for connection in await host.openConnections { await host.disconnect(connection) }
    }

    // MARK: Rotation

    /// Moves the radio to a new id in lockstep: end any connection attempt and every link, stop
    /// advertising and scanning, set the id's address (a new non-resolvable private one, or, in a
    /// session after a controller reset, the one the id had), switch the id the GATT service
    /// returns, resume. No observer can see the new id with the old address or the old id
    /// with the new one. If the controller refuses the new address even then, the new id stays off
    /// the air and the controller is reset (the session ends and starts again).
    public func rotate(to ownID: OwnID) async {
        rotation = .rotating
        rotations += 1
        defer {
            rotation = .settled
            changes.announce()
        }
        candidates.removeAll()
        // A burst brought forward to a cleared candidate's turn would hear no one it wants.
        scannerReturnsAt = nil
        changes.announce()
        let resume = !tasks.isEmpty
        let advertisingData = TracerService.advertisingData(txPower: configuration.txPower)
        let identity = identity
        let host = host
        let logger = logger
        let address = addresses.address(for: ownID)
        do {
            try await host.changeRandomAddress(to: address) {
                identity.set(ownID)
                logger.info("rotated", metadata: ["id": "\(ownID.id)", "until": "\(ownID.window.end)"])
                guard resume else { return }
                do {
                    try await host.startAdvertising(advertisingData)
                } catch {
                    logger.error("advertising did not resume after rotation", metadata: ["error": "\(error)"])
                }
            }
        } catch .controllerLost {
            return
        } catch {
            // Serving the new id from the old address would link them: stay quiet and start over.
            logger.error("could not change the address; the new id stays off the air and the controller is reset",
                         metadata: ["error": "\(error)"])
            controllerIsStuck("the controller refused a new address: \(error)")
            return
        }
        registry.weMoved(to: address)
        if let outage = await host.condition.advertising {
            logger.error("this node has not advertised since \(outage.since) (Unix time): peers cannot find it",
                         metadata: ["reason": "\(outage.reason)"])
        }
    }

    /// `ownID`'s window has ended and the next id is not on the air yet (the rotator records it
    /// first, which a locked or full store can make slow or impossible): off the air at once, held
    /// as in a rotation until `rotate(to:)` brings the next id, so that no peer hears or reads an
    /// id after its window.
    public func windowEnded(_ ownID: OwnID) async {
        guard identity.ownID == ownID, rotation == .settled else { return }
        rotation = .rotating
        candidates.removeAll()
        changes.announce()
        do {
            try await host.goOffTheAir()
        } catch {
            // Only a lost controller gets here; the session ends with it.
            logger.debug("could not go off the air at the window's end", metadata: ["error": "\(error)"])
        }
    }

    // MARK: Keeping the controller honest

    /// A stuck initiator is reset at once (`InitiatorHealth` says when): resetting at the first
    /// sign took a crowd of six on strict controllers from 47-100 % of ids per window to 100 %.
    private func connectionTimedOut(toward address: BluetoothAddress, attemptStarted: ContinuousClock.Instant) {
        let heardDuringAttempt = registry.entry(address).map { $0.lastHeard > attemptStarted + .milliseconds(300) } ?? false
        if let reason = initiatorHealth.attemptTimedOut(toward: address, peerHeardDuringAttempt: heardDuringAttempt) {
            controllerIsStuck(reason)
        }
    }

    private func connectionsFormed() {
        initiatorHealth.linkFormed()
    }

    /// Returns, with the reason, once the controller is in a state the node cannot leave by
    /// itself (the session then ends and the next one resets the controller), or nil when the
    /// calling task is cancelled.
    public func waitUntilControllerIsStuck() async -> String? {
        await stuck.wait()
    }

    private func controllerIsStuck(_ reason: String) {
        stuck.fire(reason)
    }

    /// Checks now and then that the controller does what the node believes (advertising on,
    /// scanning on during a burst, no connection attempt without an owner), mends what differs,
    /// and resets the controller when advertising stays off too long.
    ///
    /// Each audit that completes is reported (`onProgress`): it is one of the host's procedures, so
    /// it completes only once every procedure before it has ended, and it runs every
    /// `auditInterval` whatever the node meets. A node whose flags say it advertises and scans,
    /// but whose controller is held by one operation that never ends, stops reporting, and
    /// systemd's watchdog hears of it (the node's `NodeWatchdog`). An audit whose commands timed
    /// out still completes: a controller that does not answer shows in the flags instead.
    private func auditLoop() async {
        // Timer: the audit's period.
        while (try? await clock.sleep(for: configuration.auditInterval)) != nil {
            guard rotation == .settled else { continue }
            let findings = await host.audit()
            if findings.strayInitiationEnded {
                logger.warning("the controller was initiating with no owner; ended it")
            }
            if let outage = await host.condition.advertising,
               wallClock.now() - outage.since >= UnixSeconds(configuration.resetAfterOutage.components.seconds) {
                controllerIsStuck("advertising has been off since \(outage.since) (Unix time): \(outage.reason)")
                return
            }
            guard !Task.isCancelled else { return }
            await onProgress(wallClock.now())
        }
    }

    // MARK: Scanning and sightings

    /// Scans in bursts, as `scanSchedule` says, for as long as the exchange runs.
    ///
    /// A rotation stops the scanner to change the address; the burst it interrupted goes on once
    /// the new address is set, rather than ending there. Ending it there phase-locked every node's
    /// bursts to the rotation: windows follow the wall clock, so a whole crowd then scanned and
    /// initiated in the same 10 s before each boundary, and a crowd of 20 on strict controllers logged 70 %
    /// of its pairs per window.
    private func scanLoop() async {
        while !Task.isCancelled {
            switch scanSchedule.phase(at: clock.now) {
            case .pause(let until):
                // Timer: the pause's end.
                guard (try? await clock.sleep(until: until)) != nil else { return }
            case .burst(let until):
                // A session stopped mid-burst leaves the burst to the next session.
                scannerReturnsAt = nil
                guard await scanBurst(until: until), !Task.isCancelled else {
                    scanSchedule.interrupted(at: clock.now)
                    return
                }
                scanSchedule.burstEnded(at: clock.now, nextWindowStarts: burstStartsInTheNextWindow, returnAt: scannerReturnsAt)
                if configuration.scanOffTime > .zero { try? await host.stopScanning() }
                registry.forget(olderThan: clock.now - configuration.peerMemory)
            }
        }
    }

    /// When, in the id window after the current one, a burst may begin and still run its time before
    /// that window's quiet end (`ScanSchedule.burstEnded`); nil without an id or room for a burst.
    private var burstStartsInTheNextWindow: ClosedRange<ContinuousClock.Instant>? {
        guard let window = identity.ownID?.window else { return nil }
        let nextStart = clock.now + .seconds(window.end - wallClock.now())
        let latest = nextStart + .seconds(window.end - window.start) - configuration.scanOnTime - configuration.quietBeforeRotation
        return latest > nextStart ? nextStart...latest : nil
    }

    /// One scan burst, resumed after each rotation inside it. Returns false once the controller is lost.
    private func scanBurst(until burstEnd: ContinuousClock.Instant) async -> Bool {
        while !Task.isCancelled {
            while rotation == .rotating, !Task.isCancelled {
                await changes.wait(past: changes.count)
            }
            guard !Task.isCancelled else { return true }
            let rotationsBefore = rotations
            let sightings: AsyncStream<AdvertisementSighting>
            do {
                sightings = try await host.startScanning()
            } catch {
                if case .controllerLost = error { return false }
                logger.warning("scanning failed; retrying", metadata: ["error": "\(error)"])
                // Timer: a controller that refused to scan is asked again a second later, not at once.
                try? await clock.sleep(for: .seconds(1))
                continue
            }
            scanner = .listening
            changes.announce()
            // A burst of one discovery window loses to the scanner's start-up what it spends there.
            let listenUntil = max(burstEnd, clock.now + configuration.discoveryWindow)
            // Without a pause (tests, demos, mains-powered nodes) a burst never ends: stopping and
            // restarting the scanner would only leave moments in which no attempt can start.
            let stopper = configuration.scanOffTime == .zero ? nil : Task { [host, configuration, clock, changes] in
                // Ends the burst (and so the loop below) when its time is up and no candidate
                // waits (up to the extension), and only once the attempts under way have ended:
                // candidates are tried only while heard, and only a scanner that hears the
                // peer can tell that a connect request went unanswered. In a 20-node crowd a
                // request sent after the scanner stopped left a node stuck, unseen, for 47 s.
                // Timer: the burst's end.
                guard (try? await clock.sleep(until: listenUntil)) != nil else { return }
                let extensionEnd = listenUntil + configuration.scanBurstExtension
                // Event: the last candidate taken or dropped; timer: it goes unheard too long, or the extension's end.
                while let waiting = self.candidatesWaiting(), clock.now < extensionEnd {
                    if self.restsUntilTurn() { break }
                    await changes.wait(past: waiting.generation, until: clock.deadline(min(waiting.lastExpiry, extensionEnd)))
                    guard !Task.isCancelled else { return }
                }
                self.endBurst()
                let drainEnd = extensionEnd + .seconds(10)
                // Event: the last attempt connecting ended; timer: a controller that never ends one.
                while let generation = self.attemptsConnecting(), clock.now < drainEnd {
                    await changes.wait(past: generation, until: clock.deadline(drainEnd))
                    guard !Task.isCancelled else { return }
                }
                try? await host.stopScanning()
            }
            for await sighting in sightings {
                await heard(sighting)
                if Task.isCancelled { break }
            }
            let burstOver = scanner == .draining
            scanner = .off
            stopper?.cancel()
            // The scanner stopped without the burst ending: a rotation changed the address.
            if burstOver || (rotation == .settled && rotations == rotationsBefore) { return true }
        }
        return true
    }

    private func heard(_ sighting: AdvertisementSighting) async {
        guard sighting.isConnectable, TracerService.isAdvertised(in: sighting.data) else { return }
        defer { tracerSightingsHandled += 1 }
        let now = clock.now
        let rssi: Int8? = sighting.rssi == 127 ? nil : sighting.rssi
        let txPower = sighting.data.txPowerLevel
        let newcomer = registry.entry(sighting.address) == nil
        if let peer = registry.heard(sighting.address, at: now), let ownID = identity.ownID {
            await sink.record(Sighting(
                peer: peer, ownWindowStart: ownID.window.start, time: wallClock.now(), rssi: rssi, txPower: txPower))
        }
        guard rotation == .settled, registry.shouldConnect(to: sighting.address, at: now) else { return }
        var eligibleAt = candidates.eligibleAt(sighting.address) ?? registry.turn(of: sighting.address)
        if eligibleAt == nil {
            let turn = now + initiationDelay(toward: sighting.address, newcomer: newcomer)
            registry.setTurn(of: sighting.address, to: turn)
            eligibleAt = turn
        }
        let offered = candidates.offer(ConnectionCandidates.Candidate(
            address: sighting.address, addressType: sighting.addressType, rssi: rssi, txPower: txPower, heardAt: now,
            eligibleAt: eligibleAt ?? now))
        // Advertisers repeat every 20 ms to 10 s: announcing each refresh would wake every loop that often.
        if offered { changes.announce() }
    }

    /// Two Tracer nodes that hear each other at the same moment would connect to each other at
    /// once; on strict controllers neither then gets through, since a controller that is initiating
    /// accepts no connection. So one side of each pair goes first, by a rule both compute from the
    /// two addresses (`InitiatorRule`), and the other waits, usually to find the exchange done by the
    /// time its turn comes. Peers that never connect (a phone that only advertises) are still
    /// reached, after the delay.
    ///
    /// Where other peers are about, a random spread comes on top: after a rotation every node
    /// hears every new address at once, and connect requests from several initiators answering
    /// the same advertising event are all but one ignored, which leaves strict controllers waiting
    /// for an answer that never comes (an initiator stuck on an unanswered request, deaf until
    /// reset; `InitiatorHealth`). A peer heard alone
    /// has no other initiator to collide with: no spread (nor one heard for the first time beside
    /// a single other, which may be that peer's old address).
    private func initiationDelay(toward peer: BluetoothAddress, newcomer: Bool) -> Duration {
        let now = clock.now
        let crowded = registry.mayBeCrowded(around: peer, newcomer: newcomer, since: now - configuration.crowdMemory)
        let spread = crowded ? configuration.initiationSpread * Double.random(in: 0...1) : .zero
        guard let ours = registry.ourAddress else { return spread }
        return spread + (InitiatorRule.initiates(ours, toward: peer) ? .zero : configuration.deferToPeerDelay)
    }

    // MARK: Central exchanges

    /// One connect slot: waits for a candidate whose turn has come (an event, or the timer of the
    /// next candidate's eligibility), then runs the attempt to its end.
    ///
    /// Each pass reads the clock once: a candidate whose turn came between a first reading (too
    /// early to take it) and a second (too late to wait for it) would otherwise wait for the next
    /// announcement, however long that takes.
    private func connectLoop(slot: Int) async {
        while !Task.isCancelled {
            let generation = changes.count
            let now = clock.now
            guard let candidate = takeCandidate(at: now) else {
                slotsFoundNothingAt[slot] = generation
                let nextTurn = rotation == .rotating ? nil : candidates.nextEligibility(after: now)
                await changes.wait(past: generation, until: nextTurn.map(clock.deadline))
                continue
            }
            await exchange(with: candidate, slot: slot)
        }
    }

    /// The last moments of our id's window. Windows follow the wall clock, so peers rotate at about
    /// the same moment as we do: a connect request sent then may find its peer gone off the air,
    /// and on strict controllers that leaves the controller stuck with nothing to show for it (a crowd of 20
    /// had a node refuse 110 requests for 50 s after one sent at the boundary). No attempt starts then,
    /// nor after the boundary until our own rotation has run: a loaded machine may run it late, and
    /// an attempt begun meanwhile goes to an address its peer has just left. A controller that
    /// takes a cancel without ending the attempt (`ControllerQuirks.cancelTakenWithoutEndingAttempt`),
    /// and ignores HCI Reset too, never ends such an attempt, and so never initiates again.
    private var isInRotationQuietTime: Bool {
        guard let end = identity.ownID?.window.end else { return false }
        return wallClock.now() >= end - UnixSeconds(configuration.quietBeforeRotation.components.seconds)
    }

    /// While candidates still heard wait: the generation of `changes` read with that, and when
    /// the last of them goes unheard too long. Nil once none waits.
    private func candidatesWaiting() -> (generation: UInt64, lastExpiry: ContinuousClock.Instant)? {
        let generation = changes.count
        guard let lastExpiry = candidates.lastExpiry(at: clock.now) else { return nil }
        return (generation, lastExpiry)
    }

    /// While some slot is connecting: the generation of `changes` read with that. Nil once none is.
    private func attemptsConnecting() -> UInt64? {
        let generation = changes.count
        return slots.contains(where: \.isConnecting) ? generation : nil
    }

    private func endBurst() {
        scanner = .draining
    }

    /// Whether the scanner rests until the first candidate's turn instead of listening meanwhile
    /// (`ExchangeConfiguration.scannerRestsUntilTurns`): every candidate waits for its turn, and the
    /// first turn is far enough off to be worth stopping and starting the scanner for. Sets when
    /// the next burst begins.
    private func restsUntilTurn() -> Bool {
        guard configuration.scannerRestsUntilTurns, let turn = candidates.earliestTurn(at: clock.now),
              clock.now.duration(to: turn) > configuration.discoveryWindow * 2 else { return false }
        scannerReturnsAt = turn
        return true
    }

    private func enter(_ state: AttemptState, slot: Int) {
        slots[slot] = state
        changes.announce()
    }

    /// The candidate whose turn came first among those the registry still wants a link to.
    private func takeCandidate(at now: ContinuousClock.Instant) -> ConnectionCandidates.Candidate? {
        if rotation == .rotating || scanner != .listening || isInRotationQuietTime { return nil }
        while let candidate = candidates.next(at: now) {
            changes.announce()
            guard registry.shouldConnect(to: candidate.address, at: now) else { continue }
            registry.connecting(to: candidate.address, at: now)
            return candidate
        }
        return nil
    }

    private func exchange(with candidate: ConnectionCandidates.Candidate, slot: Int) async {
        guard let ownID = identity.ownID, let ourID = PeerIDBytes(ownID.id.bytes) else { return }
        let connection: LEConnection
        enter(.connecting(peer: candidate.address, since: clock.now, askedAgain: false), slot: slot)
        do {
            do {
                connection = try await host.connect(
                    to: candidate.address, type: candidate.addressType, timeout: configuration.connectionTimeout)
            } catch .peerAdvertisedWithoutConnecting {
                // Our connect request went unanswered (another initiator won that advertising
                // event). Asking the same peer again at once is what clears such a request where
                // it would otherwise stay pending and make the controller refuse everyone
                // (an initiator stuck on an unanswered request, `InitiatorHealth`); on other controllers it
                // is simply a second try at a peer that is there.
                // Off the air meanwhile: every peer whose request such a controller refuses is left
                // stuck in turn, and in crowds on such controllers that chain, not lost races, stuck most.
                logger.debug("peer advertised without our controller connecting; trying it again", metadata: [
                    "peer": "\(candidate.address)",
                ])
                enter(.connecting(peer: candidate.address, since: clock.now, askedAgain: true), slot: slot)
                // On failure advertising stays off: the controller is reset just below.
                connection = try await host.connect(
                    to: candidate.address, type: candidate.addressType, timeout: configuration.retryTimeout,
                    advertisingOff: true)
            }
        } catch {
            guard case .connecting(_, let attemptStarted, let askedAgain) = slots[slot] else { return }
            let coolingDownUntil = clock.now + configuration.pauseAfterFailedConnection.jittered()
            enter(.coolingDown(until: coolingDownUntil), slot: slot)
            defer { enter(.idle, slot: slot) }
            registry.failed(candidate.address, at: clock.now)
            failedExchanges += 1
            logger.debug("connection failed", metadata: ["peer": "\(candidate.address)", "error": "\(error)"])
            switch error {
            case .controllerLost: return
            case _ where askedAgain:
                // Only a link to that same peer clears the unanswered request; whatever else
                // happened (the peer left, or never answered), the controller may still be stuck.
                controllerIsStuck(initiatorHealth.requestStayedUnanswered(toward: candidate.address))
            case .connectionTimedOut: connectionTimedOut(toward: candidate.address, attemptStarted: attemptStarted)
            case .hci(.commandFailed(let opcode, .commandDisallowed)) where opcode == LECreateConnection.opcode:
                if let reason = initiatorHealth.attemptRefusedWhileInitiating() { controllerIsStuck(reason) }
            default: break
            }
            // Timer: an initiating controller is deaf to peers that want to connect to it (strict
            // ones accept no connection meanwhile): after a failed attempt, leave them a moment.
            try? await clock.sleep(until: coolingDownUntil)
            return
        }
        enter(.exchanging(peer: candidate.address), slot: slot)
        defer { enter(.idle, slot: slot) }
        connectionsFormed()
        // A peer that stalls any step loses the link when the deadline passes, which fails the step.
        let watchdog = Task { [host, configuration, clock] in
            // Timer: the exchange's deadline.
            guard (try? await clock.sleep(for: configuration.exchangeTimeout)) != nil else { return }
            // Closing the bearer fails the pending step at once, even if the link is half-open.
            await connection.bearer.close()
            await host.disconnect(connection)
        }
        defer { watchdog.cancel() }
        do {
            _ = try? await connection.client.exchangeMTU()
            let write = PeerIDWrite(id: ourID, reportedRSSI: candidate.rssi ?? 127, txPower: configuration.txPower)
            let peerBytes = try await TracerPeerExchange(bearer: connection.bearer).exchange(writing: write)
            await host.disconnect(connection)
            let peer = try UserID(bytes: peerBytes.bytes)
            registry.learned(peer, at: candidate.address, now: clock.now)
            completedExchanges += 1
            await sink.record(Sighting(
                peer: peer, ownWindowStart: ownID.window.start, time: wallClock.now(), rssi: candidate.rssi,
                txPower: candidate.txPower, learnedBy: .read))
            logger.debug("exchanged", metadata: ["peer": "\(peer)", "link": "\(connection)"])
        } catch {
            await host.disconnect(connection)
            registry.failed(candidate.address, at: clock.now)
            failedExchanges += 1
            logger.debug("exchange failed", metadata: ["link": "\(connection)", "error": "\(error)"])
        }
    }

    // MARK: Peripheral side

    private func acceptIncoming() async {
        for await connection in host.incomingConnections {
            if incomingCount >= configuration.maxIncomingConnections {
                logger.debug("too many incoming links; refusing one", metadata: ["link": "\(connection)"])
                await host.disconnect(connection)
                continue
            }
            incomingCount += 1
            connectionsFormed()
            registry.connecting(to: connection.peerAddress, at: clock.now)
            candidates.remove(connection.peerAddress)
            changes.announce()
            Task { [host, configuration, clock] in
                // Timer: closed after a fixed lifetime whatever the peer does: holding a link blocks no one for long.
                let lifetime = Task {
                    guard (try? await clock.sleep(for: configuration.incomingLinkLifetime)) != nil else { return }
                    if connection.isConnected { await host.disconnect(connection) }
                }
                _ = await connection.disconnected()
                lifetime.cancel()
                self.incomingClosed(from: connection.peerAddress)
            }
        }
    }

    private func incomingClosed(from address: BluetoothAddress) {
        incomingCount -= 1
        registry.linkClosed(address)
    }

    private func receivePeerWrites() async {
        for await event in peerWrites {
            guard let ownID = identity.ownID, let peer = try? UserID(bytes: event.write.id) else { continue }
            // The writer's connection address is its advertising address: no need to connect back.
            registry.learned(peer, at: event.peer.address, now: clock.now)
            await sink.record(Sighting(
                peer: peer, ownWindowStart: ownID.window.start, time: wallClock.now(), txPower: event.write.txPower,
                // 127 is HCI's "RSSI not available", which a writer sends when it has none.
                reportedRSSI: event.write.reportedRSSI == 127 ? nil : event.write.reportedRSSI, learnedBy: .written))
        }
    }
}
