/// One LE Create Connection, from the command to the LE Connection Complete that ends it. Only one
/// exists at a time, as controllers allow: its procedure holds the host's turn until the controller
/// has reported its end, so that no later attempt can be handed this one's completion.
struct ConnectionAttempt {
    enum Outcome: Sendable {
        /// The controller ended the attempt: a link (success), 0x02 after a cancel, or a failure.
        case completed(LEConnectionCompleteEvent, LEConnection?)
        /// No end reported within the time allowed.
        case timedOut
        case lost
    }

    /// Why a waiting attempt's procedure wakes.
    enum Wake: Sendable {
        case ended(Outcome)
        /// Advertising stopped (a central connected to us) and this attempt leaves it on: the
        /// procedure resumes it in its own turn and waits on.
        case advertisingWanted
    }

    /// How long the end of an attempt may trail a cancel refused with Command Disallowed. The
    /// refusal means the controller is not initiating, so the end is already on its way: the
    /// attempt still waits for it on every controller, because this host can see the refusal
    /// before an end the controller sent first (link events reach it through L2CAP, command
    /// answers directly), and an end nobody waits for would be handed to the next attempt. The
    /// bound is for a controller that drops an attempt without reporting its end and then refuses
    /// its cancel (one whose earlier connect request went unanswered does). The wait costs
    /// something only there, and no flag could spare it even there: such a controller reports the
    /// ends of its other attempts, which the wait is for.
    static let endAfterRefusedCancel: Duration = .milliseconds(300)

    let number: UInt64
    /// The peer asked for; nil while ending an initiation that nobody here owns any more.
    let peer: BluetoothAddress?
    var cancelSent = false
    /// Someone needs the controller idle (an address change, the caller's task cancelled): stop
    /// waiting and cancel.
    var abortRequested = false
    /// The address change that abandoned the attempt wants the old address off the air before
    /// the cancel, whose end may take the cancel grace.
    var stopAdvertisingBeforeCancel = false
    /// When the controller accepted LE Create Connection; sightings of the peer after it count.
    var initiatingSince: ContinuousClock.Instant?
    /// Sightings of the peer while initiating: the controller should have answered the first.
    var peerSightings = 0
    /// Ends the attempt if no connection follows a sighting in time.
    var unansweredCheck: Task<Void, Never>?
    /// The end, when it came before anyone waited for it.
    var ended: Outcome?
    /// The procedure's wake while it waits: fired once, by the attempt's end, a timer or advertising wanted.
    var waiter: OnceSignal<Wake>?
    var timer: Task<Void, Never>?
    /// The attempt does not need advertising off, so advertising that stopped is resumed within
    /// its turn rather than after its end (up to the timeout and the cancel grace later).
    var leavesAdvertisingOn = false
    /// Advertising is to be resumed at the next wait: it stopped while the procedure was not waiting.
    var advertisingWanted = false
    /// A timer fired while the procedure was resuming advertising, not waiting: the next wait ends at once.
    var timeUpWhileAway = false
}

extension LEHost {
    /// Connects to `peer` as central. The attempt is cancelled after the timeout, and this returns
    /// only once the controller has reported the attempt's end: a connection that completes during
    /// the cancel is returned like any other. The attempt is one procedure, from the command to its
    /// end, as Linux's `hci_le_create_conn_sync` is: no other procedure's commands come in between.
    /// Cancelling the calling task gives the attempt up as an address change does: it is cancelled
    /// at the controller and its end still awaited (a connect still waiting for its turn just leaves).
    ///
    /// With `advertisingOff`, advertising stops once this attempt's turn has come (and it has been
    /// on for `Configuration.advertisingHeldBeforeGoingQuiet`), stays off for the whole attempt,
    /// and resumes before this returns if it connects: on failure the caller decides (resets the
    /// controller, or leaves it to the audit to turn advertising on again). Without it, advertising
    /// that a peer's link stopped meanwhile is resumed during the attempt.
    public func connect(
        to peer: BluetoothAddress, type: LEAddressType, timeout: Duration? = nil, advertisingOff: Bool = false
    ) async throws(GAPError) -> LEConnection {
        if lost { throw .controllerLost }
        let timeout = timeout ?? configuration.connectionTimeout
        return try await procedure { () async throws(GAPError) -> LEConnection in
            try await self.attemptConnection(to: peer, type: type, timeout: timeout, advertisingOff: advertisingOff)
        }
    }

