import Dispatch
import Foundation
import BLEHost
import GATTExchange
import IDRotation
import Logging
import Matching

/// `tracer run` once its settings are known: the node service (rotation, BLE exchange, store,
/// purge) and, when a list server is configured, the periodic exposure check. Signals: SIGINT
/// and SIGTERM stop everything in order; SIGHUP reloads the configuration, applying what can
/// change while running (log level, check settings) and naming what needs a restart.
actor RunningNode {
    private var settings: NodeSettings
    private let store: NodeStore
    private let transport: TransportSpec
    private let schedule: RotationSchedule
    private let logger = Logger(label: "tracer.node")
    private var checkTask: Task<Void, Never>?

    init(resolved: ResolvedSettings) throws {
        let settings = resolved.settings
        guard let transportText = settings.transport else { throw CommandFailure.missingSetting(.transport) }
        do { transport = try TransportSpec(parsing: transportText) } catch { throw CommandFailure.badTransport("\(error)") }
        schedule = try RotationSchedule(intervalSeconds: settings.rotationInterval, jitterSeconds: settings.rotationJitter)
        store = try NodeStore.open(resolved.storeLocation)
        self.settings = settings
    }

    func run(levelControl: LogLevelControl, reload: @escaping @Sendable () throws -> ResolvedSettings) async {
        var exchange = ExchangeConfiguration()
        if settings.continuousScan { exchange.scanOffTime = .zero }
        let service = NodeService(
            store: store, transport: transport, heldAdapter: settings.takeAdapter ? .take : .refuse,
            schedule: schedule, retention: .standard, exchange: exchange,
            status: NodeStatusRecorder(path: store.location.statusFilePath, transport: transport), logger: logger)
        let serviceTask = Task { await service.run() }
        startChecks()

        let stops = [SIGINT, SIGTERM].map { number in
            Self.onSignal(number) { serviceTask.cancel() }
        }
        let hangUp = Self.onSignal(SIGHUP) { Task { await self.reloadConfiguration(reload, levelControl: levelControl) } }
        await serviceTask.value
        checkTask?.cancel()
        await checkTask?.value
        (stops + [hangUp]).forEach { $0.cancel() }
    }

    private func startChecks() {
        checkTask?.cancel()
        checkTask = nil
        guard settings.serverURL != nil, settings.serverPublicKey != nil else {
            logger.notice("no positive list server configured (server.url, server.public_key); exposure checks are off")
            return
        }
        do {
            let parts = MatchingParts(settings: settings)
            let schedule = ExposureCheckSchedule(
                checker: try parts.checker(store: store, offline: false), hook: settings.onExposure.map { ExposureHook(command: $0) },
                interval: settings.checkInterval, jitter: settings.checkJitter,
                refreshInterval: settings.refreshInterval, refreshJitter: settings.refreshJitter,
                longPoll: settings.longPoll ? try parts.longPoll() : nil, logger: Logger(label: "tracer.check"))
            checkTask = Task { await schedule.run() }
        } catch {
            logger.error("exposure checks are off", metadata: ["reason": "\(UserMessage.describe(error))"])
        }
    }

    private func reloadConfiguration(_ reload: @Sendable () throws -> ResolvedSettings, levelControl: LogLevelControl) {
        let fresh: NodeSettings
        do { fresh = try reload().settings } catch {
            logger.error("configuration not reloaded; the node keeps its settings", metadata: ["reason": "\(UserMessage.describe(error))"])
            return
        }
        levelControl.level = fresh.logLevel
        let needRestart = [
            ("node.transport", fresh.transport != settings.transport),
            ("node.database", fresh.database != settings.database),
            ("node.rotation_interval", fresh.rotationInterval != settings.rotationInterval),
            ("node.rotation_jitter", fresh.rotationJitter != settings.rotationJitter),
            ("node.continuous_scan", fresh.continuousScan != settings.continuousScan),
            ("node.take_adapter", fresh.takeAdapter != settings.takeAdapter),
            ("log.format", fresh.logFormat != settings.logFormat),
        ].filter(\.1).map(\.0)
        var applied = fresh
        // Kept as running until a restart, so that the next reload still sees the difference.
        applied.transport = settings.transport
        applied.database = settings.database
        applied.rotationInterval = settings.rotationInterval
        applied.rotationJitter = settings.rotationJitter
        applied.continuousScan = settings.continuousScan
        applied.takeAdapter = settings.takeAdapter
        applied.logFormat = settings.logFormat
        // The log level is applied above without touching a check that may be under way.
        var comparable = applied
        comparable.logLevel = settings.logLevel
        let checksChanged = comparable != settings
        settings = applied
        if checksChanged { startChecks() }
        logger.notice("configuration reloaded", metadata: [
            "needsRestart": "\(needRestart.isEmpty ? "nothing" : needRestart.joined(separator: ","))",
            "logLevel": "\(fresh.logLevel)",
        ])
    }

    private static func onSignal(_ number: Int32, _ handler: @escaping @Sendable () -> Void) -> any DispatchSourceSignal {
        signal(number, SIG_IGN)
        let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
        source.setEventHandler(handler: handler)
        source.resume()
        return source
    }
}
