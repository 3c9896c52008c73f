import Foundation
import IDRotation
import TracerCore
import TracerTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// The virtual radio a crowd runs on. Both give every controller its own H4 TCP port and put them
/// all on one LE phy, and both launchers print "READY p1 p2 ..." and stop when stdin closes.
enum CrowdPhy: String {
    /// Bumble's LocalLink (Tests/Support/bumble/virtual_link.py): lenient controllers.
    case bumble
    /// Android's RootCanal (rootcanal_phy.py): spec-faithful controllers of mixed models.
    case rootcanal

    /// The controller model of node `index` on RootCanal: the three presets in turn.
    static let rootCanalModels = ["DEFAULT", "LAIRD_BL654", "CSR_RCK_PTS_DONGLE"]

    func model(ofNode index: Int) -> String {
        switch self {
        case .bumble: "bumble"
        case .rootcanal: Self.rootCanalModels[index % Self.rootCanalModels.count]
        }
    }
}

/// N `tracer run` processes (release build) on one virtual phy for a number of minutes, with the
/// default duty cycle: each node's average CPU and peak memory, its store's growth, the exchanges
/// per id window, the share of (observer, broadcaster id) pairs logged per window, and, from the
/// node logs and from a listener on the phy, the time a node was not advertising outside its
/// rotations. In the same run a Bumble device doing the same advertising and scanning gives the CPU
/// baseline (and, never changing address, a reference for the listener).
struct CrowdBenchmark {
    let repository: URL
    let directory: String
    let nodes: Int
    let minutes: Double
    var phy: CrowdPhy = .bumble
    /// Short windows so that a 10-minute run spans several of them.
    var rotationInterval = 120
    /// The nodes' log level; their JSON logs go to a file per node.
    var logLevel = "error"
    /// Runs a passive listener (Benchmarks/tools/advertising_observer.py) on the phy.
    var observeAdvertising = false

    var python: String { VirtualLinkProcess.python(repository: repository) }

    var rootCanalLauncher: String { VirtualLinkProcess.rootCanalLauncher(repository: repository) }

    /// The node binary: the release build of `tracer` beside this TracerBench, or TRACER_BINARY,
    /// which measures another build of the node, for example one linked with
    /// --static-swift-stdlib, as a deployment would use.
    static func nodeBinary() throws -> String {
        let binary = ProcessInfo.processInfo.environment["TRACER_BINARY"]
            ?? URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath().deletingLastPathComponent()
            .appendingPathComponent("tracer").path
        guard FileManager.default.isExecutableFile(atPath: binary) else {
            throw BenchmarkError("build tracer next to TracerBench first: swift build -c release --product tracer && swift build -c release --product TracerBench")
        }
        return binary
    }

    /// `tracer run` on the H4 controller at 127.0.0.1:`port`, with JSON logs at `logLevel` into
    /// `logFile`; a nil `rotationInterval` leaves the node's default. `environment` is added to
    /// this process's for the node (TRACER_SCAN_SCHEDULE, say).
    static func startNode(
        binary: String, database: String, port: UInt16, rotationInterval: Int?, logLevel: String, logFile: String,
        environment: [String: String] = [:]
    ) throws -> ChildProcess {
        try ChildProcess.start(binary, [
            "run", "--db", database, "--transport", "tcp:127.0.0.1:\(port)",
        ] + (rotationInterval.map { ["--rotation-interval", "\($0)"] } ?? []) + [
            "--log-level", logLevel, "--log-format", "json",
        ], logFile: logFile, environment: environment)
    }