    private func attemptConnection(
        to peer: BluetoothAddress, type: LEAddressType, timeout: Duration, advertisingOff: Bool
    ) async throws(GAPError) -> LEConnection {
        if lost { throw .controllerLost }
        quietAttemptUnderWay = advertisingOff
        defer { quietAttemptUnderWay = false }
        if advertisingOff, advertisement != nil {
            await holdAdvertisingBeforeGoingQuiet()
            // Withdrawn meanwhile (an address change, or the host closing, waits for this turn and
            // wants the controller idle; it turns advertising off itself), or the caller gave up.
            if advertisement == nil || Task.isCancelled { throw .cancelled }
            try? await command { () async throws(HCIError) in try await self.sendAdvertisingEnable(false) }
        }
        let number = beginAttempt(peer: peer)
        defer { finishAttempt(number) }
        attempt?.leavesAdvertisingOn = !advertisingOff
        let request = LECreateConnection(
            peerAddressType: type, peerAddress: peer, scanInterval: configuration.initiatorScanInterval,
            scanWindow: configuration.initiatorScanWindow)
        do {
            try await hci.send(request)
        } catch {
            if lost { throw .controllerLost }
            finishAttempt(number)
            switch error {
            case .commandFailed(_, .commandDisallowed), .commandTimedOut:
                // Refused because the controller is initiating already (an attempt whose cancel it
                // ignored, or a host before us), or unanswered, so perhaps initiating: make sure
                // it is not, so that the next attempt can start.
                await endStrayInitiation()
            default:
                // Controller Busy, Memory Capacity Exceeded, Connection Limit Exceeded: nothing
                // started, the controller is not initiating; the caller tries again later.
                break
            }
            throw .hci(error)
        }
        attempt?.initiatingSince = clock.now
        var outcome = await waitForAttempt(number, upTo: timeout)
        var cancelRefused = false
        if case .timedOut = outcome {
            if attempt?.stopAdvertisingBeforeCancel == true {
                try? await command { () async throws(HCIError) in try await self.sendAdvertisingEnable(false) }
            }
            (outcome, cancelRefused) = await cancelAttempt(number)
        }
        let unanswered = attempt?.peerSightings ?? 0
        switch outcome {
        case .completed(_, let connection?):
            // In this turn: queued after it, the resume waited behind the next attempt that turns
            // advertising off, and the node stayed unheard for both.
            if advertisingOff { await resumeAdvertisingNow() }
            return connection
        case .completed(let event, nil) where event.status == .unknownConnectionIdentifier:
            if unanswered > 0 {
                throw .peerAdvertisedWithoutConnecting(peer: peer, advertisements: unanswered)
            }
            throw .connectionTimedOut(peer: peer, after: timeout)
        case .completed(let event, nil):
            if lost { throw .controllerLost }
            throw .connectionFailed(peer: peer, status: event.status)
        case .timedOut:
            // Should the connection still form, it is closed at once.
            abandonedConnectionPeers.insert(peer)
            if cancelRefused {
                logger.debug("the controller dropped a connection attempt without reporting its end", metadata: ["peer": "\(peer)"])
            } else {
                noteCancelIgnored()
            }
            if unanswered > 0 {
                throw .peerAdvertisedWithoutConnecting(peer: peer, advertisements: unanswered)
            }
            throw .connectionTimedOut(peer: peer, after: timeout)
        case .lost:
            throw .controllerLost
        }
    }

    /// Leaves advertising that came on less than `advertisingHeldBeforeGoingQuiet` ago on until
    /// then, so that an attempt turning it off right after another did still lets peers hear us.
    /// Call inside a procedure.
    private func holdAdvertisingBeforeGoingQuiet() async {
        guard let since = advertisingOnSince else { return }
        let until = since.advanced(by: configuration.advertisingHeldBeforeGoingQuiet)
        // Timer: the advertising event peers need between two quiet attempts.
        if clock.now < until { try? await clock.sleep(until: until) }
    }

    /// Asks the connection attempt under way, if any, to give up now (an address change needs the
    /// controller idle). Its caller still waits for the controller to confirm the end.
    public func abandonConnectionAttempt() {
        if let number = attempt?.number { abandonAttempt(number) }
    }

