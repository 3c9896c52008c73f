import BLEHost
import BLEHostTestSupport
import Foundation
import GATTExchange
import IDRotation
@testable import Matching
import Synchronization
import Testing
import TestTiers
import TracerCore
import TracerTestSupport
@testable import TracerNode
#if canImport(Glibc)
import Glibc
#endif

/// Issue 41, item 2: the node's metrics for node_exporter's textfile collector (`node.metrics_file`),
/// rendered from known values.
@Suite(.tags(.unit)) struct NodeMetricsRenderingTests {
    /// The exposition's lines, sorted (swift-prometheus writes its families in no fixed order).
    static func lines(_ exposition: String) -> [String] {
        exposition.split(separator: "\n").map(String.init).sorted()
    }

    @Test func aDegradedNodeIsRenderedLineByLine() throws {
        var status = NodeRuntimeStatus(pid: 7, startedAt: 1_700_000_000, updatedAt: 1_700_000_500, transport: "serial:/dev/ttyACM0,1000000", state: .running)
        status.controllerResets = .init(count: 3, lastAt: 1_700_000_400, lastReason: "stuck")
        var radio = RadioCondition()
        radio.scanning = .init(since: 1_700_000_450, reason: "Command Disallowed")
        status.radio = radio
        status.encountersNotWritten = .init(since: 1_700_000_470, problem: "the disk is full")
        let metrics = NodeMetrics(
            status: status, version: "0.1.0", transportKind: TransportSpec.serial(device: "/dev/ttyACM0", baudRate: 1_000_000).metricsKind,
            listLastUpdated: 1_700_000_300, lastCheck: .init(checkedAt: 1_700_000_310, level: .low),
            placeSource: .gpsd, placeInForce: false)
        let samples = Self.lines(metrics.exposition()).filter { !$0.hasPrefix("#") }
        #expect(samples == [
            "tracer_node_advertising 1.0",
            "tracer_node_controller_resets_total 3",
            "tracer_node_controller_working 1.0",
            "tracer_node_encounters_last_hour 0.0",
            "tracer_node_exchanges_last_hour 0.0",
            #"tracer_node_info{version="0.1.0",transport="serial"} 1.0"#,
            "tracer_node_last_check_timestamp_seconds 1700000310.0",
            "tracer_node_last_check_verdict_level 1.0",
            "tracer_node_list_last_updated_timestamp_seconds 1700000300.0",
            #"tracer_node_place_in_force{source="gpsd"} 0.0"#,
            "tracer_node_reconnecting 0.0",
            "tracer_node_running 1.0",
            "tracer_node_scanning 0.0",
            "tracer_node_start_time_seconds 1700000000.0",
            #"tracer_node_store_problem{what="encounters"} 1.0"#,
            #"tracer_node_store_problem{what="next_id"} 0.0"#,
        ])
        // Every family has one TYPE line, the counters as counters; every one a HELP line.
        let types = Self.lines(metrics.exposition()).filter { $0.hasPrefix("# TYPE") }
        #expect(types.count == 15)
        #expect(types.contains("# TYPE tracer_node_controller_resets_total counter"))
        #expect(types.contains("# TYPE tracer_node_advertising gauge"))
        #expect(Self.lines(metrics.exposition()).filter { $0.hasPrefix("# HELP") }.count == 15)
        #expect(metrics.exposition().contains("# HELP tracer_node_encounters_last_hour Other ids heard in the last whole UTC clock hour, each counted once, while the node ran; changes once an hour. 0 when fewer than 10: small cells are suppressed"))
        #expect(metrics.exposition().contains("# HELP tracer_node_exchanges_last_hour Id exchanges completed in the last whole UTC clock hour (such as 14:00 to 15:00), while the node ran; changes once an hour. 0 when fewer than 10, or when fewer than 10 other ids were heard in that hour"))
        // The suppression's condition, said where the counts are read: it counts ids, not people.
        for name in ["encounters", "exchanges"] {
            let help = metrics.exposition().split(separator: "\n").first { $0.hasPrefix("# HELP tracer_node_\(name)_last_hour ") } ?? ""
            #expect(help.contains("The threshold counts ids, not people: a count shown comes from at least two devices only while the devices met keep the default 15-minute id rotation (node.rotation_interval can be as short as 5 s"), "\(help)")
        }
        #expect(metrics.exposition().contains("# HELP tracer_node_last_check_verdict_level The last exposure check's verdict: 0 none, 1 low, 2 high risk"))
        try Self.promtoolFindsNothing(metrics.exposition())
    }

    @Test func aStoppedNodeThatNeverCheckedSaysSoWithoutAVerdict() throws {
        var status = NodeRuntimeStatus(pid: 7, startedAt: 1_700_000_000, updatedAt: 1_700_000_500, transport: "hci0", state: .stopped)
        status.idNotRecorded = .init(since: 1_700_000_100, problem: "the database is locked")
        let metrics = NodeMetrics(
            status: status, version: "0.1.0", transportKind: TransportSpec.hciUserChannel(index: 0).metricsKind,
            listLastUpdated: nil, lastCheck: nil, placeSource: .none, placeInForce: false)
        let samples = Self.lines(metrics.exposition()).filter { !$0.hasPrefix("#") }
        for line in [
            "tracer_node_running 0.0", "tracer_node_controller_working 0.0", "tracer_node_advertising 0.0", "tracer_node_scanning 0.0",
            "tracer_node_last_check_timestamp_seconds 0.0", "tracer_node_list_last_updated_timestamp_seconds 0.0",
            #"tracer_node_store_problem{what="next_id"} 1.0"#, #"tracer_node_info{version="0.1.0",transport="hci"} 1.0"#,
            #"tracer_node_place_in_force{source="none"} 0.0"#,
        ] {
            #expect(samples.contains(line), "missing \(line) in \(samples)")
        }
        #expect(!samples.contains { $0.hasPrefix("tracer_node_last_check_verdict_level") }, "a verdict before any check")
        try Self.promtoolFindsNothing(metrics.exposition())
    }

    @Test func verdictLevelsAndTransportKindsComeFromFixedSets() {
        #expect([RiskLevel.none, .low, .high].map(NodeMetrics.level) == [0, 1, 2])
        let kinds = [
            TransportSpec.tcp(host: "10.0.0.7", port: 4000), .unix(path: "/run/user/1000/ctrl.sock"),
            .serial(device: "/dev/serial/by-id/usb-Nordic_abc123", baudRate: 115_200), .hciUserChannel(index: 3),
        ].map(\.metricsKind)
        #expect(kinds == ["tcp", "unix", "serial", "hci"])
    }

    /// A file that cannot be written is said once, the node runs on, and the recovery is said too.
    @Test func aWriteFailureIsLoggedOnceAndItsRecoveryToo() async throws {
        let directory = NSTemporaryDirectory() + "/tracer-metrics-" + UUID().uuidString
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let capture = LogCapture()
        let file = NodeMetricsPublisher(
            file: directory + "/tracer.prom", transport: .tcp(host: "127.0.0.1", port: 1), placeSource: .none,
            readings: { .init(placeInForce: false) }, logger: capture.logger)
        let status = NodeRuntimeStatus(pid: 7, startedAt: 1_700_000_000, updatedAt: 1_700_000_000, transport: "tcp:127.0.0.1:1", state: .running)
        // The directory does not exist yet: three writes fail, one error.
        for _ in 0..<3 { await file.write(status) }
        #expect(capture.all.filter { $0.contains("cannot write the metrics file") }.count == 1, "\(capture.all)")
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        await file.write(status)
        #expect(capture.all.filter { $0.contains("the metrics file is written again") }.count == 1, "\(capture.all)")
        let text = try String(contentsOfFile: directory + "/tracer.prom", encoding: .utf8)
        #expect(text.contains("tracer_node_running 1"))
        let mode = try #require(FileManager.default.attributesOfItem(atPath: directory + "/tracer.prom")[.posixPermissions] as? Int)
        #expect(mode == 0o644)
        // No temporary file is left beside it for node_exporter to trip on.
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory) == ["tracer.prom"])
    }

    /// The running node's writer reads the last check from the store once, at start; each later
    /// one it is told by the check cycle. Its writes (three a minute) never read the store: a
    /// report the store holds later (as another `tracer check` would leave it) is not written,
    /// one told is.
    @Test func theLastCheckIsReadFromTheStoreOnceAndThenTold() async throws {
        let directory = NSTemporaryDirectory() + "/tracer-metrics-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let store = try NodeStore.open(StoreLocation(path: directory + "/node.db", source: .flag, ownsDirectory: false))
        func report(_ checkedAt: UnixSeconds, _ level: RiskLevel) -> ExposureCheckReport {
            var assessment = ExposureAssessment(matches: [], model: .standard)
            assessment.level = level
            return ExposureCheckReport(
                checkedAt: checkedAt, list: .init(lastUpdated: checkedAt, generation: 1, publishedAt: checkedAt, batches: 1, updateFailure: nil, offline: false),
                idsChecked: 1, encountersChecked: 0, matchedIDs: 0, idsSeenOutsideTheirWindow: 0, assessment: assessment, newExposure: false)
        }
        func keep(_ report: ExposureCheckReport) throws {
            try store.setStateValue(String(decoding: try JSONEncoder().encode(report), as: UTF8.self), forKey: ExposureChecker.lastReportKey)
        }
        let path = directory + "/tracer.prom"
        let settings = try NodeSettings.resolve(
            configFlag: nil, flags: ["node.metrics_file": path, "check.cache_dir": directory + "/cache"], environment: ["HOME": directory]
        ).settings
        try keep(report(1_700_000_100, .low))
        let file = try #require(NodeMetricsPublisher.following(
            store: store, settings: settings, transport: .tcp(host: "127.0.0.1", port: 1), board: nil, logger: LogCapture().logger))
        let status = NodeRuntimeStatus(pid: 7, startedAt: 1_700_000_000, updatedAt: 1_700_000_000, transport: "tcp:127.0.0.1:1", state: .running)
        func written() throws -> [String] {
            try String(contentsOfFile: path, encoding: .utf8).split(separator: "\n").map(String.init).filter { $0.hasPrefix("tracer_node_last_check") }.sorted()
        }

        await file.write(status)
        #expect(try written() == ["tracer_node_last_check_timestamp_seconds 1700000100.0", "tracer_node_last_check_verdict_level 1.0"])
        try keep(report(1_700_000_200, .high))
        await file.write(status)
        #expect(try written() == ["tracer_node_last_check_timestamp_seconds 1700000100.0", "tracer_node_last_check_verdict_level 1.0"],
                "a write read the store again")
        await file.record(NodeMetrics.Check(report(1_700_000_300, .none)))
        await file.write(status)
        #expect(try written() == ["tracer_node_last_check_timestamp_seconds 1700000300.0", "tracer_node_last_check_verdict_level 0.0"])
        #expect(!(try FileManager.default.contentsOfDirectory(atPath: directory)).contains { $0.hasPrefix(".tmp-") }, "a temporary file was left")
    }

    /// A store that cannot be read when the node starts (locked: a `tracer check` run by hand
    /// holds it) is read again at each write until a read works, and then never again, so the
    /// verdict is not missing until the next check (hours later); a check told before a read
    /// works ends the reading too.
    @Test func aFailedFirstReadOfTheLastCheckIsRetriedAtEachWriteUntilItWorks() async throws {
        struct Locked: Error {}
        let directory = NSTemporaryDirectory() + "/tracer-metrics-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = directory + "/tracer.prom"
        let status = NodeRuntimeStatus(pid: 7, startedAt: 1_700_000_000, updatedAt: 1_700_000_000, transport: "tcp:127.0.0.1:1", state: .running)
        func written() throws -> [String] {
            try String(contentsOfFile: path, encoding: .utf8).split(separator: "\n").map(String.init).filter { $0.hasPrefix("tracer_node_last_check") }.sorted()
        }
        let never = ["tracer_node_last_check_timestamp_seconds 0.0"]
        let stored = NodeMetrics.Check(checkedAt: 1_700_000_100, level: .low)
        /// A reader that fails its first `failures` reads, then gives `check`; and how often it was asked.
        func reader(failing failures: Int, then check: NodeMetrics.Check? = stored)
            -> (read: @Sendable () throws -> NodeMetrics.Check?, count: @Sendable () -> Int)
        {
            let reads = Mutex(0)
            return ({
                let read = reads.withLock { count in count += 1; return count }
                if read <= failures { throw Locked() }
                return check
            }, { reads.withLock { $0 } })
        }

        // The read at start and the first write's fail; the second write's works; no more after.
        let retried = reader(failing: 2)
        let file = NodeMetricsPublisher(
            file: path, transport: .tcp(host: "127.0.0.1", port: 1), placeSource: .none,
            readLastCheck: retried.read, readings: { .init(placeInForce: false) }, logger: LogCapture().logger)
        #expect(retried.count() == 1)
        await file.write(status)
        #expect(try written() == never)
        #expect(retried.count() == 2)
        await file.write(status)
        #expect(try written() == ["tracer_node_last_check_timestamp_seconds 1700000100.0", "tracer_node_last_check_verdict_level 1.0"])
        #expect(retried.count() == 3)
        for _ in 0..<3 { await file.write(status) }
        #expect(retried.count() == 3, "the store was read again after a read worked")
        await file.record(NodeMetrics.Check(checkedAt: 1_700_000_300, level: .high))
        await file.write(status)
        #expect(try written() == ["tracer_node_last_check_timestamp_seconds 1700000300.0", "tracer_node_last_check_verdict_level 2.0"])
        #expect(retried.count() == 3)

        // A check told while the store could not be read is written, and the store is not read again.
        let told = reader(failing: 1)
        let second = NodeMetricsPublisher(
            file: path, transport: .tcp(host: "127.0.0.1", port: 1), placeSource: .none,
            readLastCheck: told.read, readings: { .init(placeInForce: false) }, logger: LogCapture().logger)
        await second.record(NodeMetrics.Check(checkedAt: 1_700_000_200, level: .none))
        for _ in 0..<2 { await second.write(status) }
        #expect(try written() == ["tracer_node_last_check_timestamp_seconds 1700000200.0", "tracer_node_last_check_verdict_level 0.0"])
        #expect(told.count() == 1, "the store was read after a check was told")

        // A read that works and finds no check (never checked) ends the reading too.
        let none = reader(failing: 1, then: nil)
        let third = NodeMetricsPublisher(
            file: path, transport: .tcp(host: "127.0.0.1", port: 1), placeSource: .none,
            readLastCheck: none.read, readings: { .init(placeInForce: false) }, logger: LogCapture().logger)
        for _ in 0..<3 { await third.write(status) }
        #expect(try written() == never)
        #expect(none.count() == 2, "a store that held no check was read again")
    }

    /// A wall clock a test sets.
    final class SetClock: WallClock {
        let time: Mutex<UnixSeconds>
        init(_ time: UnixSeconds) { self.time = Mutex(time) }
        func now() -> UnixSeconds { time.withLock { $0 } }
        func sleep(until time: UnixSeconds) async throws { throw CancellationError() }
        func set(_ time: UnixSeconds) { self.time.withLock { $0 = time } }
    }

    static let hourStart: UnixSeconds = 1_700_002_800  // 22:00 UTC

    /// `peers` other ids heard in the hour from `start`, each once by advertisement and, for the
    /// first `exchanges` sightings, once more through an exchange (read or written).
    static func sightings(peers: Int, exchanges: Int, from start: UnixSeconds) throws -> [Sighting] {
        var sightings: [Sighting] = []
        for index in 0..<max(peers, exchanges) {
            let peer = try UserID(bytes: Array(repeating: UInt8(index % peers + 1), count: 8))
            let time = start + UnixSeconds(index % 3_600)
            if index < peers { sightings.append(Sighting(peer: peer, ownWindowStart: start, time: time, rssi: -60)) }
            if index < exchanges { sightings.append(Sighting(peer: peer, ownWindowStart: start, time: time, learnedBy: index.isMultiple(of: 2) ? .read : .written)) }
        }
        return sightings
    }

    /// The exchanges and encounters of the last whole clock hour: nothing of the hour under way,
    /// 0 below 10 (exchanges also 0 while fewer than 10 ids were heard), each id once however
    /// often heard, zeros once a whole hour passed without the node hearing anyone.
    @Test func theLastWholeHoursCountsAreSuppressedBelowTen() throws {
        func hour(peers: Int, exchanges: Int) throws -> NodeHourlyActivity.Hour {
            let activity = NodeHourlyActivity(now: Self.hourStart + 5)
            for sighting in try Self.sightings(peers: peers, exchanges: exchanges, from: Self.hourStart) { activity.note(sighting) }
            #expect(activity.lastWholeHour(at: Self.hourStart + 3_599) == .init(), "a count of the hour under way")
            return activity.lastWholeHour(at: Self.hourStart + 3_600 + 30)
        }
        #expect(try hour(peers: 1, exchanges: 1) == .init(exchanges: 0, encounters: 0))
        #expect(try hour(peers: 9, exchanges: 40) == .init(exchanges: 0, encounters: 0), "one person or a few in a quiet hour")
        #expect(try hour(peers: 10, exchanges: 9) == .init(exchanges: 0, encounters: 10))
        #expect(try hour(peers: 10, exchanges: 10) == .init(exchanges: 10, encounters: 10))
        #expect(try hour(peers: 25, exchanges: 31) == .init(exchanges: 31, encounters: 25))

        // One id heard all hour counts once; the hour after the next reads 0 again.
        let activity = NodeHourlyActivity(now: Self.hourStart)
        let one = try UserID(bytes: Array(repeating: 0xAB, count: 8))
        for second in stride(from: 0, to: 3_600, by: 2) {
            activity.note(Sighting(peer: one, ownWindowStart: Self.hourStart, time: Self.hourStart + UnixSeconds(second), rssi: -50))
        }
        for sighting in try Self.sightings(peers: 12, exchanges: 12, from: Self.hourStart) { activity.note(sighting) }
        #expect(activity.lastWholeHour(at: Self.hourStart + 3_600) == .init(exchanges: 12, encounters: 13))
        #expect(activity.lastWholeHour(at: Self.hourStart + 7_199) == .init(exchanges: 12, encounters: 13), "the value changed within the hour")
        #expect(activity.lastWholeHour(at: Self.hourStart + 7_200) == .init(), "an hour without anyone kept the hour before's count")
    }

    /// Through the publisher and the file, as node_exporter reads it: the counting sink before the
    /// encounter log, a quiet hour at 0, a busy one with its counts, from the next hour on only.
    @Test func theMetricsFileShowsAnHoursCountsOnlyFromTenAndOnlyOnceItEnded() async throws {
        struct Discard: EncounterSink { func record(_ sighting: Sighting) async {} }
        let directory = NSTemporaryDirectory() + "/tracer-metrics-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = directory + "/tracer.prom"
        let clock = SetClock(Self.hourStart + 60)
        let publisher = NodeMetricsPublisher(
            file: path, transport: .tcp(host: "127.0.0.1", port: 1), placeSource: .none,
            readings: { .init(placeInForce: false) }, clock: clock, logger: LogCapture().logger)
        let sink = publisher.activity.counting(into: Discard())
        let status = NodeRuntimeStatus(pid: 7, startedAt: Self.hourStart, updatedAt: Self.hourStart, transport: "tcp:127.0.0.1:1", state: .running)
        func written() throws -> [String] {
            try String(contentsOfFile: path, encoding: .utf8).split(separator: "\n").map(String.init).filter { !$0.hasPrefix("#") && $0.contains("_last_hour ") }.sorted()
        }
        let zeros = ["tracer_node_encounters_last_hour 0.0", "tracer_node_exchanges_last_hour 0.0"]

        // 22:00-23:00: three people, each exchanging at every rotation: 0 all along and after.
        for sighting in try Self.sightings(peers: 9, exchanges: 27, from: Self.hourStart) { await sink.record(sighting) }
        await publisher.write(status)
        #expect(try written() == zeros)
        clock.set(Self.hourStart + 3_600 + 10)
        await publisher.write(status)
        #expect(try written() == zeros, "a quiet hour's count was shown")

        // 23:00-24:00: busy; nothing of it shows before midnight, then its counts.
        for sighting in try Self.sightings(peers: 14, exchanges: 20, from: Self.hourStart + 3_600) { await sink.record(sighting) }
        clock.set(Self.hourStart + 7_199)
        await publisher.write(status)
        #expect(try written() == zeros, "the hour under way was shown")
        clock.set(Self.hourStart + 7_200 + 45)
        await publisher.write(status)
        #expect(try written() == ["tracer_node_encounters_last_hour 14.0", "tracer_node_exchanges_last_hour 20.0"])
    }

    /// `promtool check metrics` finds nothing wrong (without promtool: a failure in CI, a skip elsewhere).
    static func promtoolFindsNothing(_ exposition: String) throws {
        try RequiredTool.prometheus.require()
        let checked = try PrometheusTools.checkMetrics(exposition)
        #expect(checked.exitCode == 0 && checked.output.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty, "promtool check metrics: \(checked)")
    }
}

