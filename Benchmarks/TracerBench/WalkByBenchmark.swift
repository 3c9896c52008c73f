import Foundation
import IDRotation
import TracerCore
import TracerTestSupport

/// People walking past a few fixed nodes: 6 resident `tracer run` nodes run on one RootCanal phy
/// (controller models in turn, `CrowdPhy.rootCanalModels`) for the whole run; from 30 s after
/// they start, a visitor arrives every 30 s — a fresh `tracer run` with a fresh database on a
/// controller of its own, so a random address no one has heard — stays 60, 120, 180 or 300 s
/// (visitor i the i % 4th) and is stopped (SIGTERM, then waited for). Per (visitor, resident)
/// pair: the time from the visitor's process start until the resident's store logged the
/// visitor and until the visitor's store logged the resident; the earlier is its first sighting,
/// the later its meeting both ways. Also each node's CPU and peak RSS, and the receiver-on share
/// of its radio account from its status file.
///
/// The whole walk-by runs once per scan schedule, each on a new phy with new nodes, the schedule
/// given to every node as TRACER_SCAN_SCHEDULE (a build without that setting ignores it; the
/// header says what `tracer config` makes of it), then the schedules side by side.
///
/// The nodes keep their default rotation interval (15 min, no jitter): a stay of at most 300 s
/// crosses at most one boundary, and every id a node had is mapped to that node from its own
/// store, so a rotation during a stay changes nothing in the figures.
struct WalkByBenchmark {
    let repository: URL
    let directory: String
    let visitors: Int
    let schedules: [String]

    static let residents = 6
    static let stays: [TimeInterval] = [60, 120, 180, 300]
    static let arrivalSpacing: TimeInterval = 30
    /// The residents run this long before the first visitor arrives.
    static let headStart: TimeInterval = 30
    /// A node stopping after SIGTERM gets this long before SIGKILL: it writes its last status then.
    static let stopGrace: TimeInterval = 10
    static let firstSightingP95Target: TimeInterval = 20
    static let firstSightingMaxTarget: TimeInterval = 30

    static func stay(ofVisitor index: Int) -> TimeInterval { stays[index % stays.count] }

    /// One `tracer run` process of the walk-by and what was measured of it.
    struct Node {
        let name: String
        let model: String
        let database: String
        let log: String
        let process: ChildProcess
        let started: Date
        var stopped: Date?
        var cpuSeconds: Double?
        var peakRSS: Int?
        /// "exit 0" and the like, with a note when it needed SIGKILL or ended by itself.
        var end = ""
        var exitedEarly = false

        var isLive: Bool { stopped == nil }

        /// CPU and peak RSS from /proc while it still runs, then SIGTERM and the wait.
        mutating func finish() {
            if process.isRunning {
                cpuSeconds = ProcessFigures.cpuSeconds(process.pid)
                peakRSS = ProcessFigures.peakResidentBytes(process.pid)
            }
            let clean = process.stop(grace: WalkByBenchmark.stopGrace)
            stopped = Date()
            end = (process.exitDescription ?? "?") + (clean ? "" : " (SIGKILL after \(Int(WalkByBenchmark.stopGrace)) s)")
        }

        var cpuShare: Double? {
            guard let cpuSeconds, let stopped else { return nil }
            return cpuSeconds / stopped.timeIntervalSince(started)
        }
    }

    /// The figures of one schedule, for the table at the end.
    struct Figures {
        let schedule: String
        let setting: String
        let pairs: Int
        let firstSightings: [Double]
        let bothWays: [Double]
        let notMet: [String]
        let residentCPU: [Double]
        let visitorCPU: [Double]
        let peakRSS: [Int]
        let residentReceiver: [Double]
        let visitorReceiver: [Double]
        let troubles: [String]
    }