    /// Gives up attempt `number` if it is still the one under way. With `stoppingAdvertisingFirst`,
    /// it turns advertising off before it cancels.
    func abandonAttempt(_ number: UInt64, stoppingAdvertisingFirst: Bool = false) {
        guard attempt?.number == number else { return }
        attempt?.abortRequested = true
        if stoppingAdvertisingFirst { attempt?.stopAdvertisingBeforeCancel = true }
        if attempt?.cancelSent == false { attemptTimerFired(number) }
    }

    /// Moves the radio to `address`: stops advertising, ends a connection attempt (waiting for the
    /// controller to confirm), stops scanning, closes every link, sets the address, and runs
    /// `then` (which sets the new id and resumes advertising) in the same procedure, before any
    /// other may start, so that no link from the new address ever serves the old id, nor the
    /// reverse. Calls `then` makes to this host run inside that procedure. Goes before the
    /// procedures still waiting. Throws if the controller still refuses the address after
    /// everything it could be doing was stopped.
    public func changeRandomAddress(
        to address: BluetoothAddress, then resume: @Sendable () async -> Void
    ) async throws(GAPError) {
        if lost { throw .controllerLost }
        // Off the air first, so that no new link forms to the old address meanwhile, and before
        // waiting for the attempt under way to end: on a controller that ignores the cancel that
        // takes the cancel grace (about 1 s). The old address then outlived its window, peers that
        // had already rotated took it for a newcomer and tried it after it was gone, and where
        // attempts never end (`ControllerQuirks.cancelTakenWithoutEndingAttempt`), two nodes of a
        // 20-node crowd never initiated again.
        withdrawEverything()
        try await procedure(urgent: true) { () async throws(GAPError) in
            if self.lost { throw .controllerLost }
            await self.stopEverythingNow()
            do throws(GAPError) {
                try await self.setRandomAddressNow(address)
            } catch .hci(let error) where error.status == .commandDisallowed {
                // The controller still advertises, scans or initiates although we stopped all
                // three: a cancel it took without ending the attempt, or commands it dropped.
                self.logger.warning("address change refused; stopping what the controller still does",
                                    metadata: ["error": "\(error)"])
                await self.endStrayInitiation()
                try? await self.command { () async throws(HCIError) in try await self.sendAdvertisingEnable(false) }
                try? await self.command { () async throws(HCIError) in try await self.hci.send(LESetScanEnable(false)) }
                self.scanEnabled = false
                try await self.setRandomAddressNow(address)
            }
            await resume()
        }
    }

    /// Takes the node off the air at once, as the first half of an address change does: stops
    /// advertising, ends a connection attempt, stops scanning and closes every link. For an id
    /// whose window ended before the next one could take its place (the store was slow to record
    /// it): until `changeRandomAddress` runs, nobody hears the ended id or reads it over a link.
    /// Goes before the procedures still waiting.
    public func goOffTheAir() async throws(GAPError) {
        if lost { throw .controllerLost }
        withdrawEverything()
        try await procedure(urgent: true) { () async throws(GAPError) in
            if self.lost { throw .controllerLost }
            await self.stopEverythingNow()
        }
    }

    /// Nobody wants the current advertising from now on, and the attempt under way turns it off
    /// before its cancel.
    private func withdrawEverything() {
        withdrawAdvertising()
        if let number = attempt?.number { abandonAttempt(number, stoppingAdvertisingFirst: true) }
    }

    /// Advertising off, scanning off, every link closed. Call inside a procedure.
    private func stopEverythingNow() async {
        try? await command { () async throws(HCIError) in try await self.sendAdvertisingEnable(false) }
        if scanning { try? await stopScanningNow() }
        for connection in connections.values {
            await connection.bearer.close()
            await disconnect(connection)
        }
    }

    // MARK: The attempt's lifecycle

    func beginAttempt(peer: BluetoothAddress?) -> UInt64 {
        attemptNumber += 1
        attempt = ConnectionAttempt(number: attemptNumber, peer: peer)
        return attemptNumber
    }

    func finishAttempt(_ number: UInt64) {
        guard attempt?.number == number else { return }
        attempt?.unansweredCheck?.cancel()
        attempt?.timer?.cancel()
        attempt = nil
    }