extension TracerNodeTests {
    /// Issue 41, item 2, at the process level: a real `tracer run --metrics-file` on a virtual
    /// controller, read by Debian's node_exporter (textfile collector only) and a real Prometheus.
    @Suite(.tags(.endToEnd)) struct NodeMetricsFiles {
        typealias Node = StreamingProcess

        static let placeName = "Bakery Quintessenz, Hauptstr. 12"

        /// The metrics file's sample `name` (without labels), or nil while it has none.
        static func sample(_ name: String, in path: String) -> Double? {
            guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { return nil }
            for line in text.split(separator: "\n") where !line.hasPrefix("#") {
                let parts = line.split(separator: " ")
                let key = parts.first.map { String($0.split(separator: "{")[0]) }
                if key == name, parts.count == 2 { return Double(parts[1]) }
            }
            return nil
        }

        @Test(.timeLimit(.minutes(5)))
        func nodeExporterAndPrometheusReadTheNodesMetricsFile() async throws {
            try RequiredTool.prometheus.require()
            try RequiredTool.nodeExporter.require()
            let scratch = try Scratch()
            defer { scratch.remove() }
            let textfiles = scratch.file("textfile")
            try FileManager.default.createDirectory(atPath: textfiles, withIntermediateDirectories: true)
            let metricsFile = textfiles + "/tracer.prom"
            let radio = try await VirtualRadio.launch(.bumble, controllers: 1)
            defer { radio.stop() }
            let tracer = try Products.path(of: "tracer")
            let node = try Node.readingLog(tracer, NodeResilience.runArguments(scratch.file("a.db"), port: radio.ports[0], extra: ["--metrics-file", metricsFile]),
                                home: scratch.path)
            defer { node.ensureStopped() }

            let advertising = await eventually(timeout: .seconds(30), every: .milliseconds(200)) { Self.sample("tracer_node_advertising", in: metricsFile) == 1 }
            try #require(advertising, "the metrics file never showed advertising 1: \((try? String(contentsOfFile: metricsFile, encoding: .utf8)) ?? "no file"); node: \(node.lines.suffix(8))")
            let text = try String(contentsOfFile: metricsFile, encoding: .utf8)
            let checked = try PrometheusTools.checkMetrics(text)
            #expect(checked.exitCode == 0 && checked.output.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty, "promtool check metrics: \(checked)")
            #expect(Self.sample("tracer_node_running", in: metricsFile) == 1)
            #expect(Self.sample("tracer_node_controller_working", in: metricsFile) == 1)
            #expect(text.contains(#"tracer_node_info{version="\#(Tracer.version)",transport="tcp"} 1.0"#), "\(text)")
            let mode = try #require(FileManager.default.attributesOfItem(atPath: metricsFile)[.posixPermissions] as? Int)
            #expect(mode == 0o644)

            let exporter = try await NodeExporterProcess(textfileDirectory: textfiles)
            defer { exporter.stop() }
            let exported = await exporter.get("/metrics") ?? ""
            #expect(exported.contains("tracer_node_advertising 1"), "node_exporter does not show the file: \(exported.suffix(2_000)); its log: \(exporter.log)")
            #expect(exported.contains("\nnode_textfile_scrape_error 0\n"), "node_exporter could not read the file: \(exporter.log)")
            let prometheus = try await PrometheusProcess(scraping: exporter.port, job: "tracer-node")
            defer { prometheus.stop() }
            var last: Double?
            let seen = await eventually(timeout: .seconds(60), every: .milliseconds(250)) {
                last = await prometheus.value(#"tracer_node_advertising{job="tracer-node"}"#)
                return last == 1
            }
            #expect(seen, "tracer_node_advertising is \(last.map { "\($0)" } ?? "absent") in Prometheus: \(prometheus.log.suffix(2_000))")
            #expect(await prometheus.value(#"tracer_node_info{job="tracer-node",transport="tcp"}"#) == 1)
            // The file's age as TracerNodeMetricsFileStale reads it (its selector, from the shipped
            // rules): node_exporter's file label matches, and the file is fresh.
            let rules = try String(contentsOfFile: RequiredTool.repositoryRoot + "/deploy/monitoring/tracer-node.rules.yml", encoding: .utf8)
            let selector = try #require(rules.firstMatch(of: #/node_textfile_mtime_seconds\{[^}]*\}/#).map { String($0.output) })
            var age: Double?
            let aged = await eventually(timeout: .seconds(10), every: .milliseconds(250)) {
                age = await prometheus.value("time() - " + selector)
                return age != nil
            }
            #expect(aged && (age ?? .infinity) < 300, "\(selector) gave \(age.map { "\($0)" } ?? "nothing"): \(exported.suffix(1_000))")

            // Stopped: the file stays, with the node stopped.
            node.stopCleanly("the node")
            #expect(Self.sample("tracer_node_running", in: metricsFile) == 0)
            #expect(Self.sample("tracer_node_advertising", in: metricsFile) == 0)
            #expect(try FileManager.default.contentsOfDirectory(atPath: textfiles) == ["tracer.prom"], "a temporary file was left beside the metrics")
        }

        /// Two nodes meet; whatever the metrics file of one says at any time, it never holds its
        /// own ids (hex or tag), the peer's, its database path or its place's name.
        @Test(.timeLimit(.minutes(5)))
        func theMetricsFileHoldsNoIdNoPathAndNoPlace() async throws {
            let scratch = try Scratch()
            defer { scratch.remove() }
            let metricsFile = scratch.file("tracer.prom")
            let radio = try await VirtualRadio.launch(.bumble, controllers: 2)
            defer { radio.stop() }
            let tracer = try Products.path(of: "tracer")
            let dbA = scratch.file("a.db"), dbB = scratch.file("b.db")
            let a = try Node.readingLog(tracer, NodeResilience.runArguments(dbA, port: radio.ports[0], extra: ["--metrics-file", metricsFile, "--place-name", Self.placeName]),
                             home: scratch.path)
            defer { a.ensureStopped() }
            let b = try Node.readingLog(tracer, NodeResilience.runArguments(dbB, port: radio.ports[1]), home: scratch.path)
            defer { b.ensureStopped() }

            // A logged sightings of B, and its metrics file was written again after that (at least
            // every 60 s and on every status change): every version of it is kept to be searched.
            // No count of sightings is in it: over time it would show when people were near.
            // (Whole hours' counts are, suppressed below 10.)
            var snapshots: [String] = []
            var metAt: Int?
            let rewritten = await eventually(timeout: .seconds(90), every: .milliseconds(500)) {
                if let text = try? String(contentsOfFile: metricsFile, encoding: .utf8), snapshots.last != text { snapshots.append(text) }
                if metAt == nil, (try? NodeResilience.rows(dbA, home: scratch.path).isEmpty) == false { metAt = snapshots.count }
                return metAt.map { snapshots.count > $0 } ?? false
            }
            #expect(rewritten, "A met no one, or its metrics file was not written after it did: \(snapshots.last ?? "no file"); A: \(a.lines.suffix(8))")
            #expect(!snapshots.contains { $0.contains("sighting") }, "\(snapshots.last ?? "")")
            // The only counts of people are the last whole hour's, and one peer is below 10: 0.
            for snapshot in snapshots {
                let counts = snapshot.split(separator: "\n").filter { line in
                    let name = line.prefix { $0 != "{" && $0 != " " }
                    return !line.hasPrefix("#") && (name.contains("encounter") || name.contains("exchange"))
                }
                #expect(counts.sorted() == ["tracer_node_encounters_last_hour 0.0", "tracer_node_exchanges_last_hour 0.0"], "\(counts)")
            }
            #expect(Self.sample(#"tracer_node_place_in_force"#, in: metricsFile) == 1)
            let rowsOfA = try NodeResilience.rows(dbA, home: scratch.path)
            #expect(!rowsOfA.isEmpty, "A logged no encounter")
            let ownIDs = try NodeResilience.ownIDs(dbA, home: scratch.path).keys
            let tag = try NodeResilience.status(dbA, home: scratch.path)["currentIDTag"] as? String
            a.stopCleanly("node A")
            b.stopCleanly("node B")
            if let text = try? String(contentsOfFile: metricsFile, encoding: .utf8) { snapshots.append(text) }

            var secrets = Array(ownIDs) + rowsOfA.map(\.peer) + [dbA, "a.db", scratch.path, Self.placeName, "Bakery", "Quintessenz"]
            if let tag { secrets.append(tag) } else { Issue.record("tracer status gave no id tag") }
            #expect(!ownIDs.isEmpty)
            for snapshot in snapshots {
                let lowered = snapshot.lowercased()
                for secret in secrets where lowered.contains(secret.lowercased()) {
                    Issue.record("the metrics file holds \(secret): \(snapshot)")
                }
                // Every label value comes from a fixed set.
                for line in snapshot.split(separator: "\n") where !line.hasPrefix("#") && line.contains("{") {
                    let labels = line.split(separator: "{")[1].split(separator: "}")[0]
                    for pair in labels.split(separator: ",") {
                        let parts = pair.split(separator: "=", maxSplits: 1).map(String.init)
                        let allowed: Set<String> = switch parts[0] {
                        case "version": [#""\#(Tracer.version)""#]
                        case "transport": [#""hci""#, #""tcp""#, #""unix""#, #""serial""#]
                        case "what": [#""next_id""#, #""encounters""#]
                        case "source": [#""none""#, #""gpsd""#]
                        default: []
                        }
                        #expect(allowed.contains(parts[1]), "label \(pair) in \(line)")
                    }
                }
            }
        }
    }
}
