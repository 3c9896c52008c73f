import Foundation
import BLEHost
import GATTExchange
import IDRotation
import Logging
import Matching
import Places
import TracerCore

/// The running node: composes id rotation, the BLE exchange, the encounter log and retention.
/// It holds no logic of its own beyond starting the parts together and stopping them in order.
struct NodeService {
    let store: NodeStore
    let transport: TransportSpec
    let heldAdapter: HeldAdapterPolicy
    let schedule: RotationSchedule
    let retention: RetentionPolicy
    let exchange: ExchangeConfiguration
    let status: NodeStatusRecorder
    /// The place in force, recorded with each encounter; nil when the node has none configured.
    let places: PlaceBoard?
    /// Feeds `places` with positions, when the place source is gpsd.
    let gpsd: GPSDClient?
    /// Tells systemd the node's state and answers its watchdog, when systemd asked (`Type=notify`).
    let watchdog: NodeWatchdog?
    /// Keeps `node.metrics_file` for node_exporter's textfile collector and the metrics
    /// endpoint's text, when either is set.
    var metrics: NodeMetricsPublisher? = nil
    let logger: Logger

    /// Runs until the task is cancelled (SIGINT/SIGTERM), then flushes the log.
    func run() async {
        await status.begin()
        let spill = EncounterSpill(forStoreAt: store.location.path, environment: ProcessInfo.processInfo.environment)
        let log = EncounterLog(store: store, logger: logger, spill: spill, placeInForce: { [places] in places?.current() })
        let rotator = IDRotator(schedule: schedule, history: store, logger: logger)
        let session = ExchangeSession(
            transport: transport, rotator: rotator, sink: metrics?.activity.counting(into: log) ?? log, configuration: exchange, logger: logger,
            openTransport: { [heldAdapter, logger] spec throws(HCITransportError) in
                try openHCITransport(spec, heldAdapter: heldAdapter) { index in
                    logger.warning("hci\(index) was held up by bluetoothd: the node powered it off to take it (node.take_adapter). Desktop Bluetooth on hci\(index) (headphones, mice, file transfer) stops while the node runs and comes back when it stops")
                }
            })
        logger.info("node starting", metadata: ["transport": "\(transport)", "database": "\(store.location.path)"])
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await log.runPeriodicFlush() }
            group.addTask { await store.purgePeriodically(policy: retention, logger: logger) }
            group.addTask { [status] in
                await ExchangeSupervisor(session: session).run(
                    onStart: { exchange, host in
                        await status.started(host)
                        store.recordAdvertisingTxPower(exchange.controllerTxPower, logger: logger)
                    },
                    onSessionEnded: { failure in await status.sessionEnded(failure) },
                    onCondition: { condition in await status.conditionChanged(condition) },
                    onProgress: { time in await status.exchangeProgressed(at: time) })
            }
            group.addTask { await status.runHeartbeat() }
            group.addTask { [status] in
                for await failure in log.writeFailures { await status.encounterWrites(failing: failure) }
            }
            if let gpsd { group.addTask { await gpsd.run() } }
            if let watchdog { group.addTask { [status] in await watchdog.run(following: status) } }
            if let metrics {
                group.addTask { [status] in await metrics.run(following: status) }
            }
            await group.waitForAll()
        }
        do {
            try await log.flush()
        } catch {
            logger.error("could not write the last sightings", metadata: ["error": "\(error)"])
        }
        await status.stopped()
        // The last word in the metrics file: the node stopped (running 0); the file stays.
        await metrics?.write(await status.current)
        logger.info("node stopped")
    }
}