    /// Waits until the attempt ends or `limit` passes. The calling task cancelled, an attempt not
    /// yet cancelled is given up (`abandonAttempt`); one already cancelled is waited for all the same.
    /// An attempt that leaves advertising on resumes it meanwhile when a peer's link stopped it.
    func waitForAttempt(_ number: UInt64, upTo limit: Duration) async -> ConnectionAttempt.Outcome {
        let deadline = clock.now.advanced(by: limit)
        while true {
            switch await waitForAttemptOrAdvertising(number, until: deadline) {
            case .ended(let outcome):
                return outcome
            case .advertisingWanted:
                await resumeAdvertisingNow()
            }
        }
    }

    private func waitForAttemptOrAdvertising(_ number: UInt64, until deadline: ContinuousClock.Instant) async -> ConnectionAttempt.Wake {
        guard let current = attempt, current.number == number else { return .ended(.lost) }
        if let ended = current.ended { return .ended(ended) }
        if (current.abortRequested || Task.isCancelled), !current.cancelSent { return .ended(.timedOut) }
        if current.timeUpWhileAway || clock.now >= deadline {
            attempt?.timeUpWhileAway = false
            return .ended(.timedOut)
        }
        if current.advertisingWanted {
            attempt?.advertisingWanted = false
            return .advertisingWanted
        }
        let wake = OnceSignal<ConnectionAttempt.Wake>()
        attempt?.waiter = wake
        attempt?.timer = clock.timer(after: clock.now.duration(to: deadline)) { [weak self] in
            await self?.attemptTimerFired(number)
        }
        // Through a cancellation: the attempt is then abandoned at the controller, and its end
        // (or the timer) is still what wakes the procedure.
        return await withTaskCancellationHandler {
            await wake.waitThroughCancellation()
        } onCancel: {
            Task { await self.abandonAttempt(number) }
        }
    }

    /// Has the attempt under way resume advertising in its turn, if it leaves advertising on:
    /// woken now if it waits, at its next wait otherwise.
    func resumeAdvertisingWithinAttempt() {
        guard let current = attempt, current.leavesAdvertisingOn, current.ended == nil else { return }
        guard let waiter = current.waiter else {
            attempt?.advertisingWanted = true
            return
        }
        attempt?.waiter = nil
        attempt?.timer?.cancel()
        attempt?.timer = nil
        waiter.fire(.advertisingWanted)
    }

    /// A sighting of the peer being connected to. The controller answers the advertisement it hears
    /// with a connect request, and the connection completes within milliseconds; a sighting with no
    /// connection after `unansweredAdvertisingWait` means the request went unanswered (another
    /// initiator won that advertising event) or was never sent (the controller is stuck). Ending
    /// the attempt then, rather than at the timeout, shortens the time a controller stuck that way
    /// spends advertising while refusing every peer's connect request.
    ///
    /// Stuck so: a connect request the advertiser left unanswered stays pending on some
    /// controllers, and their initiator ignores every advertiser from then on (the scanner still
    /// reports them) until a link to that same peer forms or HCI Reset; the caller asks the peer
    /// again, then resets the controller (GATTExchange's `InitiatorHealth`). On every controller,
    /// since such a controller shows nothing before it is stuck, and elsewhere the early end costs
    /// a cancel and a second try at a peer that is there.
    func attemptPeerAdvertised(_ address: BluetoothAddress, at time: ContinuousClock.Instant) {
        guard let current = attempt, current.peer == address, let since = current.initiatingSince, time > since,
              !current.cancelSent, current.ended == nil else { return }
        attempt?.peerSightings += 1
        guard current.unansweredCheck == nil else { return }
        let number = current.number
        attempt?.unansweredCheck = clock.timer(after: configuration.unansweredAdvertisingWait) { [weak self] in
            await self?.attemptTimerFired(number)
        }
    }

    func attemptTimerFired(_ number: UInt64) {
        guard attempt?.number == number else { return }
        guard let waiter = attempt?.waiter else {
            // The procedure is resuming advertising between two waits: time is up all the same.
            // (The cancel clears it and disarms the timers: its end gets the whole grace.)
            if attempt?.initiatingSince != nil, attempt?.cancelSent == false { attempt?.timeUpWhileAway = true }
            return
        }
        attempt?.waiter = nil
        // The unanswered check may end the wait before the timeout: that timer must not end a later one.
        attempt?.timer?.cancel()
        attempt?.timer = nil
        waiter.fire(.ended(.timedOut))
    }