    func run() async throws {
        let binary = try Self.nodeBinary()
        // Controllers: the nodes, then the duty-cycle device, then the listener.
        let controllers = nodes + 1 + (observeAdvertising ? 1 : 0)
        say("# Crowd benchmark on \(phy.rawValue): \(nodes) tracer run nodes + 1 Bumble duty-cycle device"
            + (observeAdvertising ? " + 1 passive listener" : "") + ", one phy, \(minutes) min, ids rotating every "
            + "\(rotationInterval) s, node log level \(logLevel) (\(Date()))")
        say("node binary: \(binary)")
        say("node files (databases, JSON logs): \(directory)")
        let link: ChildProcess
        switch phy {
        case .bumble:
            link = try ChildProcess.start(python, [repository.appendingPathComponent("Tests/Support/bumble/virtual_link.py").path, "\(controllers)"])
        case .rootcanal:
            guard FileManager.default.fileExists(atPath: rootCanalLauncher) else {
                throw BenchmarkError("no RootCanal launcher at \(rootCanalLauncher); set TRACER_ROOTCANAL_PHY")
            }
            let models = (0..<nodes).map(phy.model(ofNode:)) + Array(repeating: "DEFAULT", count: controllers - nodes)
            say("launcher: \(rootCanalLauncher) \(models.joined(separator: " "))")
            link = try ChildProcess.start(python, [rootCanalLauncher] + models, environment: ["TRACER_ROOTCANAL_LOG_DIR": directory])
        }
        defer { link.stop() }
        let ready = try link.readLine(timeout: 30)
        let ports = ready.split(separator: " ").dropFirst().compactMap { UInt16($0) }
        guard ready.hasPrefix("READY"), ports.count == controllers else { throw BenchmarkError("the phy launcher said: \(ready)") }

        // The listener first, so that it hears every node from its first advertisement.
        let airLog = directory + "/air.txt"
        let observer = try observeAdvertising ? ChildProcess.start(python, [
            repository.appendingPathComponent("Benchmarks/tools/advertising_observer.py").path,
            "tcp-client:127.0.0.1:\(ports[nodes + 1])", airLog,
        ]) : nil
        defer { observer?.stop() }
        if let observer, try observer.readLine(timeout: 30) != "READY" { throw BenchmarkError("the listener did not start") }

        let databases = (0..<nodes).map { directory + "/node\($0).db" }
        let logs = (0..<nodes).map { directory + "/node\($0).log" }
        let runs = try (0..<nodes).map { index in
            try Self.startNode(
                binary: binary, database: databases[index], port: ports[index], rotationInterval: rotationInterval,
                logLevel: logLevel, logFile: logs[index])
        }
        defer { runs.forEach { $0.stop() } }
        let bumble = try ChildProcess.start(python, [
            repository.appendingPathComponent("Benchmarks/baselines/bumble_duty_cycle.py").path, "tcp-client:127.0.0.1:\(ports[nodes])",
        ])
        defer { bumble.stop() }
        guard try bumble.readLine(timeout: 30) == "READY" else { throw BenchmarkError("the Bumble device did not start") }

        // The phy: its launcher and what that started (rootcanal itself).
        let phyProcesses = [link.pid] + ProcessFigures.descendants(of: link.pid)
        let measured = runs.map(\.pid) + [bumble.pid]
        let start = Date()
        let startCPU = measured.map(ProcessFigures.cpuSeconds)
        let startPhyCPU = phyProcesses.map(ProcessFigures.cpuSeconds).reduce(0, +)
        let startObserverCPU = observer.map { ProcessFigures.cpuSeconds($0.pid) } ?? 0
        let startStoreBytes = databases.map(ProcessFigures.storeBytes)
        let startTime = SystemWallClock().now()
        let end = start.addingTimeInterval(minutes * 60)
        var lastReport = start
        var fullMesh: TimeInterval?
        while Date() < end {
            try await Task.sleep(for: .seconds(fullMesh == nil ? 1 : 5))
            if fullMesh == nil, try everyNodeLoggedEveryOther(databases) {
                fullMesh = Date().timeIntervalSince(start)
                say(String(format: "  every node has logged every other after %.1f s", fullMesh!))
            }
            if Date().timeIntervalSince(lastReport) >= 60 {
                lastReport = Date()
                say(String(format: "  %.0f s elapsed", Date().timeIntervalSince(start)) + ", load average " + ProcessFigures.loadAverage())
            }
            for (index, run) in runs.enumerated() where !run.isRunning { throw BenchmarkError("node \(index) exited during the run") }
        }
        let wall = Date().timeIntervalSince(start)
        let endCPU = measured.map(ProcessFigures.cpuSeconds)
        let endPhyCPU = phyProcesses.map(ProcessFigures.cpuSeconds).reduce(0, +)
        let endObserverCPU = observer.map { ProcessFigures.cpuSeconds($0.pid) } ?? 0
        let peaks = measured.map(ProcessFigures.peakResidentBytes)
        let shares = measured.map(ProcessFigures.memoryShares)
        let statusFiles = databases.map { (try? String(contentsOfFile: $0 + "-status.json", encoding: .utf8)) ?? "" }
        let endTime = SystemWallClock().now()
        let endInstant = Date().timeIntervalSince1970
        runs.forEach { $0.stop() }
        bumble.closeInput()
        bumble.stop()
        if let observer {
            observer.closeInput()
            say("listener: " + ((try? observer.readLine(timeout: 15)) ?? "did not say how many reports it wrote"))
        }

        let cpu = zip(startCPU, endCPU).map { ($1 - $0) / wall * 100 }
        let growth = zip(startStoreBytes, databases.map(ProcessFigures.storeBytes)).map { $1 - $0 }
        say("")
        // RSS counts every shared library page the process touched, although ten nodes share one
        // copy; PSS divides shared pages among their users, private memory is the node's alone.
        say("node  controller          cpu % of a core  peak RSS MB  PSS MB  private MB  store growth KB")
        for index in 0..<nodes {
            let model = phy.model(ofNode: index).padding(toLength: 18, withPad: " ", startingAt: 0)
            say(String(format: "%4d  ", index) + model + String(format: "  %15.2f  %11.1f  %6.1f  %10.1f  %15.1f", cpu[index],
                       Double(peaks[index]) / 1_048_576, shares[index].pss / 1024, shares[index].private / 1024,
                       Double(growth[index]) / 1024))
        }
        let nodeCPU = cpu.prefix(nodes)
        let averageCPU = nodeCPU.reduce(0, +) / Double(nodes)
        say(String(format: "nodes: mean CPU %.2f %% of a core (max %.2f %%, target < 5 %%); peak RSS %.1f–%.1f MB, max PSS %.1f MB, max private %.1f MB (target < 30 MB)",
                   averageCPU, nodeCPU.max() ?? 0, Double(peaks.prefix(nodes).min() ?? 0) / 1_048_576,
                   Double(peaks.prefix(nodes).max() ?? 0) / 1_048_576,
                   (shares.prefix(nodes).map(\.pss).max() ?? 0) / 1024, (shares.prefix(nodes).map(\.private).max() ?? 0) / 1024))
        say(String(format: "bumble duty-cycle device: CPU %.2f %% of a core, peak RSS %.1f MB; ratio node/bumble CPU %.2fx",
                   cpu[nodes], Double(peaks[nodes]) / 1_048_576, averageCPU / max(cpu[nodes], 0.001)))
        say("the phy (\(phy.rawValue), all \(controllers) controllers, \(phyProcesses.count) processes; not part of any node): "
            + String(format: "CPU %.1f %% of a core", (endPhyCPU - startPhyCPU) / wall * 100))
        if observer != nil {
            say(String(format: "the listener (Bumble host, not part of any node): CPU %.1f %% of a core", (endObserverCPU - startObserverCPU) / wall * 100))
        }
        say(fullMesh.map { String(format: "time until every node had logged every other: %.1f s", $0) }
            ?? "not every node logged every other during the run")

        let run = CrowdRun(
            phy: phy.rawValue, nodes: nodes, rotationInterval: Int64(rotationInterval), logLevel: logLevel,
            observed: observeAdvertising, runStart: startTime, runEnd: endTime, runEndInstant: endInstant)
        try JSONEncoder().encode(run).write(to: URL(fileURLWithPath: directory + "/crowd.json"))
        try CrowdFigures.report(run, directory: directory)
        CrowdFigures.statusFiles(statusFiles)
    }

    /// True when each node's store holds an exchange with every other node (any of their ids).
    private func everyNodeLoggedEveryOther(_ databases: [String]) throws -> Bool {
        for database in databases {
            guard FileManager.default.fileExists(atPath: database) else { return false }
            let store = try NodeStore.open(StoreLocation(path: database, source: .flag, ownsDirectory: false))
            // Ids rotate in step on every node, so within one of our windows each other node has one
            // id: the mesh is complete for this node when some window holds all of them.
            let byWindow = Dictionary(grouping: try store.encounters().filter { !$0.learnedBy.isEmpty }, by: \.ownWindowStart)
            if (byWindow.values.map { Set($0.map(\.peer)).count }.max() ?? 0) < nodes - 1 { return false }
        }
        return true
    }
}
