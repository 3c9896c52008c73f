import Logging

/// The GAP roles of a node over one controller: advertise, scan, connect, accept connections.
/// It composes the layers below (HCI, L2CAP, an ATT bearer and GATT server per link) and holds no
/// exchange logic: what to do with a link is up to its caller.
///
/// It keeps what it believes the controller is doing (advertising, scanning, initiating) and checks
/// it against the controller: every refusal leads back to a known state, and `audit()` finds and
/// ends what the controller does without our knowing (see LEHost+Connecting and LEHost+Audit).
///
/// Every GAP procedure (start or stop advertising or scanning, set the address, connect, change
/// the address, audit, resume advertising after a link) runs whole, one at a time, in order of
/// submission (`ProcedureQueue`): the actor is reentrant, so without the queue one procedure's
/// commands could fall between another's across an `await`. Events are not procedures: a link's
/// opening and closing reach their owners while a procedure waits. Disconnect is not one either:
/// it changes no role of the controller, and a link's watchdog must not wait behind an attempt.
public actor LEHost {
    public struct Configuration: Sendable {
        /// Advertising interval in 0.625 ms units (spec); 0x0190 = 250 ms.
        public var advertisingInterval: UInt16 = 0x0190
        /// `advertisingInterval` as a duration.
        public var advertisingPeriod: Duration { .microseconds(Int64(advertisingInterval) * 625) }
        /// How long advertising stays on before a connection attempt may turn it off
        /// (`connect(advertisingOff:)`): a little over one advertising interval, so that peers hear
        /// at least one advertisement between two such attempts, also on a controller whose every
        /// enable restarts the interval. Back to back, two of them kept nodes of a 20-node crowd
        /// unheard for 2 to 3.5 s.
        public var advertisingHeldBeforeGoingQuiet: Duration {
            advertisingPeriod * 6 / 5
        }
        /// Scan interval and window in 0.625 ms units.
        public var scanInterval: UInt16 = 0x0060
        public var scanWindow: UInt16 = 0x0030
        /// Scan interval and window while initiating, in 0.625 ms units. An initiating controller
        /// cannot accept a peer's connection on strict controllers, so an attempt scans all the
        /// time and ends quickly rather than listening for a fraction of a longer time.
        public var initiatorScanInterval: UInt16 = 0x0030
        public var initiatorScanWindow: UInt16 = 0x0030
        public var connectionTimeout: Duration = .seconds(6)
        /// How long a cancelled connection attempt may take to report its end (LE Connection
        /// Complete, 0x02 or a late success) before the controller is taken to have ignored the cancel.
        public var cancelGrace: Duration = .seconds(2)
        /// A connection attempt is cancelled when its peer was heard advertising and no connection
        /// followed within this long (see `attemptPeerAdvertised`). Needs scanning on; without it
        /// the timeout alone ends an attempt. Real controllers report the connection when they
        /// send the connect request, or at the first connection event (30 ms at our interval);
        /// should one come after the cancel, it is the attempt's result all the same.
        public var unansweredAdvertisingWait: Duration = .milliseconds(100)
        /// Quirks of the controller known before it shows them (see `ControllerQuirks`); the
        /// host learns them anyway, at the first sign.
        public var knownQuirks: ControllerQuirks = []
        /// The models whose quirks the controller's identity selects (`ControllerQuirks.known(for:in:)`).
        public var controllerModels: [ControllerModel] = ControllerQuirks.knownModels
        /// Quirks the table of known models selects for this controller that the settings turn
        /// off (`ControllerQuirkChoice.removed`); `knownQuirks` still adds its own.
        public var tableQuirksTurnedOff: ControllerQuirks = []
        public var attBearer = ATTBearerConfiguration()
        public var hci = HostControllerInterface.Configuration()
        /// Where the host records what it asks of the radio (`RadioUse`), kept by the caller across
        /// hosts (controller sessions); nil keeps no account.
        public var radioTimeAccount: RadioTimeAccount?
        public init() {}
    }

    public nonisolated let hci: HostControllerInterface
    public nonisolated let incomingConnections: AsyncStream<LEConnection>
    public let controller: ControllerInfo
    public private(set) var randomAddress: BluetoothAddress?

    let l2cap: L2CAPLayer
    private let databaseForLink: DatabaseForLink
    let configuration: Configuration
    let logger: Logger
    let wallClock: any HostWallClock
    /// Every timeout of the host and the layers it opens runs on this clock, and so do the
    /// exchange's waits on top of it.
    public nonisolated let clock: any HostClock
    private let incomingContinuation: AsyncStream<LEConnection>.Continuation
    private let conditionContinuation: AsyncStream<RadioCondition>.Continuation
    /// Every change of `condition`, newest kept.
    public nonisolated let conditionChanges: AsyncStream<RadioCondition>

    /// Open links by handle, following L2CAP's table in its order.
    var connections: [UInt16: LEConnection] = [:]
    /// Links this host asked to close, by handle, until their Disconnection Complete (`watchDisconnection`).
    private var disconnectionWatches: [UInt16: Task<Void, Never>] = [:]
    /// The connection interval of each open link, by handle, for the radio's account.
    private var linkIntervals: [UInt16: Duration] = [:] { didSet { noteRadioUse() } }
    /// Whether the controller scans, as far as the answers to this host's own commands tell
    /// (`scanning` is whether the caller wants it).
    var scanEnabled = false { didSet { noteRadioUse() } }
    /// What was last recorded in the radio's account.
    private var recordedRadioUse = RadioUse.idle
    let procedures = ProcedureQueue()
    /// The procedure the current task runs, so that a call made from inside it (the `then` of an
    /// address change) runs as part of it instead of queueing behind it for ever. A task started
    /// inside a procedure inherits this: such a task must not call a procedure of this host.
    @TaskLocal static var currentProcedure: ProcedureQueue.Ticket?
    var attempt: ConnectionAttempt? { didSet { noteRadioUse() } }
    var attemptNumber: UInt64 = 0
    /// Peers of attempts that never reported their end: a connection that still forms is closed.
    var abandonedConnectionPeers: Set<BluetoothAddress> = []
    /// The quirks the controller has shown, and those the configuration knew of.
    public private(set) var quirks: ControllerQuirks

    private var scanContinuation: AsyncStream<AdvertisementSighting>.Continuation?
    /// What the caller asked for: the advertisement to keep on air, and whether to scan.
    var advertisement: LegacyAdvertisingPayload?
    /// Whether the controller advertises, as far as the answers to this host's own commands tell:
    /// cleared when a central connects to us, since legacy connectable advertising stops then.
    /// Advertising that is on is not enabled again: on a controller that restarts the advertising
    /// interval at every enable (the crowd tests' virtual controller does), a node re-enabling
    /// after each of its own central links (one every 100 to 250 ms in a crowd, against a 250 ms
    /// interval) went unheard for 2.7 s. On every controller, since a command not sent costs nothing.
    var advertisingIsOn: Bool {
        get { advertisingOnSince != nil }
        set { advertisingOnSince = newValue ? (advertisingOnSince ?? clock.now) : nil }
    }
    /// When advertising last came on, as far as this host knows (nil: off).
    private(set) var advertisingOnSince: ContinuousClock.Instant? { didSet { noteRadioUse() } }
    var scanning: Bool { scanContinuation != nil }
    var advertisingOutage = OutageRecord()
    var scanningOutage = OutageRecord()
    public private(set) var condition = RadioCondition()

    var lost = false { didSet { noteRadioUse() } }
    /// `close()` has closed the transport.
    private var closed = false { didSet { noteRadioUse() } }
    /// A resume of advertising is queued and has not begun: another request joins it.
    private var resumeQueued = false
    /// A connection attempt that turned advertising off is under way (`connect(advertisingOff:)`):
    /// it resumes advertising itself if it connects, and otherwise its caller decides, since the
    /// controller may then be stuck; a peer's link meanwhile asks for no resume.
    var quietAttemptUnderWay = false
    private let loss = OnceSignal<Void>()

    /// Builds the GATT database a new link is served from. Per link, so that write handlers know
    /// which peer wrote.
    public typealias DatabaseForLink = @Sendable (LinkPeer) throws -> GATTDatabase

    /// Opens the controller behind `transport` with the same GATT database on every link.
    public static func open(
        transport: any HCITransport, database: GATTDatabase, configuration: Configuration = Configuration(),
        logger: Logger = Logger(label: "tracer.gap")
    ) async throws(GAPError) -> LEHost {
        try await open(transport: transport, databaseForLink: { _ in database }, configuration: configuration, logger: logger)
    }

    /// Opens the controller behind `transport`, runs the init sequence (which resets it) and sets
    /// a fresh non-resolvable private address.
    public static func open(
        transport: any HCITransport, databaseForLink: @escaping DatabaseForLink, configuration: Configuration = Configuration(),
        wallClock: any HostWallClock = SystemHostWallClock(), clock: any HostClock = SystemHostClock(),
        logger: Logger = Logger(label: "tracer.gap")
    ) async throws(GAPError) -> LEHost {
        let hci = HostControllerInterface(transport: transport, configuration: configuration.hci, clock: clock, logger: logger)
        let events = await hci.events()
        let l2cap = await L2CAPLayer(hci: hci, clock: clock, logger: logger)
        let controller: ControllerInfo
        do {
            controller = try await hci.initialize()
        } catch {
            await hci.close()
            throw .hci(error)
        }
        let host = LEHost(hci: hci, l2cap: l2cap, controller: controller, databaseForLink: databaseForLink,
                          configuration: configuration, wallClock: wallClock, clock: clock, logger: logger)
        let known = await host.quirks
        if !known.isEmpty {
            logger.info("controller quirks known from the start", metadata: [
                "quirks": "\(known)", "company": "0x\(String(controller.version.companyIdentifier, radix: 16))"])
        }
        await host.listen(to: events, links: l2cap.links)
        try await host.setRandomAddress(.randomNonResolvablePrivate())
        return host
    }

    private init(hci: HostControllerInterface, l2cap: L2CAPLayer, controller: ControllerInfo,
                 databaseForLink: @escaping DatabaseForLink, configuration: Configuration, wallClock: any HostWallClock,
                 clock: any HostClock, logger: Logger) {
        self.hci = hci
        self.l2cap = l2cap
        self.controller = controller
        self.databaseForLink = databaseForLink
        self.configuration = configuration
        self.wallClock = wallClock
        self.clock = clock
        self.logger = logger
        quirks = ControllerQuirkChoice(added: configuration.knownQuirks, removed: configuration.tableQuirksTurnedOff)
            .applied(to: ControllerQuirks.known(for: controller.version, in: configuration.controllerModels))
        (incomingConnections, incomingContinuation) = AsyncStream.makeStream(of: LEConnection.self)
        (conditionChanges, conditionContinuation) = AsyncStream.makeStream(
            of: RadioCondition.self, bufferingPolicy: .bufferingNewest(1))
    }

    /// Sets the address used for advertising, scanning and connecting. The controller refuses
    /// this while advertising, scanning or initiating with it: see `changeRandomAddress`.
    public func setRandomAddress(_ address: BluetoothAddress) async throws(GAPError) {
        try await procedure { () async throws(GAPError) in try await self.setRandomAddressNow(address) }
    }

    func setRandomAddressNow(_ address: BluetoothAddress) async throws(GAPError) {
        try await command { () async throws(HCIError) in try await self.hci.send(LESetRandomAddress(address: address)) }
        randomAddress = address
    }

    // MARK: Advertising

    /// Advertises `data` as connectable, undirected, from the random address. Advertising is
    /// re-enabled after every connection and disconnection, since controllers stop it when a
    /// central connects.
    public func startAdvertising(_ data: AdvertisingData) async throws(GAPError) {
        let payload: LegacyAdvertisingPayload
        do { payload = try LegacyAdvertisingPayload(data) } catch { throw .advertisingDataTooLong((try? data.encode())?.count ?? 0) }
        try await procedure { () async throws(GAPError) in
            self.advertisement = payload
            do throws(GAPError) {
                try await self.enableAdvertising(payload)
            } catch {
                self.noteAdvertising(failed: error)
                throw error
            }
            self.noteAdvertisingWorks()
        }
    }

    func enableAdvertising(_ payload: LegacyAdvertisingPayload) async throws(GAPError) {
        let interval = configuration.advertisingInterval
        try await command { () async throws(HCIError) in
            // Parameters before every enable: enabled without them, some controllers advertise at
            // an interval of 0, a flood. On every controller, as Linux's hci_enable_advertising_sync
            // does, since one command per enable costs nothing.
            do throws(HCIError) {
                try await self.hci.send(LESetAdvertisingParameters(intervalMin: interval, intervalMax: interval))
            } catch {
                guard case .commandFailed(_, .commandDisallowed) = error else { throw error }
                // Refused only while advertising is on (Core Vol 4 Part E 7.8.5), which the audit
                // relies on too: the controller advertises although this host did not know it.
                // Before procedures ran one at a time, another path (the resume after a link)
                // turned it on between the audit's question and this; taken as a failure, that
                // left a node in a 20-node crowd reporting advertising off for 3 s while the
                // listener heard it throughout. The data may still change while on.
                try await self.hci.send(LESetAdvertisingData(payload))
                self.advertisingIsOn = true
                return
            }
            try await self.hci.send(LESetAdvertisingData(payload))
            try await self.sendAdvertisingEnable(true)
        }
    }

    /// The one way this host turns advertising on or off, so that `advertisingIsOn` follows what
    /// the controller accepted.
    func sendAdvertisingEnable(_ enable: Bool) async throws(HCIError) {
        try await hci.send(LESetAdvertisingEnable(enable))
        advertisingOnSince = enable ? clock.now : nil
    }

    public var isAdvertising: Bool { advertisement != nil }

    public func stopAdvertising() async throws(GAPError) {
        try await procedure { () async throws(GAPError) in
            self.withdrawAdvertising()
            try await self.command { () async throws(HCIError) in try await self.sendAdvertisingEnable(false) }
        }
    }

    /// Nobody wants advertising any more: no outage to report, no resume to run.
    func withdrawAdvertising() {
        advertisement = nil
        _ = advertisingOutage.recovered()
        publishCondition()
    }

    // MARK: Scanning

    /// Starts scanning and returns the advertisements heard, until `stopScanning()`. A consumer
    /// that falls behind loses the oldest reports, never memory.
    public func startScanning() async throws(GAPError) -> AsyncStream<AdvertisementSighting> {
        try await procedure { () async throws(GAPError) -> AsyncStream<AdvertisementSighting> in
            self.scanContinuation?.finish()
            let (stream, continuation) = AsyncStream.makeStream(
                of: AdvertisementSighting.self, bufferingPolicy: .bufferingNewest(512))
            self.scanContinuation = continuation
            do throws(GAPError) {
                try await self.enableScanning()
            } catch {
                self.scanContinuation?.finish()
                self.scanContinuation = nil
                self.noteScanning(failed: error)
                throw error
            }
            self.noteScanningWorks()
            return stream
        }
    }

    func enableScanning() async throws(GAPError) {
        let interval = configuration.scanInterval
        let window = configuration.scanWindow
        try await command { () async throws(HCIError) in
            try await self.hci.send(LESetScanParameters(scanType: .passive, interval: interval, window: window))
            try await self.hci.send(LESetScanEnable(true, filterDuplicates: false))
            self.scanEnabled = true
        }
    }

    public func stopScanning() async throws(GAPError) {
        try await procedure { () async throws(GAPError) in try await self.stopScanningNow() }
    }

    func stopScanningNow() async throws(GAPError) {
        scanContinuation?.finish()
        scanContinuation = nil
        // Off whether or not the controller answers: the host asked, and no longer counts on it.
        defer { scanEnabled = false }
        try await command { () async throws(HCIError) in try await self.hci.send(LESetScanEnable(false)) }
    }

    // MARK: Links

    /// How long a Disconnect the controller accepted may take to end the link (Disconnection
    /// Complete): the longest supervision timeout the specification allows (32 s, Core Vol 6 Part
    /// B 4.5.2), by which a link whose peer stopped answering has ended, and a second more.
    public static let disconnectionCompleteWait: Duration = .seconds(33)

    public func disconnect(_ connection: LEConnection, reason: HCIStatusCode = .remoteUserTerminatedConnection) async {
        guard connection.isConnected else { return }
        do {
            try await hci.send(Disconnect(connectionHandle: connection.handle, reason: reason))
            watchDisconnection(of: connection)
        } catch HCIError.commandFailed(_, .unknownConnectionIdentifier) {
            // The controller no longer knows the link: it ended without telling us. Close our side,
            // HCI's credits and queued sends for it included (`disconnectionNeverCompleted`).
            await hci.abandonConnection(handle: connection.handle)
            await l2cap.linkVanished(connection.channel)
        } catch {
            logger.debug("disconnect refused", metadata: ["link": "\(connection)", "error": "\(error)"])
        }
    }

    /// Event: the link's Disconnection Complete (which cancels this, `handle(_: LinkEvent)`);
    /// timer: `disconnectionCompleteWait`. A controller that accepted the Disconnect and never
    /// completed it left the link open here for ever, and its owner waiting for its end.
    private func watchDisconnection(of connection: LEConnection) {
        guard connection.isConnected, disconnectionWatches[connection.handle] == nil else { return }
        disconnectionWatches[connection.handle] = clock.timer(after: Self.disconnectionCompleteWait) { [weak self] in
            await self?.disconnectionNeverCompleted(connection)
        }
    }

    private func disconnectionNeverCompleted(_ connection: LEConnection) async {
        disconnectionWatches[connection.handle] = nil
        guard connection.isConnected else { return }
        logger.warning("the controller accepted a disconnect and never completed it; closing the link on this side",
                       metadata: ["link": "\(connection)"])
        // HCI too: the link's ACL buffer credits and queued sends, which only a Disconnection
        // Complete would otherwise release, or a few such links would starve every later one.
        await hci.abandonConnection(handle: connection.handle)
        await l2cap.linkVanished(connection.channel)
    }

    /// Open links, for closing them all before an address change.
    public var openConnections: [LEConnection] { Array(connections.values) }

    public var controllerLost: Bool { lost }

    /// Returns when the transport to the controller is gone, or when the calling task is cancelled.
    public func waitUntilLost() async {
        if lost { return }
        _ = await loss.wait()
    }

    /// Ends a connection attempt, stops advertising and scanning, closes every link, then the
    /// transport. Advertising is stopped first on every controller: some keep advertising after
    /// their host's transport closes, luring peers to a node that no longer answers, and one
    /// command at the close costs nothing. Goes before the procedures still waiting.
    public func close() async {
        if !lost {
            // Withdrawn at once, as an address change does: an attempt still holding advertising
            // on for peers then gives up instead of running its course first.
            let wasAdvertising = advertisement != nil
            withdrawAdvertising()
            abandonConnectionAttempt()
            try? await procedure(urgent: true) { () async throws(GAPError) in
                if wasAdvertising || self.advertisingIsOn {
                    try? await self.command { () async throws(HCIError) in try await self.sendAdvertisingEnable(false) }
                }
                if self.scanning { try? await self.stopScanningNow() }
                for connection in self.connections.values { await self.disconnect(connection) }
            }
        }
        await hci.close()
        // Nothing is on from here: the end of the event stream, which tells `controllerWentAway`,
        // may come later than this.
        closed = true
    }

    // MARK: Events

    private func listen(to events: AsyncStream<HCIEvent>, links: AsyncStream<LinkEvent>) {
        Task { [weak self] in
            for await event in events { await self?.handle(event) }
            await self?.controllerWentAway()
        }
        Task { [weak self] in
            for await event in links { await self?.handle(event) }
        }
    }

    private func handle(_ event: HCIEvent) {
        switch event {
        case .leMeta(let meta):
            let now = clock.now
            for sighting in meta.sightings {
                if attempt != nil { attemptPeerAdvertised(sighting.address, at: now) }
                scanContinuation?.yield(sighting)
            }
        case .hardwareError(let code):
            logger.error("controller reported a hardware error", metadata: ["code": "\(code)"])
        default:
            break
        }
    }

    /// Links open and close here in the order L2CAP's table saw them.
    private func handle(_ event: LinkEvent) async {
        switch event {
        case .connectionComplete(let completion, let channel):
            let role = completion.role ?? .peripheral
            logger.trace("LE connection complete", metadata: [
                "handle": "\(completion.connectionHandle)", "role": "\(role)", "peer": "\(completion.peerAddress)",
                "status": "\(completion.status)",
            ])
            let connection = channel.map { register(completion, role: role, channel: $0) }
            if role == .central {
                await centralConnectionCompleted(completion, connection: connection)
            } else if let connection {
                incomingContinuation.yield(connection)
                advertisingIsOn = false
                requestAdvertisingResume()
            }
        case .closed(let handle, let reason):
            guard let connection = connections.removeValue(forKey: handle) else { return }
            disconnectionWatches.removeValue(forKey: handle)?.cancel()
            linkIntervals[handle] = nil
            connection.markDisconnected(reason: reason)
            await connection.bearer.close()
            logger.debug("disconnected", metadata: ["link": "\(connection)", "reason": "\(reason)"])
            // A controller that could not advertise beside a peripheral link can now.
            requestAdvertisingResume()
        }
    }

    private func register(_ event: LEConnectionCompleteEvent, role: LERole, channel: L2CAPChannel) -> LEConnection {
        let peer = LinkPeer(handle: event.connectionHandle, role: role, address: event.peerAddress,
                            addressType: event.peerAddressType)
        let server: GATTServer?
        do {
            server = GATTServer(database: try databaseForLink(peer))
        } catch {
            // The link still works as a client; its peer finds no services.
            logger.error("no GATT database for a link", metadata: ["link": "\(peer)", "error": "\(error)"])
            server = nil
        }
        let bearer = ATTBearer(channel: channel, configuration: configuration.attBearer, serverHandler: server, clock: clock)
        let connection = LEConnection(peer: peer, bearer: bearer, channel: channel)
        connections[connection.handle] = connection
        linkIntervals[connection.handle] = .microseconds(Int64(event.connectionInterval) * 1250)
        logger.debug("connected", metadata: ["link": "\(connection)"])
        return connection
    }

    /// Asks for advertising to be re-enabled (a central connected to us, which stops it, or a link
    /// closed): off the event path, since the event loop must keep up with the controller, and
    /// one resume for a flood of connections, not two commands each. A connection attempt that
    /// leaves advertising on resumes it within its own turn (`ConnectionAttempt.advertisingWanted`);
    /// otherwise the resume is a procedure of its own that goes before those still waiting.
    /// Behind them, it waited for one or two attempts that then turned advertising off
    /// themselves, and a node of a 20-node crowd went unheard for 3.5 s.
    func requestAdvertisingResume() {
        guard advertisement != nil, !advertisingIsOn, !quietAttemptUnderWay else { return }
        resumeAdvertisingWithinAttempt()
        guard !resumeQueued else { return }
        resumeQueued = true
        let ticket = procedures.submit(urgent: true)
        Task { await self.resumeAdvertising(ticket) }
    }

    private func resumeAdvertising(_ ticket: ProcedureQueue.Ticket) async {
        try? await run(ticket) { () async throws(GAPError) in
            self.resumeQueued = false
            await self.resumeAdvertisingNow()
        }
    }

    /// Turns advertising on again if it is wanted and off. Call inside a procedure.
    func resumeAdvertisingNow() async {
        guard advertisement != nil, !lost, !advertisingIsOn else { return }
        do throws(HCIError) {
            try await sendAdvertisingEnable(true)
            noteAdvertisingWorks()
        } catch {
            if case .commandFailed(_, .commandDisallowed) = error {
                // Already advertising on older controllers, or refused for now: the audit checks which.
            } else if advertisement != nil, !lost {
                logger.warning("could not resume advertising", metadata: ["error": "\(error)"])
                noteAdvertising(failed: .hci(error))
            }
        }
    }

    private func controllerWentAway() {
        lost = true
        loss.fire(())
        for connection in connections.values { connection.markDisconnected(reason: .connectionTerminatedByLocalHost) }
        connections.removeAll()
        for watch in disconnectionWatches.values { watch.cancel() }
        disconnectionWatches.removeAll()
        linkIntervals.removeAll()
        scanContinuation?.finish()
        incomingContinuation.finish()
        controllerLostDuringAttempt()
        conditionContinuation.finish()
    }

    func command(_ body: () async throws(HCIError) -> Void) async throws(GAPError) {
        do { try await body() } catch { throw lost ? .controllerLost : .hci(error) }
    }

    // MARK: Procedures

    /// Runs `body` as one procedure, once every procedure submitted before it has ended (an urgent
    /// one goes before those still waiting). Inside a procedure, `body` runs at once as part of it.
    /// Throws `.cancelled` if the calling task is cancelled while it waits.
    func procedure<Result>(
        urgent: Bool = false, _ body: () async throws(GAPError) -> Result
    ) async throws(GAPError) -> Result {
        if let current = Self.currentProcedure, procedures.isRunning(current) { return try await body() }
        return try await run(procedures.submit(urgent: urgent), body)
    }

    /// Runs `body` in the turn of `ticket`, a place taken earlier.
    func run<Result>(
        _ ticket: ProcedureQueue.Ticket, _ body: () async throws(GAPError) -> Result
    ) async throws(GAPError) -> Result {
        do { try await procedures.awaitTurn(ticket) } catch { throw .cancelled }
        defer { procedures.finish(ticket) }
        do {
            return try await Self.$currentProcedure.withValue(ticket) { try await body() }
        } catch let error as GAPError {
            throw error
        } catch {
            preconditionFailure("a procedure's body throws only GAPError: \(error)")
        }
    }

    /// Procedures waiting for their turn, for tests and diagnostics.
    package var waitingProcedures: Int { procedures.waitingCount }

    func noteQuirk(_ quirk: ControllerQuirks, _ message: Logger.Message) {
        guard !quirks.contains(quirk) else { return }
        quirks.insert(quirk)
        logger.info(message, metadata: ["quirk": "\(quirk)"])
    }

    // MARK: Condition

    func noteAdvertising(failed error: GAPError) {
        guard advertisement != nil, !lost else { return }
        if advertisingOutage.failed("\(error)", at: wallClock.unixSeconds()) {
            logger.warning("advertising is off: peers cannot find this node", metadata: ["error": "\(error)"])
        }
        publishCondition()
    }

    func noteAdvertisingWorks() {
        if let ended = advertisingOutage.recovered() {
            logger.notice("advertising again", metadata: ["offFor": "\(wallClock.unixSeconds() - ended.since)s"])
        }
        publishCondition()
    }

    func noteScanning(failed error: GAPError) {
        guard !lost else { return }
        if scanningOutage.failed("\(error)", at: wallClock.unixSeconds()) {
            logger.warning("scanning is off: this node cannot find peers", metadata: ["error": "\(error)"])
        }
        publishCondition()
    }

    func noteScanningWorks() {
        if let ended = scanningOutage.recovered() {
            logger.notice("scanning again", metadata: ["offFor": "\(wallClock.unixSeconds() - ended.since)s"])
        }
        publishCondition()
    }

    // MARK: The radio's account

    /// What the controller was asked to do and accepted, for the radio's account.
    private var radioUse: RadioUse {
        guard !lost, !closed else { return .idle }
        var use = RadioUse(links: linkIntervals)
        if advertisingIsOn { use.advertisingInterval = configuration.advertisingPeriod }
        if scanEnabled {
            use.scanning = .init(windowUnits: configuration.scanWindow, intervalUnits: configuration.scanInterval)
        }
        // From the controller's acceptance of LE Create Connection to the end it reported (or to
        // the host giving up on one that never came).
        if let attempt, attempt.initiatingSince != nil, attempt.ended == nil {
            use.initiating = .init(windowUnits: configuration.initiatorScanWindow, intervalUnits: configuration.initiatorScanInterval)
        }
        return use
    }

    /// Records what the radio does now, when it changed; called whenever a state it depends on does.
    private func noteRadioUse() {
        guard let account = configuration.radioTimeAccount else { return }
        let use = radioUse
        guard use != recordedRadioUse else { return }
        recordedRadioUse = use
        account.record(use)
    }

    func publishCondition() {
        var next = condition
        next.advertising = advertisingOutage.outage
        next.scanning = scanningOutage.outage
        guard next != condition else { return }
        condition = next
        conditionContinuation.yield(next)
    }
}