    private func endAttempt(with outcome: ConnectionAttempt.Outcome) {
        guard attempt != nil else { return }
        if let waiter = attempt?.waiter {
            attempt?.waiter = nil
            attempt?.timer?.cancel()
            attempt?.timer = nil
            attempt?.ended = outcome
            waiter.fire(.ended(outcome))
        } else {
            attempt?.ended = outcome
        }
    }

    /// Sends LE Create Connection Cancel for the attempt and waits for its end (Core Vol 4 Part E
    /// 7.8.13: an LE Connection Complete with 0x02 follows, or the connection that won the race).
    private func cancelAttempt(_ number: UInt64) async -> (outcome: ConnectionAttempt.Outcome, refused: Bool) {
        attempt?.cancelSent = true
        // The cancel's end gets its own grace: nothing armed for the attempt before may cut it short.
        attempt?.unansweredCheck?.cancel()
        attempt?.timer?.cancel()
        attempt?.timer = nil
        attempt?.timeUpWhileAway = false
        do {
            try await hci.send(LECreateConnectionCancel())
        } catch HCIError.commandFailed(_, .commandDisallowed) {
            // Nothing left to cancel: the attempt has ended and its completion is on its way.
            return (await waitForAttempt(number, upTo: ConnectionAttempt.endAfterRefusedCancel), true)
        } catch {
            if lost { return (.lost, false) }
            logger.debug("connection cancel failed", metadata: ["error": "\(error)"])
        }
        return (await waitForAttempt(number, upTo: configuration.cancelGrace), false)
    }

    enum StrayInitiation { case none, ended, unknown }

    /// Ends an initiation that nobody here owns: sends a cancel and waits for the end it causes.
    /// Call inside a procedure, so that no attempt of this host is under way.
    @discardableResult
    func endStrayInitiation() async -> StrayInitiation {
        // Begun before the cancel is sent: its 0x02 may follow the cancel's answer at once.
        let number = beginAttempt(peer: nil)
        defer { finishAttempt(number) }
        attempt?.cancelSent = true
        do {
            try await hci.send(LECreateConnectionCancel())
        } catch HCIError.commandFailed(_, .commandDisallowed) {
            return .none  // not initiating
        } catch {
            logger.debug("connection cancel failed", metadata: ["error": "\(error)"])
            return .unknown
        }
        // A controller known to take cancels without effect would only make us wait.
        if quirks.contains(.cancelTakenWithoutEndingAttempt) { return .unknown }
        switch await waitForAttempt(number, upTo: configuration.cancelGrace) {
        case .completed:
            logger.warning("the controller was still initiating a connection nobody waited for; ended it")
            return .ended
        case .timedOut:
            noteCancelIgnored()
            return .unknown
        case .lost:
            return .unknown
        }
    }

    private func noteCancelIgnored() {
        noteQuirk(.cancelTakenWithoutEndingAttempt,
                  "the controller accepts connection cancels without ending the attempt; links that still form are closed")
    }

    /// Routes a central LE Connection Complete to the attempt that caused it. One LE Create
    /// Connection is outstanding at a time, so the current attempt owns every central completion,
    /// except a 0x02 before it sent a cancel (an earlier attempt's, whose cancel the controller
    /// answered late) and a link to another peer (an abandoned attempt's, completing late).
    func centralConnectionCompleted(_ event: LEConnectionCompleteEvent, connection: LEConnection?) async {
        if let current = attempt, current.ended == nil {
            let ours: Bool
            if event.status.isSuccess {
                ours = current.peer == nil || current.peer == event.peerAddress
            } else if event.status == .unknownConnectionIdentifier {
                ours = current.cancelSent
            } else {
                ours = true
            }
            if ours {
                endAttempt(with: .completed(event, current.peer == nil ? nil : connection))
                // An initiation nobody owned ended with a link nobody wants.
                if current.peer == nil, let connection { await disconnect(connection) }
                return
            }
        }
        guard let connection else {
            logger.debug("an earlier connection attempt ended", metadata: ["status": "\(event.status)"])
            return
        }
        abandonedConnectionPeers.remove(event.peerAddress)
        logger.debug("closing a connection that completed after its attempt was abandoned", metadata: ["link": "\(connection)"])
        await disconnect(connection)
    }

    func controllerLostDuringAttempt() {
        endAttempt(with: .lost)
    }
}
