import Foundation
import BLEHost
import GATTExchange
import IDRotation
import Logging
import Matching
import Places
import PositiveListFormat
import Prometheus
import Synchronization
import TracerCore

/// What a running node tells a fleet's Prometheus about itself (`node.metrics_file`, through
/// node_exporter's textfile collector, and the endpoint of `node.metrics_listen`): whether it runs, hears and is heard, whether its store
/// records, how old its list and its last check are, and counts. Rendered from values (the node's
/// status and a few readings) so that a test can give known values and read exact lines.
///
/// Nothing personal, by construction: no id, key, place name or position, database path, address
/// or count per peer or window. The only labels are `version` (the program's own), `transport`
/// (the kind of controller link, from four words), `what` (two store problems) and `source` (the
/// place source's two values); counts are of the whole node since it started, but for the last
/// whole hour's exchanges and encounters, which are suppressed below 10 (`NodeHourlyActivity`).
struct NodeMetrics: Equatable {
    /// The last exposure check: when, and the level of its verdict.
    struct Check: Equatable {
        var checkedAt: UnixSeconds
        var level: RiskLevel
    }

    var status: NodeRuntimeStatus
    var version: String
    /// `TransportSpec.metricsKind`: hci, tcp, unix or serial.
    var transportKind: String
    var listLastUpdated: UnixSeconds?
    var lastCheck: Check?
    var placeSource: NodeSettings.PlaceSource
    /// Whether a place (the configured name, or a fresh gpsd fix) is recorded with encounters now.
    var placeInForce: Bool
    /// The last whole clock hour's exchanges and encounters, already suppressed.
    var lastHour = NodeHourlyActivity.Hour()

    static let namespace = "tracer_node"

    /// The verdict levels as numbers, in the HELP text too: a fixed mapping, so that an alert can
    /// compare (`>= 1`).
    static func level(_ level: RiskLevel) -> Int {
        switch level {
        case .none: 0
        case .low: 1
        case .high: 2
        }
    }

    /// The exposition in Prometheus's text format, from a registry of its own (as the server's).
    func exposition() -> String {
        let registry = PrometheusCollectorRegistry()
        func descriptor(_ name: String, _ help: String) -> MetricNameDescriptor {
            MetricNameDescriptor(namespace: Self.namespace, metricName: name, helpText: help)
        }
        func gauge(_ name: String, _ help: String, _ value: Double, labels: [(String, String)] = []) {
            registry.makeGauge(descriptor: descriptor(name, help), labels: labels).set(value)
        }
        func flag(_ name: String, _ help: String, _ on: Bool, labels: [(String, String)] = []) {
            gauge(name, help, on ? 1 : 0, labels: labels)
        }
        func counter(_ name: String, _ help: String, _ value: Int) {
            registry.makeCounter(descriptor: descriptor(name, help), labels: []).increment(by: Int64(max(value, 0)))
        }
        let running = status.state == .running
        gauge("info", "The node's version and the kind of its controller link (hci, tcp, unix or serial); always 1.", 1,
              labels: [("version", version), ("transport", transportKind)])
        flag("running", "1 while tracer run runs; 0 once it stopped (the last value it writes).", status.state != .stopped)
        flag("controller_working", "1 while a session on the controller runs (the node is not starting or reconnecting).", running)
        flag("advertising", "1 while the node advertises its id (it can be heard).",
             running && status.radio?.advertising == nil && status.idNotRecorded == nil)
        flag("scanning", "1 while the node scans (it can hear).", running && status.radio?.scanning == nil)
        flag("reconnecting", "1 while the node has lost its controller session and tries again.", status.state == .reconnecting)
        counter("controller_resets_total", "Controller resets the node made because the controller was stuck.",
                status.controllerResets?.count ?? 0)
        let storeProblem = "1 while the store keeps the node from recording: what=next_id, the next own id cannot be recorded (the node does not advertise); what=encounters, encounters cannot be written (kept in memory)."
        flag("store_problem", storeProblem, status.idNotRecorded != nil, labels: [("what", "next_id")])
        flag("store_problem", storeProblem, status.encountersNotWritten != nil, labels: [("what", "encounters")])
        gauge("start_time_seconds", "When the node started, Unix seconds.", Double(status.startedAt))
        gauge("list_last_updated_timestamp_seconds", "When the positive list was last updated, Unix seconds; 0: never.",
              Double(listLastUpdated ?? 0))
        gauge("last_check_timestamp_seconds", "When the last exposure check ran, Unix seconds; 0: never.",
              Double(lastCheck?.checkedAt ?? 0))
        if let lastCheck {
            gauge("last_check_verdict_level", "The last exposure check's verdict: 0 none, 1 low, 2 high risk (absent before the first check).",
                  Double(Self.level(lastCheck.level)))
        }
        gauge("exchanges_last_hour", "Id exchanges completed in the last whole UTC clock hour (such as 14:00 to 15:00), while the node ran; changes once an hour. 0 when fewer than \(NodeHourlyActivity.smallestReported), or when fewer than \(NodeHourlyActivity.smallestReported) other ids were heard in that hour: small cells are suppressed. The threshold counts ids, not people: a count shown comes from at least two devices only while the devices met keep the default 15-minute id rotation (node.rotation_interval can be as short as 5 s, and a foreign advertiser can show any number of ids).",
              Double(lastHour.exchanges))
        gauge("encounters_last_hour", "Other ids heard in the last whole UTC clock hour, each counted once, while the node ran; changes once an hour. 0 when fewer than \(NodeHourlyActivity.smallestReported): small cells are suppressed. The threshold counts ids, not people: a count shown comes from at least two devices only while the devices met keep the default 15-minute id rotation (node.rotation_interval can be as short as 5 s, and a foreign advertiser can show any number of ids).",
              Double(lastHour.encounters))
        flag("place_in_force", "1 while a place is recorded with encounters (source=none: a place.name is set; source=gpsd: gpsd gives a fresh fix); never the place.",
             placeInForce, labels: [("source", placeSource.rawValue)])
        return registry.emitToString()
    }
}