    func run() async throws {
        let built = try CrowdBenchmark.nodeBinary()
        // One copy for the whole invocation: a rebuild of tracer while the schedules run (another
        // change under way in Sources/) must not give later visitors another node.
        let binary = directory + "/tracer"
        try? FileManager.default.removeItem(atPath: binary)
        try FileManager.default.copyItem(atPath: built, toPath: binary)
        let last = (0..<visitors).map { Self.headStart + Double($0) * Self.arrivalSpacing + Self.stay(ofVisitor: $0) }.max() ?? Self.headStart
        say("# Walk-by on RootCanal: \(Self.residents) resident tracer run nodes, \(visitors) visitors arriving every "
            + "\(Int(Self.arrivalSpacing)) s from \(Int(Self.headStart)) s, staying "
            + Self.stays.map { "\(Int($0))" }.joined(separator: "/") + " s in turn; default rotation interval; schedules "
            + schedules.joined(separator: ", ") + String(format: "; about %.1f min per schedule (%@)", last / 60, "\(Date())"))
        say("node binary: \(built) (run from a copy in \(directory))")
        var results: [Figures] = []
        for schedule in schedules {
            results.append(try await walkBy(schedule: schedule, binary: binary))
        }
        sideBySide(results)
    }

    /// What `tracer config` makes of TRACER_SCAN_SCHEDULE=schedule: its node.scan_schedule line.
    private func effectiveSetting(_ schedule: String, binary: String, folder: String) throws -> String {
        let probe = try ChildProcess.start(
            binary, ["config", "--db", folder + "/config-probe.db"], environment: ["TRACER_SCAN_SCHEDULE": schedule])
        let output = try probe.readAll(timeout: 30)
        guard !output.isEmpty else {
            throw BenchmarkError("tracer config refused TRACER_SCAN_SCHEDULE=\(schedule) (\(probe.exitDescription ?? "?"))")
        }
        guard let line = output.split(separator: "\n").first(where: { $0.hasPrefix("node.scan_schedule") }) else {
            return "this node build has no node.scan_schedule: it ignores TRACER_SCAN_SCHEDULE (its built-in schedule)"
        }
        return "node.scan_schedule as the nodes see it: " + line.split(separator: " ").dropFirst().joined(separator: " ")
    }

    private func walkBy(schedule: String, binary: String) async throws -> Figures {
        let folder = directory + "/" + schedule
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let environment = ["TRACER_SCAN_SCHEDULE": schedule]
        say("")
        say("## Schedule \(schedule) (TRACER_SCAN_SCHEDULE=\(schedule)), \(Date())")
        let setting = try effectiveSetting(schedule, binary: binary, folder: folder)
        say(setting)
        say("node files (databases, JSON logs at warning, status files, rootcanal's log): \(folder)")

        let models = (0..<Self.residents + visitors).map(CrowdPhy.rootcanal.model(ofNode:))
        let link = try VirtualLinkProcess.start(repository: repository, rootCanalModels: models, logDirectory: folder)
        defer {
            link.process.closeInput()
            link.process.stop()
        }
        let ports = link.ports

        func start(_ name: String, index: Int) throws -> Node {
            let database = folder + "/\(name).db", log = folder + "/\(name).log"
            let process = try CrowdBenchmark.startNode(
                binary: binary, database: database, port: ports[index], rotationInterval: nil, logLevel: "warning", logFile: log,
                environment: environment)
            return Node(name: name, model: models[index], database: database, log: log, process: process, started: Date())
        }
        var residents: [Node] = []
        var guests: [Node] = []
        // Whatever happens, no node outlives the run.
        defer {
            for index in residents.indices where residents[index].isLive { residents[index].process.stop() }
            for index in guests.indices where guests[index].isLive { guests[index].process.stop() }
        }
        for index in 0..<Self.residents { residents.append(try start("r\(index)", index: index)) }
        let origin = Date()
        func since(_ date: Date) -> String { String(format: "%5.1f s", date.timeIntervalSince(origin)) }
        say("  \(since(origin)): residents r0-r\(Self.residents - 1) started (" + residents.map(\.model).joined(separator: ", ") + ")")

        var troubles: [String] = []
        while guests.count < visitors || guests.contains(where: \.isLive) {
            let now = Date()
            if guests.count < visitors, now.timeIntervalSince(origin) >= Self.headStart + Double(guests.count) * Self.arrivalSpacing {
                let index = guests.count
                guests.append(try start("v\(index)", index: Self.residents + index))
                say("  \(since(guests[index].started)): v\(index) arrives (\(guests[index].model)), stays \(Int(Self.stay(ofVisitor: index))) s")
            }
            for index in guests.indices where guests[index].isLive {
                let guest = guests[index]
                if !guest.process.isRunning {
                    guests[index].finish()
                    guests[index].exitedEarly = true
                    troubles.append("\(guest.name) ended by itself at \(since(guests[index].stopped!)) (\(guests[index].end))")
                    say("  " + troubles.last!)
                } else if now.timeIntervalSince(guest.started) >= Self.stay(ofVisitor: index) {
                    guests[index].finish()
                    say("  \(since(guests[index].stopped!)): v\(index) leaves (\(guests[index].end))")
                }
            }
            for index in residents.indices where residents[index].isLive && !residents[index].process.isRunning {
                residents[index].finish()
                residents[index].exitedEarly = true
                troubles.append("\(residents[index].name) ended by itself at \(since(residents[index].stopped!)) (\(residents[index].end))")
                say("  " + troubles.last!)
            }
            try await Task.sleep(for: .milliseconds(200))
        }
        for index in residents.indices where residents[index].isLive { residents[index].finish() }
        say("  \(since(Date())): residents stopped (" + Set(residents.map(\.end)).sorted().joined(separator: ", ") + "); load average "
            + ProcessFigures.loadAverage())
        for node in residents + guests where node.end.contains("SIGKILL") { troubles.append("\(node.name): \(node.end)") }
        link.process.closeInput()
        link.process.stop()

        return try figures(schedule: schedule, setting: setting, folder: folder, residents: residents, guests: guests, troubles: troubles)
    }

