import Logging

/// The GAP roles of a node over one controller: advertise, scan, connect, accept connections.
/// It composes the layers below (HCI, L2CAP, an ATT bearer and GATT server per link) and holds no
/// exchange logic: what to do with a link is up to its caller.
public actor LEHost {
    public struct Configuration: Sendable {
        /// Advertising interval in 0.625 ms units (spec); 0x0190 = 250 ms.
        public var advertisingInterval: UInt16 = 0x0190
        /// Scan interval and window in 0.625 ms units.
        public var scanInterval: UInt16 = 0x0060
        public var scanWindow: UInt16 = 0x0030
        public var connectionTimeout: Duration = .seconds(6)
        public var attBearer = ATTBearerConfiguration()
        public var hci = HostControllerInterface.Configuration()
        public init() {}
    }

    public nonisolated let hci: HostControllerInterface
    public nonisolated let incomingConnections: AsyncStream<LEConnection>
    public let controller: ControllerInfo
    public private(set) var randomAddress: BluetoothAddress?

    private let l2cap: L2CAPLayer
    private let databaseForLink: DatabaseForLink
    private let configuration: Configuration
    private let logger: Logger
    private let incomingContinuation: AsyncStream<LEConnection>.Continuation
    private var connections: [UInt16: LEConnection] = [:]
    private var pendingConnection: PendingConnection?
    private var abandonedConnectionPeers: Set<BluetoothAddress> = []
    private var scanContinuation: AsyncStream<AdvertisementSighting>.Continuation?
    private var advertisement: LegacyAdvertisingPayload?
    private var lost = false
    private var resumeRequested = false
    private var resumeRunning = false
    private var lossWaiters: [Int: CheckedContinuation<Void, Never>] = [:]
    private var lossWaiterCount = 0

    private var connectSlotTaken = false
    private var connectSlotWaiters: [CheckedContinuation<Void, Never>] = []

    private struct PendingConnection {
        let peer: BluetoothAddress
        let continuation: CheckedContinuation<LEConnectionCompleteEvent, any Error>
        let deadline: Task<Void, Never>
    }

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

    /// Opens the controller behind `transport`, runs the init sequence and sets a fresh
    /// non-resolvable private address.
    public static func open(
        transport: any HCITransport, databaseForLink: @escaping DatabaseForLink, configuration: Configuration = Configuration(),
        logger: Logger = Logger(label: "tracer.gap")
    ) async throws(GAPError) -> LEHost {
        let hci = HostControllerInterface(transport: transport, configuration: configuration.hci, logger: logger)
        let events = await hci.events()
        let l2cap = await L2CAPLayer(hci: hci, logger: logger)
        let controller: ControllerInfo
        do {
            controller = try await hci.initialize()
        } catch {
            await hci.close()
            throw .hci(error)
        }
        let host = LEHost(hci: hci, l2cap: l2cap, controller: controller, databaseForLink: databaseForLink,
                          configuration: configuration, logger: logger)
        await host.listen(to: events)
        try await host.setRandomAddress(.randomNonResolvablePrivate())
        return host
    }

    private init(hci: HostControllerInterface, l2cap: L2CAPLayer, controller: ControllerInfo,
                 databaseForLink: @escaping DatabaseForLink, configuration: Configuration, logger: Logger) {
        self.hci = hci
        self.l2cap = l2cap
        self.controller = controller
        self.databaseForLink = databaseForLink
        self.configuration = configuration
        self.logger = logger
        (incomingConnections, incomingContinuation) = AsyncStream.makeStream(of: LEConnection.self)
    }

    /// Sets the address used for advertising, scanning and connecting. The controller refuses
    /// this while advertising or scanning with it, so callers stop those first.
    public func setRandomAddress(_ address: BluetoothAddress) async throws(GAPError) {
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
        let interval = configuration.advertisingInterval
        try await command { () async throws(HCIError) in
            // Parameters always before enabling: Bumble floods with an interval of 0 otherwise.
            try await self.hci.send(LESetAdvertisingParameters(intervalMin: interval, intervalMax: interval))
            try await self.hci.send(LESetAdvertisingData(payload))
            try await self.hci.send(LESetAdvertisingEnable(true))
        }
        advertisement = payload
    }

    public var isAdvertising: Bool { advertisement != nil }

    public func stopAdvertising() async throws(GAPError) {
        advertisement = nil
        try await command { () async throws(HCIError) in try await self.hci.send(LESetAdvertisingEnable(false)) }
    }

    // MARK: Scanning

    /// Starts scanning and returns the advertisements heard, until `stopScanning()`. A consumer
    /// that falls behind loses the oldest reports, never memory.
    public func startScanning() async throws(GAPError) -> AsyncStream<AdvertisementSighting> {
        scanContinuation?.finish()
        let (stream, continuation) = AsyncStream.makeStream(
            of: AdvertisementSighting.self, bufferingPolicy: .bufferingNewest(512))
        scanContinuation = continuation
        let interval = configuration.scanInterval
        let window = configuration.scanWindow
        try await command { () async throws(HCIError) in
            try await self.hci.send(LESetScanParameters(scanType: .passive, interval: interval, window: window))
            try await self.hci.send(LESetScanEnable(true, filterDuplicates: false))
        }
        return stream
    }

    public func stopScanning() async throws(GAPError) {
        scanContinuation?.finish()
        scanContinuation = nil
        try await command { () async throws(HCIError) in try await self.hci.send(LESetScanEnable(false)) }
    }

    // MARK: Connections

    /// Connects to `peer` as central. After the timeout the attempt is cancelled; a connection
    /// that still completes afterwards (Bumble does that) is closed at once.
    public func connect(
        to peer: BluetoothAddress, type: LEAddressType, timeout: Duration? = nil
    ) async throws(GAPError) -> LEConnection {
        if lost { throw .controllerLost }
        // The controller allows one LE Create Connection at a time: callers queue here.
        await acquireConnectSlot()
        defer { releaseConnectSlot() }
        let timeout = timeout ?? configuration.connectionTimeout
        let event: LEConnectionCompleteEvent
        do {
            event = try await withCheckedThrowingContinuation { continuation in
                let deadline = Task { [weak self] in
                    guard (try? await Task.sleep(for: timeout)) != nil else { return }
                    await self?.abandonConnecting(to: peer, after: timeout)
                }
                pendingConnection = PendingConnection(peer: peer, continuation: continuation, deadline: deadline)
                Task { await self.sendCreateConnection(to: peer, type: type) }
            }
        } catch let error as GAPError {
            throw error
        } catch {
            throw .controllerLost
        }
        guard event.status.isSuccess else { throw .connectionFailed(peer: peer, status: event.status) }
        guard let connection = connections[event.connectionHandle] else { throw .controllerLost }
        return connection
    }

    private func sendCreateConnection(to peer: BluetoothAddress, type: LEAddressType) async {
        do {
            try await hci.send(LECreateConnection(peerAddressType: type, peerAddress: peer))
        } catch {
            finishPendingConnection(for: peer, with: .failure(lost ? .controllerLost : .hci(error)))
        }
    }

    private func abandonConnecting(to peer: BluetoothAddress, after timeout: Duration) async {
        guard pendingConnection?.peer == peer else { return }
        abandonedConnectionPeers.insert(peer)
        finishPendingConnection(for: peer, with: .failure(.connectionTimedOut(peer: peer, after: timeout)))
        _ = try? await hci.send(LECreateConnectionCancel())
    }

    private func finishPendingConnection(for peer: BluetoothAddress?, with result: Result<LEConnectionCompleteEvent, GAPError>) {
        guard let pending = pendingConnection, peer == nil || pending.peer == peer else { return }
        pendingConnection = nil
        pending.deadline.cancel()
        pending.continuation.resume(with: result.mapError { $0 as any Error })
    }

    /// Abandons a connection attempt in progress (the address cannot change while initiating).
    public func cancelPendingConnection() async {
        guard let peer = pendingConnection?.peer else { return }
        await abandonConnecting(to: peer, after: .zero)
    }

    private func acquireConnectSlot() async {
        guard connectSlotTaken else {
            connectSlotTaken = true
            return
        }
        await withCheckedContinuation { connectSlotWaiters.append($0) }
    }

    private func releaseConnectSlot() {
        if connectSlotWaiters.isEmpty {
            connectSlotTaken = false
        } else {
            connectSlotWaiters.removeFirst().resume()
        }
    }

    public func disconnect(_ connection: LEConnection, reason: HCIStatusCode = .remoteUserTerminatedConnection) async {
        guard connection.isConnected else { return }
        do {
            try await hci.send(Disconnect(connectionHandle: connection.handle, reason: reason))
        } catch HCIError.commandFailed(_, .unknownConnectionIdentifier) {
            // The controller no longer knows the link: it ended without telling us. Close our side.
            await forget(connection, reason: .unknownConnectionIdentifier)
        } catch {
            logger.debug("disconnect refused", metadata: ["link": "\(connection)", "error": "\(error)"])
        }
    }

    /// Ends our side of a link: its bearer, its L2CAP channel and anyone waiting on it.
    private func forget(_ connection: LEConnection, reason: HCIStatusCode) async {
        if connections[connection.handle] === connection { connections[connection.handle] = nil }
        connection.markDisconnected(reason: reason)
        await connection.bearer.close()
        await l2cap.connectionClosed(handle: connection.handle)
    }

    /// Open links, for closing them all before an address change.
    public var openConnections: [LEConnection] { Array(connections.values) }

    public var controllerLost: Bool { lost }

    /// Returns when the transport to the controller is gone, or when the calling task is cancelled.
    public func waitUntilLost() async {
        if lost || Task.isCancelled { return }
        lossWaiterCount += 1
        let waiter = lossWaiterCount
        await withTaskCancellationHandler {
            // Registered before the first suspension, so the cancellation hop below always finds it.
            await withCheckedContinuation { lossWaiters[waiter] = $0 }
        } onCancel: {
            Task { await self.releaseLossWaiter(waiter) }
        }
    }

    private func releaseLossWaiter(_ waiter: Int) {
        lossWaiters.removeValue(forKey: waiter)?.resume()
    }

    /// Stops advertising and scanning, closes every link, then the transport. Controllers keep
    /// advertising after their host goes away (Bumble's do), which would lure peers to a node
    /// that no longer answers.
    public func close() async {
        if !lost {
            if advertisement != nil { try? await stopAdvertising() }
            if scanContinuation != nil { try? await stopScanning() }
            for connection in connections.values { await disconnect(connection) }
        }
        await hci.close()
    }

    // MARK: Events

    private func listen(to events: AsyncStream<HCIEvent>) {
        Task { [weak self] in
            for await event in events { await self?.handle(event) }
            await self?.controllerWentAway()
        }
    }

    private func handle(_ event: HCIEvent) async {
        switch event {
        case .leMeta(let meta):
            if let completion = meta.connectionComplete {
                await connectionCompleted(completion)
            } else if let continuation = scanContinuation {
                for sighting in meta.sightings { continuation.yield(sighting) }
            }
        case .disconnectionComplete(let event) where event.status.isSuccess:
            logger.trace("disconnection complete", metadata: ["handle": "\(event.connectionHandle)", "reason": "\(event.reason)"])
            guard let connection = connections.removeValue(forKey: event.connectionHandle) else { return }
            connection.markDisconnected(reason: event.reason)
            await connection.bearer.close()
            logger.debug("disconnected", metadata: ["link": "\(connection)", "reason": "\(event.reason)"])
            requestAdvertisingResume()
        case .hardwareError(let code):
            logger.error("controller reported a hardware error", metadata: ["code": "\(code)"])
        default:
            break
        }
    }

    private func connectionCompleted(_ event: LEConnectionCompleteEvent) async {
        let role = event.role ?? .peripheral
        logger.trace("LE connection complete", metadata: [
            "handle": "\(event.connectionHandle)", "role": "\(role)", "peer": "\(event.peerAddress)", "status": "\(event.status)",
        ])
        if role == .central, let pending = pendingConnection, pending.peer == event.peerAddress || !event.status.isSuccess {
            // Claimed before the await below, so that the deadline cannot also answer it.
            pendingConnection = nil
            pending.deadline.cancel()
            if event.status.isSuccess { await register(event, role: role) }
            pending.continuation.resume(returning: event)
            return
        }
        guard event.status.isSuccess else { return }
        let connection = await register(event, role: role)
        if role == .central, abandonedConnectionPeers.remove(event.peerAddress) != nil {
            logger.debug("closing a connection that completed after its attempt was abandoned", metadata: ["link": "\(connection)"])
            await disconnect(connection)
            return
        }
        if role == .peripheral {
            incomingContinuation.yield(connection)
            requestAdvertisingResume()
        }
    }

    @discardableResult
    private func register(_ event: LEConnectionCompleteEvent, role: LERole) async -> LEConnection {
        if let stale = connections[event.connectionHandle] {
            // The controller reused a handle whose Disconnection Complete never came (Bumble can
            // drop it): the old link is gone, and its channel must not carry the new link's data.
            logger.debug("handle reused; closing the stale link", metadata: ["link": "\(stale)"])
            await forget(stale, reason: .unknownConnectionIdentifier)
        }
        let peer = LinkPeer(handle: event.connectionHandle, role: role, address: event.peerAddress,
                            addressType: event.peerAddressType)
        let channel = await l2cap.attChannel(connectionHandle: event.connectionHandle)
        let server: GATTServer?
        do {
            server = GATTServer(database: try databaseForLink(peer))
        } catch {
            // The link still works as a client; its peer finds no services.
            logger.error("no GATT database for a link", metadata: ["link": "\(peer)", "error": "\(error)"])
            server = nil
        }
        let bearer = ATTBearer(channel: channel, configuration: configuration.attBearer, serverHandler: server)
        let connection = LEConnection(peer: peer, bearer: bearer)
        connections[connection.handle] = connection
        logger.debug("connected", metadata: ["link": "\(connection)"])
        return connection
    }

    /// Asks for advertising to be re-enabled, off the event path: the event loop must keep up with
    /// the controller (a lagging loop hands a new link's L2CAP channel to an older link that had the
    /// same handle), and a flood of connections needs only one re-enable, not two commands each.
    private func requestAdvertisingResume() {
        guard advertisement != nil else { return }
        resumeRequested = true
        guard !resumeRunning else { return }
        resumeRunning = true
        Task { await self.resumeAdvertising() }
    }

    private func resumeAdvertising() async {
        defer { resumeRunning = false }
        while resumeRequested {
            resumeRequested = false
            guard advertisement != nil else { return }
            do {
                try await hci.send(LESetAdvertisingEnable(true))
            } catch HCIError.commandFailed(_, .commandDisallowed) {
                // Already advertising: nothing to do.
            } catch where advertisement != nil && !lost {
                logger.warning("could not resume advertising", metadata: ["error": "\(error)"])
            } catch {
                return  // closing or lost
            }
        }
    }

    private func controllerWentAway() {
        lost = true
        for waiter in lossWaiters.values { waiter.resume() }
        lossWaiters = [:]
        for connection in connections.values { connection.markDisconnected(reason: .connectionTerminatedByLocalHost) }
        connections.removeAll()
        scanContinuation?.finish()
        incomingContinuation.finish()
        finishPendingConnection(for: nil, with: .failure(.controllerLost))
    }

    private func command(_ body: () async throws(HCIError) -> Void) async throws(GAPError) {
        do { try await body() } catch { throw lost ? .controllerLost : .hci(error) }
    }
}