/// The node's exchanges and the other ids it heard, per whole UTC clock hour, for the metrics'
/// `exchanges_last_hour` and `encounters_last_hour`: counted as the exchange reports sightings
/// (`counting(into:)`), given out only for the last whole hour and only from
/// `smallestReported` up. A whole-node count scraped every few seconds would show when people were
/// near a quiet kiosk (one sighting, one step); a count per finished clock hour shows nothing
/// within the hour, and one below 10 reads 0, so an hour with one visitor, or a few, never shows.
/// At the defaults (ids rotated every 15 minutes) one device gives at most 5 ids and about 9
/// exchanges in an hour, so a reported count comes from at least two devices; the exchanges are
/// given only when the ids reach 10 too. The threshold counts ids, not people: a peer set to
/// rotate faster (`node.rotation_interval`, down to 5 s) or a foreign advertiser that changes its
/// id at will shows 10 ids alone, so the suppression holds only while the devices met keep the
/// default rotation.
///
/// The ids heard this hour are held (in memory only, never rendered) so that each counts once;
/// at most `maximumHeld`, after which the hour's count stops growing.
final class NodeHourlyActivity: Sendable {
    /// One hour's counts, suppressed.
    struct Hour: Equatable, Sendable {
        var exchanges = 0
        var encounters = 0
    }

    static let smallestReported = 10
    static let maximumHeld = 100_000
    static let hour: UnixSeconds = 3_600

    private struct Counting {
        /// The hour being counted, as hours since 1970.
        var hour: UnixSeconds
        var exchanges = 0
        var peers: Set<UserID> = []
        /// The last hour counted to its end, and its counts (unsuppressed).
        var finished: (hour: UnixSeconds, exchanges: Int, encounters: Int)?

        mutating func move(to next: UnixSeconds) {
            guard next > hour else { return }
            finished = (hour, exchanges, peers.count)
            hour = next
            exchanges = 0
            peers = []
        }
    }

    private let counting: Mutex<Counting>