    private func figures(
        schedule: String, setting: String, folder: String, residents: [Node], guests: [Node], troubles: [String]
    ) throws -> Figures {
        var troubles = troubles
        let nodes = residents + guests
        let records = try nodes.map { try NodeRecord.read($0.database) }
        // Every id a node had is that node's.
        var owner: [UserID: Int] = [:]
        for (index, record) in records.enumerated() {
            for own in record.ownIDs { owner[own.id] = index }
        }
        for (index, record) in records.enumerated() {
            let unknown = Set(record.encounters.map(\.peer).filter { owner[$0] == nil })
            if !unknown.isEmpty {
                troubles.append("\(nodes[index].name) logged \(unknown.count) ids no node of the run had")
            }
        }
        /// When `observer` first logged any id of node `peer`.
        func firstLogged(_ observer: Int, _ peer: Int) -> UnixSeconds? {
            records[observer].encounters.filter { owner[$0.peer] == peer }.map(\.firstSeen).min()
        }
        // Seconds after the visitor's start; the store keeps whole seconds (rounded down), so a
        // time may read up to 1 s early: never before the start.
        func after(_ time: UnixSeconds?, _ start: Date) -> Double? {
            time.map { max(0, Double($0) - start.timeIntervalSince1970) }
        }
        func cell(_ value: Double?) -> String { value.map { String(format: "%.0f", $0) } ?? "–" }

        say("")
        say("(visitor, resident) pairs: s from the visitor's start until the resident logged the visitor / the visitor logged the resident")
        say("(whole seconds, as the stores keep them; – never):")
        say("visitor  controller          stay s  " + residents.map { $0.name.padding(toLength: 9, withPad: " ", startingAt: 0) }.joined())
        var firstSightings: [Double] = [], bothWays: [Double] = [], notMet: [String] = []
        for (offset, guest) in guests.enumerated() {
            let visitor = residents.count + offset
            let stayed = (guest.stopped ?? Date()).timeIntervalSince(guest.started)
            var line = guest.name.padding(toLength: 9, withPad: " ", startingAt: 0)
                + guest.model.padding(toLength: 20, withPad: " ", startingAt: 0) + String(format: "%6.0f  ", stayed)
            for resident in residents.indices {
                let residentLogged = after(firstLogged(resident, visitor), guest.started)
                let visitorLogged = after(firstLogged(visitor, resident), guest.started)
                line += (cell(residentLogged) + "/" + cell(visitorLogged)).padding(toLength: 9, withPad: " ", startingAt: 0)
                let times = [residentLogged, visitorLogged].compactMap { $0 }
                if let first = times.min() { firstSightings.append(first) }
                if times.count == 2, let both = times.max(), both <= stayed {
                    bothWays.append(both)
                } else {
                    notMet.append("\(guest.name)–\(residents[resident].name) (\(cell(residentLogged))/\(cell(visitorLogged)) of \(Int(stayed)) s)")
                }
            }
            say(line)
        }
        let pairs = guests.count * residents.count
        say("")
        say("first sighting: " + spread(firstSightings, of: pairs)
            + "  (targets: p95 ≤ \(Int(Self.firstSightingP95Target)) s, max ≤ \(Int(Self.firstSightingMaxTarget)) s)")
        say("both ways:      " + spread(bothWays, of: pairs))
        say("pairs not met both ways during the stay: \(notMet.count) of \(pairs) (target 0)" + (notMet.isEmpty ? "" : ": " + notMet.joined(separator: ", ")))

        // The radio account each node wrote into its status file (last at its stop).
        let receiver = nodes.map { Self.receiverShare(statusFile: StoreLocation(path: $0.database, source: .flag, ownsDirectory: false).statusFilePath) }
        say("")
        say("node  controller          life s   CPU s  CPU % of a core  peak RSS MB  receiver on %  end")
        for (index, node) in nodes.enumerated() {
            let life = (node.stopped ?? Date()).timeIntervalSince(node.started)
            say(node.name.padding(toLength: 6, withPad: " ", startingAt: 0) + node.model.padding(toLength: 18, withPad: " ", startingAt: 0)
                + String(format: "  %6.0f  %6.2f  ", life, node.cpuSeconds ?? .nan)
                + figure(node.cpuShare.map { $0 * 100 }, 2).leftPadded(15)
                + figure(node.peakRSS.map { Double($0) / 1_048_576 }, 1).leftPadded(13)
                + figure(receiver[index].map { $0 * 100 }, 2).leftPadded(15) + "  " + node.end)
        }
        let residentCPU = residents.compactMap(\.cpuShare).map { $0 * 100 }
        let visitorCPU = guests.compactMap(\.cpuShare).map { $0 * 100 }
        let residentReceiver = receiver.prefix(residents.count).compactMap { $0 }.map { $0 * 100 }
        let visitorReceiver = receiver.dropFirst(residents.count).compactMap { $0 }.map { $0 * 100 }
        say("residents: CPU mean " + figure(mean(residentCPU), 2) + " %, max " + figure(residentCPU.max(), 2)
            + " % of a core; receiver on (radio account, last hour) mean " + figure(mean(residentReceiver), 2) + " %"
            + (residentReceiver.count < residents.count ? " (\(residents.count - residentReceiver.count) status files without it)" : ""))
        say("visitors:  CPU mean " + figure(mean(visitorCPU), 2) + " %, max " + figure(visitorCPU.max(), 2)
            + " % of a core; receiver on mean " + figure(mean(visitorReceiver), 2) + " %; peak RSS of all nodes "
            + figure(nodes.compactMap(\.peakRSS).min().map { Double($0) / 1_048_576 }, 1) + "–"
            + figure(nodes.compactMap(\.peakRSS).max().map { Double($0) / 1_048_576 }, 1) + " MB")

        // What went wrong, as the nodes logged it (warning and up).
        var messages: [String: Int] = [:]
        for node in nodes {
            for event in NodeLog.read(node.log).events where ["warning", "error", "critical"].contains(event.level) {
                let words = event.message.split(separator: " ").prefix(6).joined(separator: " ")
                messages["\(event.level): \(words)", default: 0] += 1
            }
        }
        if messages.isEmpty {
            say("node logs: no warning or error")
        } else {
            say("node logs, warnings and errors (all nodes):")
            for (message, count) in messages.sorted(by: { $0.value > $1.value }).prefix(15) { say("  \(count)× \(message)") }
        }
        rootCanalLog(folder: folder)
        if !troubles.isEmpty { say("trouble: " + troubles.joined(separator: "; ")) }

        return Figures(
            schedule: schedule, setting: setting, pairs: pairs, firstSightings: firstSightings, bothWays: bothWays, notMet: notMet,
            residentCPU: residentCPU, visitorCPU: visitorCPU, peakRSS: nodes.compactMap(\.peakRSS),
            residentReceiver: residentReceiver, visitorReceiver: visitorReceiver, troubles: troubles)
    }

