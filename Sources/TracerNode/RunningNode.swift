import Dispatch
import Foundation
import BLEHost
import GATTExchange
import IDRotation
import Logging
import Matching
import Places
import TracerCore

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
    /// The writer of `node.metrics_file` and the metrics endpoint, when either is set; every
    /// check's report is told to it.
    private var metrics: NodeMetricsPublisher?
    /// Listening from `init` on, so that a port it cannot have stops `tracer run` at once.
    private let metricsEndpoint: NodeMetricsEndpoint?

    init(resolved: ResolvedSettings) throws {
        let settings = resolved.settings
        guard let transportText = settings.transport else { throw CommandFailure.missingSetting(.transport) }
        do { transport = try TransportSpec(parsing: transportText) } catch { throw CommandFailure.badTransport("\(error)") }
        schedule = try RotationSchedule(intervalSeconds: settings.rotationInterval, jitterSeconds: settings.rotationJitter)
        store = try NodeStore.open(resolved.storeLocation)
        metricsEndpoint = try settings.metricsListen.map { address throws(NodeMetricsEndpointError) in try NodeMetricsEndpoint(listeningOn: address, logger: Logger(label: "tracer.node")) }
        self.settings = settings
    }

    /// The place in force and, with place.source = gpsd, the client that feeds it positions; nil
    /// when neither a name nor a source is configured.
    private static func placeParts(_ settings: NodeSettings) -> (board: PlaceBoard, gpsd: GPSDClient?)? {
        guard settings.placeName != nil || settings.placeSource != .none else { return nil }
        let board = PlaceBoard(name: settings.placeName, maximumFixAge: .seconds(settings.placeMaxFixAge))
        guard settings.placeSource == .gpsd else { return (board, nil) }
        return (board, GPSDClient(
            host: settings.gpsdHost, port: Int(settings.gpsdPort), precisionMeters: Int(settings.placePrecision),
            board: board, logger: Logger(label: "tracer.place")))
    }

    static func exchangeConfiguration(_ settings: NodeSettings) -> ExchangeConfiguration {
        var exchange = ExchangeConfiguration(scanPlan: settings.continuousScan ? .continuous : settings.scanPlan)
        exchange.radio.knownQuirks = settings.controllerQuirks.added
        exchange.radio.tableQuirksTurnedOff = settings.controllerQuirks.removed
        return exchange
    }

    /// What to tell, once at start, of a `node.controller_quirks` that names behaviours the host
    /// now handles on every controller (an older setting): that they change nothing and can go.
    static func quirksHandledAlwaysWarning(_ choice: ControllerQuirkChoice) -> Logger.Message? {
        let names = choice.namesHandledAlways
        guard !names.isEmpty else { return nil }
        let (pronoun, verb) = names.count == 1 ? ("it", "changes") : ("they", "change")
        return "node.controller_quirks names \(names.joined(separator: ", ")), which the node handles on every controller: \(pronoun) \(verb) nothing and can be removed from the setting"
    }

    func run(levelControl: LogLevelControl, reload: @escaping @Sendable () throws -> ResolvedSettings) async {
        var exchange = Self.exchangeConfiguration(settings)
        if let warning = Self.quirksHandledAlwaysWarning(settings.controllerQuirks) { logger.warning(warning) }
        if let warning = settings.retiredListFormatWarning { logger.warning("\(warning)") }
        let radioTime = RadioTimeAccount()
        exchange.radio.radioTimeAccount = radioTime
        let place = Self.placeParts(settings)
        metrics = NodeMetricsPublisher.following(
            store: store, settings: settings, endpoint: metricsEndpoint, transport: transport, board: place?.board, logger: logger)
        if let metricsEndpoint {
            logger.notice("metrics endpoint listening", metadata: ["address": "http://\(metricsEndpoint.address)/metrics"])
        }
        let service = NodeService(
            store: store, transport: transport, heldAdapter: settings.takeAdapter ? .take : .refuse,
            schedule: schedule, retention: .standard, exchange: exchange,
            status: NodeStatusRecorder(path: store.location.statusFilePath, transport: transport, radioTime: radioTime, logger: logger),
            places: place?.board, gpsd: place?.gpsd,
            watchdog: SystemdNotifier().map { NodeWatchdog(notifier: $0, darkLimit: settings.watchdogDarkLimit, logger: logger) },
            metrics: metrics, logger: logger)
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
        metricsEndpoint?.stop()
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
            let metrics = self.metrics
            let schedule = ExposureCheckSchedule(
                checker: try parts.checker(store: store, offline: false), hook: settings.onExposure.map { ExposureHook(command: $0) },
                interval: settings.checkInterval, jitter: settings.checkJitter,
                refreshInterval: settings.refreshInterval, refreshJitter: settings.refreshJitter,
                longPoll: settings.longPoll ? try parts.longPoll() : nil,
                onReport: { report in await metrics?.record(NodeMetrics.Check(report)) }, logger: Logger(label: "tracer.check"))
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
            ("node.scan_schedule", fresh.scanPlan != settings.scanPlan),
            ("node.continuous_scan", fresh.continuousScan != settings.continuousScan),
            ("node.take_adapter", fresh.takeAdapter != settings.takeAdapter),
            ("node.watchdog_dark_limit", fresh.watchdogDarkLimit != settings.watchdogDarkLimit),
            ("node.metrics_file", fresh.metricsFile != settings.metricsFile),
            ("node.metrics_listen", fresh.metricsListen != settings.metricsListen),
            ("node.controller_quirks", fresh.controllerQuirks != settings.controllerQuirks),
            ("log.format", fresh.logFormat != settings.logFormat),
            ("place.*", fresh.placeName != settings.placeName || fresh.placeSource != settings.placeSource
                || fresh.gpsdHost != settings.gpsdHost || fresh.gpsdPort != settings.gpsdPort
                || fresh.placePrecision != settings.placePrecision || fresh.placeMaxFixAge != settings.placeMaxFixAge),
        ].filter(\.1).map(\.0)
        var applied = fresh
        // Kept as running until a restart, so that the next reload still sees the difference.
        applied.transport = settings.transport
        applied.database = settings.database
        applied.rotationInterval = settings.rotationInterval
        applied.rotationJitter = settings.rotationJitter
        applied.scanPlan = settings.scanPlan
        applied.continuousScan = settings.continuousScan
        applied.takeAdapter = settings.takeAdapter
        applied.watchdogDarkLimit = settings.watchdogDarkLimit
        applied.metricsFile = settings.metricsFile
        applied.metricsListen = settings.metricsListen
        applied.controllerQuirks = settings.controllerQuirks
        applied.logFormat = settings.logFormat
        applied.placeName = settings.placeName
        applied.placeSource = settings.placeSource
        applied.gpsdHost = settings.gpsdHost
        applied.gpsdPort = settings.gpsdPort
        applied.placePrecision = settings.placePrecision
        applied.placeMaxFixAge = settings.placeMaxFixAge
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
