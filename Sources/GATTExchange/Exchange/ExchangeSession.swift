import BLEHost
import IDRotation
import Logging
import Synchronization
import TracerCore

/// The exchange on one controller for as long as the controller stays: opens the host, takes the
/// current id, and rotates the radio with every new id. `ExchangeSupervisor` starts a new session
/// when the controller comes back.
public struct ExchangeSession: Sendable {
    public let transport: TransportSpec
    public let rotator: IDRotator
    public let sink: any EncounterSink
    public let configuration: ExchangeConfiguration
    public let logger: Logger
    /// The host's clock, for every session's host and the waits between sessions; tests pass a
    /// manual one to run minutes of the exchange, resets included, in seconds.
    public let clock: any HostClock
    /// Opens the transport; tests wrap it to record the HCI traffic.
    public let openTransport: @Sendable (TransportSpec) throws(HCITransportError) -> any HCITransport
    /// When to scan, shared by every session: a session after a reset keeps the bursts' rhythm.
    public let scanSchedule: ScanSchedule
    /// The address of each id, shared by every session: a reset does not change it.
    public let addresses = IDAddresses()

    public init(transport: TransportSpec, rotator: IDRotator, sink: any EncounterSink,
                configuration: ExchangeConfiguration = ExchangeConfiguration(),
                logger: Logger = Logger(label: "tracer.exchange"),
                clock: any HostClock = SystemHostClock(),
                openTransport: @escaping @Sendable (TransportSpec) throws(HCITransportError) -> any HCITransport = {
                    spec throws(HCITransportError) in try openHCITransport(spec)
                }) {
        self.transport = transport
        self.rotator = rotator
        self.sink = sink
        self.configuration = configuration
        self.logger = logger
        self.clock = clock
        self.openTransport = openTransport
        scanSchedule = ScanSchedule(
            onTime: configuration.scanOnTime, offTime: configuration.scanOffTime,
            start: clock.now + ScanSchedule.firstBurstDelay(onTime: configuration.scanOnTime, offTime: configuration.scanOffTime))
    }

    public enum Failure: Error, Sendable, CustomStringConvertible {
        case transport(HCITransportError)
        case radio(GAPError)
        case rotation(String)
        /// The store could not record the next id (a full disk, a locked or read-only database).
        /// The session has stopped advertising: an id goes on air only once recorded, and the
        /// previous one's window has ended. The next session takes the id when the store works
        /// again; until then each session fails before it opens the transport. Any other failure
        /// of a session therefore comes after its id was recorded: the store worked.
        case idNotRecorded(StoreError)
        /// The controller was in a state the node could not leave; the next session resets it.
        case controllerStuck(String)

        public var description: String {
            switch self {
            case .transport(let error): return "\(error)"
            case .radio(let error): return "\(error)"
            case .controllerStuck(let reason): return "the controller is being reset: \(reason)"
            case .rotation(let detail): return "could not take a new id: \(detail)"
            case .idNotRecorded(let error): return "not advertising: the next id could not be recorded: \(error.whileRunning(.ids))"
            }
        }
    }

    /// A failure of the rotator, typed: the store's own errors keep their kind and path.
    static func rotationFailure(_ error: any Error) -> Failure {
        if let error = error as? StoreError { return .idNotRecorded(error) }
        return .rotation("\(error)")
    }