    /// rootcanal's warnings and errors (rootcanal_phy.py's log in the run's folder), by source line.
    private func rootCanalLog(folder: String) {
        let files = ((try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? [])
            .filter { $0.hasPrefix("rootcanal-") && $0.hasSuffix(".log") }
        var counts: [String: (count: Int, example: String)] = [:]
        for file in files {
            let text = (try? String(contentsOfFile: folder + "/" + file, encoding: .utf8)) ?? ""
            // "root-canal W 11-29 19:02:47.405 link_layer_controller.cc:3324  5  message"
            for line in text.split(separator: "\n") {
                let fields = line.split(separator: " ", maxSplits: 5, omittingEmptySubsequences: true)
                guard fields.count == 6, ["W", "E", "F"].contains(fields[1]) else { continue }
                let key = "\(fields[1]) \(fields[4])"
                counts[key, default: (0, String(fields[5].trimmingCharacters(in: .whitespaces).prefix(110)))].count += 1
            }
        }
        if counts.isEmpty {
            say("rootcanal log: no warning or error" + (files.isEmpty ? " (no log found)" : ""))
            return
        }
        say("rootcanal log, warnings and errors by source line: " + counts.sorted { $0.value.count > $1.value.count }.map {
            "\($0.value.count)× \($0.key) (\($0.value.example))"
        }.joined(separator: "; "))
    }

    /// radioTime.lastHour's receiver share in a node's status file (NodeRuntimeStatus), if it has one.
    static func receiverShare(statusFile: String) -> Double? {
        FileManager.default.contents(atPath: statusFile).flatMap(CrowdFigures.receiverShare(status:))
    }

    private func spread(_ values: [Double], of pairs: Int) -> String {
        guard !values.isEmpty else { return "no pair (of \(pairs))" }
        return String(format: "p50 %.0f s, p95 %.0f s, max %.0f s over %d of %d pairs",
                      RefreshBenchmark.percentile(values, 0.5), RefreshBenchmark.percentile(values, 0.95), values.max()!, values.count, pairs)
    }

    private func mean(_ values: [Double]) -> Double? { values.isEmpty ? nil : values.reduce(0, +) / Double(values.count) }

    private func figure(_ value: Double?, _ decimals: Int) -> String {
        guard let value, value.isFinite else { return "–" }
        return format(value, decimals)
    }

    private func sideBySide(_ results: [Figures]) {
        say("")
        say("## Walk-by, schedules side by side (\(Self.residents) residents, \(visitors) visitors; times in s from the visitor's start)")
        let width = 16
        func row(_ name: String, _ cells: [String], _ target: String = "") {
            say(name.padding(toLength: 34, withPad: " ", startingAt: 0) + cells.map { $0.leftPadded(width) }.joined() + "  " + target)
        }
        func percentile(_ values: [Double], _ fraction: Double) -> String {
            values.isEmpty ? "–" : format(RefreshBenchmark.percentile(values, fraction), 0)
        }
        row("schedule", results.map(\.schedule), "target")
        row("first sighting p50", results.map { percentile($0.firstSightings, 0.5) })
        row("first sighting p95", results.map { percentile($0.firstSightings, 0.95) }, "≤ \(Int(Self.firstSightingP95Target))")
        row("first sighting max", results.map { figure($0.firstSightings.max(), 0) }, "≤ \(Int(Self.firstSightingMaxTarget))")
        row("pairs sighted", results.map { "\($0.firstSightings.count)/\($0.pairs)" })
        row("both ways p50", results.map { percentile($0.bothWays, 0.5) })
        row("both ways p95", results.map { percentile($0.bothWays, 0.95) })
        row("both ways max", results.map { figure($0.bothWays.max(), 0) })
        row("pairs not met both ways", results.map { "\($0.notMet.count)/\($0.pairs)" }, "0")
        row("resident CPU mean, % of a core", results.map { figure(mean($0.residentCPU), 2) })
        row("resident CPU max, %", results.map { figure($0.residentCPU.max(), 2) })
        row("visitor CPU mean, %", results.map { figure(mean($0.visitorCPU), 2) })
        row("peak RSS max, MB", results.map { figure($0.peakRSS.max().map { Double($0) / 1_048_576 }, 1) })
        row("resident receiver on mean, %", results.map { figure(mean($0.residentReceiver), 2) })
        row("visitor receiver on mean, %", results.map { figure(mean($0.visitorReceiver), 2) })
        for result in results {
            say("\(result.schedule): \(result.setting)" + (result.troubles.isEmpty ? "" : "; trouble: " + result.troubles.joined(separator: "; ")))
            if !result.notMet.isEmpty { say("  not met both ways: " + result.notMet.joined(separator: ", ")) }
        }
    }
}

private extension String {
    func leftPadded(_ width: Int) -> String { count >= width ? " " + self : String(repeating: " ", count: width - count) + self }
}