    /// `now`: when the node starts (its hour is counted from then on).
    init(now: UnixSeconds) {
        counting = Mutex(Counting(hour: now / Self.hour))
    }

    /// Counts `sighting` in its hour: an exchange when the peer's id was read or written, and its
    /// id once.
    func note(_ sighting: Sighting) {
        counting.withLock { counting in
            counting.move(to: sighting.time / Self.hour)
            if !sighting.learnedBy.isEmpty { counting.exchanges += 1 }
            if counting.peers.count < Self.maximumHeld { counting.peers.insert(sighting.peer) }
        }
    }

    /// The counts of the whole hour before the one `now` is in, suppressed; zeros when the node
    /// did not run then.
    func lastWholeHour(at now: UnixSeconds) -> Hour {
        counting.withLock { counting in
            counting.move(to: now / Self.hour)
            guard let finished = counting.finished, finished.hour == now / Self.hour - 1,
                  finished.encounters >= Self.smallestReported else { return Hour() }
            return Hour(exchanges: finished.exchanges >= Self.smallestReported ? finished.exchanges : 0, encounters: finished.encounters)
        }
    }

    /// A sink that counts each sighting here, then hands it to `sink`.
    func counting(into sink: any EncounterSink) -> any EncounterSink {
        CountingSink(activity: self, sink: sink)
    }

    private struct CountingSink: EncounterSink {
        let activity: NodeHourlyActivity
        let sink: any EncounterSink

        func record(_ sighting: Sighting) async {
            activity.note(sighting)
            await sink.record(sighting)
        }
    }
}

extension TransportSpec {
    /// The kind of link only, for the metrics' `info` label: never the device, path, host or port.
    var metricsKind: String {
        switch self {
        case .hciUserChannel: "hci"
        case .tcp: "tcp"
        case .unix: "unix"
        case .serial: "serial"
        }
    }
}

extension NodeMetrics.Check {
    init(_ report: ExposureCheckReport) {
        self.init(checkedAt: report.checkedAt, level: report.assessment.level)
    }
}