    /// Runs until the controller is lost or stuck, or the next id cannot be recorded (throws), or
    /// the task is cancelled (returns).
    /// `onStart` receives the running exchange, for status and tests; `onCondition` hears every
    /// change of what the radio does compared with what the node wants (`RadioCondition`);
    /// `onProgress` the wall time of each step the exchange completed (`ProximityExchange`'s audit).
    public func run(
        onStart: @Sendable (ProximityExchange, LEHost) async -> Void = { _, _ in },
        onCondition: @escaping @Sendable (RadioCondition) async -> Void = { _ in },
        onProgress: @escaping @Sendable (UnixSeconds) async -> Void = { _ in }
    ) async throws(Failure) {
        let identity = AdvertisedIdentity()
        // Full, it refuses the newest write rather than dropping one already acknowledged: a
        // write is acknowledged only once queued (`TracerGATTServer.service`), so that its
        // writer tries again instead of counting on a write that is not logged.
        let (writes, writesContinuation) = AsyncStream.makeStream(of: PeerWriteEvent.self, bufferingPolicy: .bufferingOldest(256))
        defer { writesContinuation.finish() }
        // The id before the radio: while the store cannot record it, a retry ends here without
        // opening the transport or re-initialising the controller (on hciN, without taking the
        // adapter from bluetoothd again). A failure after this point proves the store worked.
        do { _ = try await rotator.currentID() } catch { throw Self.rotationFailure(error) }
        let hciTransport: any HCITransport
        do { hciTransport = try openTransport(transport) } catch { throw .transport(error) }
        let host: LEHost
        do {
            host = try await LEHost.open(
                transport: hciTransport,
                databaseForLink: TracerGATTServer.databaseForLink(identity: identity, writes: writesContinuation),
                configuration: configuration.radio, clock: clock, logger: logger)
        } catch {
            throw .radio(error)
        }
        let exchange = ProximityExchange(
            host: host, identity: identity, peerWrites: writes, sink: sink, configuration: configuration,
            scanSchedule: scanSchedule, addresses: addresses, wallClock: rotator.clock, logger: logger,
            controllerTxPower: await host.readAdvertisingTxPower(), onProgress: onProgress)
        do {
            // The id taken above, unless its window ended while the controller started: then the
            // next one, recorded first (or the session ends): never an unrecorded or ended id.
            await exchange.rotate(to: try await rotator.currentID())
            try await exchange.start()
        } catch let error as GAPError {
            await host.close()
            throw .radio(error)
        } catch {
            await host.close()
            throw Self.rotationFailure(error)
        }
        await onStart(exchange, host)

        enum End { case lost, stuck(String), rotationFailed(Failure), stopped }
        let end = await withTaskGroup(of: End.self) { group in
            group.addTask {
                await host.waitUntilLost()
                return .lost
            }
            group.addTask {
                guard let reason = await exchange.waitUntilControllerIsStuck() else { return .stopped }
                return .stuck(reason)
            }
            group.addTask {
                // Ends when the host does: the controller is gone.
                for await condition in host.conditionChanges { await onCondition(condition) }
                return .lost
            }
            group.addTask {
                // Ends by cancellation, or when the next id cannot be recorded: the session then ends
                // (the radio stops at once, so the ended window's id goes off the air) and the
                // supervisor starts the next one, which takes the id once the store works again.
                do {
                    try await rotator.run(
                        onWindowEnd: { ended in await exchange.windowEnded(ended) },
                        onRotation: { rotation in await exchange.rotate(to: rotation.current) })
                } catch is CancellationError {
                    return .stopped
                } catch {
                    return .rotationFailed(Self.rotationFailure(error))
                }
                return .stopped
            }
            let first = await group.next() ?? .stopped
            group.cancelAll()
            return first
        }
        await exchange.stop()
        await host.close()
        await onCondition(RadioCondition())
        guard !Task.isCancelled else { return }
        switch end {
        case .lost: throw .radio(.controllerLost)
        case .stuck(let reason): throw .controllerStuck(reason)
        case .rotationFailed(let failure): throw failure
        case .stopped: return
        }
    }
}

/// Keeps an exchange running across controller loss: a new session after each loss, waiting
/// 1, 2, 4 … up to 30 s between attempts (reset once a session has run for a minute). A session
/// that ended because the store could not record the next id is followed after 1, 2, 4, then
/// every `storeRetryBound` (5 s): the node is back on the air within 5 s of the store working again.
public struct ExchangeSupervisor: Sendable {
    public let session: ExchangeSession
    public var maximumBackoff: Duration = .seconds(30)
    /// With the controller's re-initialisation (under 0.1 s on a virtual controller), a reset keeps the node
    /// off the air for under 2 s, the longest silence a crowd should see; at 2 s it was 2.1 s.
    public var maximumResetBackoff: Duration = .milliseconds(1500)
    /// While the store cannot record the next id, the node is off the air: it tries again after
    /// 1, 2, 4 s, then every 5 s, so that it is back within 5 s of the cause going (a failed
    /// write to a full disk costs next to nothing, and a retry touches no radio). The one figure
    /// for this bound: `tracer doctor` quotes it, the README's figure is this one.
    public static let storeRetryBound: Duration = .seconds(5)
    public var maximumStoreBackoff: Duration = ExchangeSupervisor.storeRetryBound

    public init(session: ExchangeSession) { self.session = session }