/// Keeps the node's metrics current where its operator asked for them: `node.metrics_file`
/// and the endpoint of `node.metrics_listen`, both from one rendering, at start, on every change of
/// the node's status and every 60 s, and once more when the node stopped (running 0).
///
/// The file is replaced whole (a temporary file beside it, then a rename; mode 0644 so that
/// node_exporter's user can read it) and never removed. Not fsynced: about three writes a minute,
/// each waiting for the disk, would wear an SD card for a file that node_exporter reads within
/// seconds and the node rewrites within a minute, so a version lost at a power cut costs nothing;
/// the rename still keeps a half-written file from ever being read. A failure to write is logged
/// once, and again when writing works again; it never stops the node. The endpoint serves the
/// same text until the next rendering. The last check is read from the store at start only (again
/// at each write while that read fails, until one works or a check is told); later checks are
/// told (`record(_:)`).
actor NodeMetricsPublisher {
    /// What the node's other parts know, read at each write from memory and the list cache's
    /// small state file: the list's state, the place.
    struct Readings: Sendable {
        var listLastUpdated: UnixSeconds?
        var placeInForce: Bool
    }

    static let interval: Duration = .seconds(60)

    /// `node.metrics_file`; nil: only the endpoint.
    let file: String?
    /// `node.metrics_listen`'s endpoint; nil: only the file.
    let endpoint: NodeMetricsEndpoint?
    /// Counts the exchange's sightings per hour (`NodeService` puts it before the encounter log).
    nonisolated let activity: NodeHourlyActivity
    private let clock: any WallClock
    private let version: String
    private let transportKind: String
    private let placeSource: NodeSettings.PlaceSource
    private let readings: @Sendable () -> Readings
    private let logger: Logger
    private var lastCheck: NodeMetrics.Check?
    /// Reads the last check from the store; kept only while that read fails (a locked store)
    /// and no check was told since, and tried again at each write.
    private var unreadLastCheck: (@Sendable () throws -> NodeMetrics.Check?)?
    /// The failure last logged, while writing the file fails.
    private var failing: String?

    /// `readLastCheck`: reads the last check before the node started (nil: never checked), here
    /// and, while it fails, at each write until it works or a check is told.
    init(file: String?, endpoint: NodeMetricsEndpoint? = nil, transport: TransportSpec, placeSource: NodeSettings.PlaceSource,
         readLastCheck: @escaping @Sendable () throws -> NodeMetrics.Check? = { nil },
         readings: @escaping @Sendable () -> Readings, clock: any WallClock = SystemWallClock(), logger: Logger)
    {
        self.file = file
        self.endpoint = endpoint
        self.clock = clock
        activity = NodeHourlyActivity(now: clock.now())
        version = Tracer.version
        transportKind = transport.metricsKind
        self.placeSource = placeSource
        self.readings = readings
        self.logger = logger
        do {
            lastCheck = try readLastCheck()
        } catch {
            // A store that cannot be read now (locked): again at each write.
            unreadLastCheck = readLastCheck
        }
    }

    /// The running node's publisher, when `node.metrics_file` is set or `endpoint` listens. The
    /// last check before this start is read from `store` here, once (or, while the store cannot be
    /// read, at each write until it can); the check cycle tells each later one (`record(_:)`: the
    /// report it keeps in the store for `tracer status`), so that no write touches the store after that.
    static func following(store: NodeStore, settings: NodeSettings, endpoint: NodeMetricsEndpoint? = nil, transport: TransportSpec,
                          board: PlaceBoard?, logger: Logger) -> NodeMetricsPublisher?
    {
        guard settings.metricsFile != nil || endpoint != nil else { return nil }
        let cache = MatchingParts(settings: settings).cache
        return NodeMetricsPublisher(
            file: settings.metricsFile, endpoint: endpoint, transport: transport, placeSource: settings.placeSource,
            readLastCheck: { try ExposureChecker.lastReport(in: store).map(NodeMetrics.Check.init) },
            readings: { .init(listLastUpdated: cache.state.lastUpdated, placeInForce: board?.current() != nil) },
            logger: logger)
    }

    /// A check the node just made, written with the next write (at the latest a minute later).
    func record(_ check: NodeMetrics.Check) {
        lastCheck = check
        unreadLastCheck = nil
    }

    /// Follows `recorder` (a stream of its own: the watchdog reads `changes`) and writes at every
    /// status and every `interval`, until the calling task is cancelled; the node writes the
    /// stopped state itself afterwards (`write(_:)`).
    func run(following recorder: NodeStatusRecorder) async {
        let changes = await recorder.follow()
        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                for await status in changes { await self.write(status) }
            }
            group.addTask {
                while (try? await Task.sleep(for: Self.interval)) != nil {
                    await self.write(await recorder.current)
                }
            }
            await group.waitForAll()
        }
    }

    /// Renders the metrics of `status` for the endpoint and the file; logs a failure to write
    /// the file once, and the recovery.
    func write(_ status: NodeRuntimeStatus) {
        if let read = unreadLastCheck {
            do {
                lastCheck = try read()
                unreadLastCheck = nil
            } catch {
                // Still locked: again at the next write.
            }
        }
        let read = readings()
        let metrics = NodeMetrics(
            status: status, version: version, transportKind: transportKind,
            listLastUpdated: read.listLastUpdated, lastCheck: lastCheck, placeSource: placeSource,
            placeInForce: read.placeInForce, lastHour: activity.lastWholeHour(at: clock.now()))
        let exposition = metrics.exposition()
        endpoint?.publish(exposition)
        guard let file else { return }
        do {
            try AtomicFile.write(Array(exposition.utf8), to: file, mode: 0o644, durable: false)
            if failing != nil {
                logger.notice("the metrics file is written again", metadata: ["path": "\(file)"])
                failing = nil
            }
        } catch {
            if failing == nil {
                logger.error("cannot write the metrics file (node.metrics_file), so Prometheus sees stale metrics or none; the node runs on and keeps trying",
                             metadata: ["path": "\(file)", "error": "\(error)"])
            }
            failing = "\(error)"
        }
    }
}