    /// `onSessionEnded` hears why each session ended before the supervisor waits to retry (for
    /// the node's status file); `onProgress` each step a session's exchange completed (`ExchangeSession.run`).
    public func run(
        onStart: @escaping @Sendable (ProximityExchange, LEHost) async -> Void = { _, _ in },
        onSessionEnded: @escaping @Sendable (ExchangeSession.Failure) async -> Void = { _ in },
        onCondition: @escaping @Sendable (RadioCondition) async -> Void = { _ in },
        onProgress: @escaping @Sendable (UnixSeconds) async -> Void = { _ in }
    ) async {
        var backoff: Duration = .seconds(1)
        var storeBackoff: Duration = .seconds(1)
        /// The store error of the last session, logged at error level when it first comes or
        /// changes; a repeat, every few seconds for as long as the outage lasts, only at debug.
        var storeError: StoreError?
        var resetBackoff = ResetBackoff(maximum: maximumResetBackoff)
        let logReconnecting = { [logger = session.logger] (error: ExchangeSession.Failure, wait: Duration) in
            logger.warning("controller session ended; reconnecting", metadata: ["error": "\(error)", "retryIn": "\(wait)"])
        }
        while !Task.isCancelled {
            let started = session.clock.now
            let exchange = Mutex<ProximityExchange?>(nil)
            let wait: Duration
            do throws(ExchangeSession.Failure) {
                try await session.run(onStart: { running, host in
                    exchange.withLock { $0 = running }
                    await onStart(running, host)
                }, onCondition: onCondition, onProgress: onProgress)
                return
            } catch {
                // A session that started, or failed after taking its id, showed the store working:
                // the next outage starts short again, and its first failure is logged as new.
                let idTaken: Bool
                switch error {
                case .idNotRecorded, .rotation: idTaken = exchange.withLock { $0 } != nil
                default: idTaken = true
                }
                if idTaken {
                    storeBackoff = .seconds(1)
                    storeError = nil
                }
                switch error {
                case .controllerStuck:
                    let exchanged = await (exchange.withLock { $0 })?.completedExchanges ?? 0
                    wait = resetBackoff.wait(afterSessionOf: session.clock.now - started, exchanges: exchanged)
                    logReconnecting(error, wait)
                case .idNotRecorded(let failure):
                    wait = storeBackoff
                    storeBackoff = min(storeBackoff * 2, maximumStoreBackoff)
                    let metadata: Logger.Metadata = ["error": "\(failure.whileRunning(.ids))", "retryIn": "\(wait)"]
                    if failure != storeError {
                        session.logger.error("not advertising: the next id could not be recorded; retrying", metadata: metadata)
                    } else {
                        session.logger.debug("the next id still cannot be recorded; retrying", metadata: metadata)
                    }
                    storeError = failure
                default:
                    if session.clock.now - started > .seconds(60) { backoff = .seconds(1) }
                    wait = backoff
                    backoff = min(backoff * 2, maximumBackoff)
                    logReconnecting(error, wait)
                }
                await onSessionEnded(error)
            }
            // Timer: the backoff before the next session, on the session's clock (no host exists between sessions).
            guard (try? await session.clock.sleep(for: wait)) != nil else { return }
        }
    }
}

/// How long the supervisor waits before the session after a controller reset.
///
/// A stuck controller is reset at once: every second it stays stuck the node is deaf. Resets in
/// quick succession slow down, but only to `maximum`: in a crowd on strict controllers they are frequent
/// and each helps, and waiting out 30 s there kept 20 nodes off the air 42 % of the time
/// (BENCHMARKS.md). A session that ran 10 s, or completed an exchange as central, showed the
/// controller working, so the next wait starts short again: counting such sessions as a loop
/// left a node of a 20-node crowd, reset four times in ten seconds with exchanges between,
/// silent for 2.5 s.
public struct ResetBackoff: Sendable {
    public static let shortest: Duration = .milliseconds(100)
    public let maximum: Duration
    private var next = ResetBackoff.shortest

    public init(maximum: Duration) { self.maximum = maximum }

    /// The wait before the next session, after one of `length` that made `exchanges` exchanges
    /// and ended in a reset.
    public mutating func wait(afterSessionOf length: Duration, exchanges: Int) -> Duration {
        if length > .seconds(10) || exchanges > 0 { next = Self.shortest }
        let wait = next
        next = min(next * 2, maximum)
        return wait
    }
}
