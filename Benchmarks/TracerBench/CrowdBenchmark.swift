import Foundation
import IDRotation
#if canImport(Glibc)
import Glibc
#endif

/// N `tracer run` processes (release build) on one Bumble virtual link for a number of minutes,
/// with the default duty cycle: each node's average CPU and peak memory, its store's growth,
/// and the exchanges completed per id window; and, in the same run, the CPU of a Bumble device
/// doing the same advertising and scanning.
struct CrowdBenchmark {
    let repository: URL
    let directory: String
    let nodes: Int
    let minutes: Double
    /// Short windows so that a 10-minute run spans several of them.
    let rotationInterval = 120

    var python: String {
        ProcessInfo.processInfo.environment["TRACER_BUMBLE_PYTHON"]
            ?? repository.appendingPathComponent(".venv-bumble/bin/python").path
    }

    func run() async throws {
        // TRACER_BINARY measures another build of the node, for example one linked with
        // --static-swift-stdlib, as a deployment would use.
        let binary = ProcessInfo.processInfo.environment["TRACER_BINARY"]
            ?? URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath().deletingLastPathComponent()
            .appendingPathComponent("tracer").path
        guard FileManager.default.isExecutableFile(atPath: binary) else {
            throw BenchmarkError("build tracer next to TracerBench first: swift build -c release --product tracer && swift build -c release --product TracerBench")
        }
        say("# Crowd benchmark: \(nodes) tracer run nodes + 1 Bumble duty-cycle device, one virtual link, \(minutes) min (\(Date()))")
        say("node binary: \(binary)")
        let link = try ChildProcess.start(python, [repository.appendingPathComponent("Tests/Support/bumble/virtual_link.py").path, "\(nodes + 1)"])
        defer { link.stop() }
        let ready = try link.readLine(timeout: 30)
        let ports = ready.split(separator: " ").dropFirst().compactMap { UInt16($0) }
        guard ready.hasPrefix("READY"), ports.count == nodes + 1 else { throw BenchmarkError("virtual link said: \(ready)") }

        let databases = (0..<nodes).map { directory + "/node\($0).db" }
        let runs = try zip(databases, ports).map { database, port in
            try ChildProcess.start(binary, [
                "run", "--db", database, "--transport", "tcp:127.0.0.1:\(port)",
                "--rotation-interval", "\(rotationInterval)", "--log-level", "error",
            ])
        }
        defer { runs.forEach { $0.stop() } }
        let bumble = try ChildProcess.start(python, [
            repository.appendingPathComponent("Benchmarks/baselines/bumble_duty_cycle.py").path, "tcp-client:127.0.0.1:\(ports[nodes])",
        ])
        defer { bumble.stop() }
        guard try bumble.readLine(timeout: 30) == "READY" else { throw BenchmarkError("the Bumble device did not start") }

        let start = Date()
        let startCPU = (runs + [bumble, link]).map { ProcessFigures.cpuSeconds($0.pid) }
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
                say(String(format: "  %.0f s elapsed", Date().timeIntervalSince(start)))
            }
            for (index, run) in runs.enumerated() where !run.isRunning { throw BenchmarkError("node \(index) exited during the run") }
        }
        let wall = Date().timeIntervalSince(start)
        let endCPU = (runs + [bumble, link]).map { ProcessFigures.cpuSeconds($0.pid) }
        let peaks = (runs + [bumble]).map { ProcessFigures.peakResidentBytes($0.pid) }
        let shares = (runs + [bumble]).map { ProcessFigures.memoryShares($0.pid) }
        let endTime = SystemWallClock().now()
        runs.forEach { $0.stop() }
        bumble.closeInput()
        bumble.stop()

        let cpu = zip(startCPU, endCPU).map { ($1 - $0) / wall * 100 }
        let growth = zip(startStoreBytes, databases.map(ProcessFigures.storeBytes)).map { $1 - $0 }
        say("")
        // RSS counts every shared library page the process touched, although ten nodes share one
        // copy; PSS divides shared pages among their users, private memory is the node's alone.
        say("node  cpu % of a core  peak RSS MB  PSS MB  private MB  store growth KB")
        for index in 0..<nodes {
            say(String(format: "%4d  %15.2f  %11.1f  %6.1f  %10.1f  %15.1f", index, cpu[index], Double(peaks[index]) / 1_048_576,
                       shares[index].pss / 1024, shares[index].private / 1024, Double(growth[index]) / 1024))
        }
        let nodeCPU = cpu.prefix(nodes)
        let averageCPU = nodeCPU.reduce(0, +) / Double(nodes)
        say(String(format: "nodes: mean CPU %.2f %% of a core (max %.2f %%, target < 5 %%); max peak RSS %.1f MB, max PSS %.1f MB, max private %.1f MB (target < 30 MB)",
                   averageCPU, nodeCPU.max() ?? 0, Double(peaks.prefix(nodes).max() ?? 0) / 1_048_576,
                   (shares.prefix(nodes).map(\.pss).max() ?? 0) / 1024, (shares.prefix(nodes).map(\.private).max() ?? 0) / 1024))
        say(String(format: "bumble duty-cycle device: CPU %.2f %% of a core, peak RSS %.1f MB; ratio node/bumble CPU %.2fx",
                   cpu[nodes], Double(peaks[nodes]) / 1_048_576, averageCPU / max(cpu[nodes], 0.001)))
        say(String(format: "virtual link (all %d Bumble controllers, not part of any node): CPU %.1f %% of a core", nodes + 1, cpu[nodes + 1]))
        say(fullMesh.map { String(format: "time until every node had logged every other: %.1f s", $0) }
            ?? "not every node logged every other during the run")
        try exchangesPerWindow(databases, from: startTime, to: endTime)
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

    /// For every window of a node's own id that lies wholly inside the run, how many of the other
    /// nodes it exchanged ids with (read theirs or had them write to it).
    private func exchangesPerWindow(_ databases: [String], from start: UnixSeconds, to end: UnixSeconds) throws {
        var complete = 0, total = 0, counts: [Int] = []
        for database in databases {
            let store = try NodeStore.open(StoreLocation(path: database, source: .flag, ownsDirectory: false))
            let windows = try store.ownIDs().map(\.window).filter { $0.start >= start && $0.end <= end }
            let encounters = try store.encounters()
            for window in windows {
                let peers = Set(encounters.filter { $0.ownWindowStart == window.start && !$0.learnedBy.isEmpty }.map(\.peer))
                counts.append(peers.count)
                total += 1
                if peers.count >= nodes - 1 { complete += 1 }
            }
        }
        let sorted = counts.sorted()
        let median = sorted.isEmpty ? 0 : sorted[sorted.count / 2]
        say("exchanges per \(rotationInterval) s window (peers of \(nodes - 1) exchanged with): min \(sorted.first ?? 0), median \(median), complete windows \(complete)/\(total) (target: all)")
    }
}

/// Figures read from /proc for a child process.
enum ProcessFigures {
    static func cpuSeconds(_ pid: Int32) -> Double {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
              let close = text.lastIndex(of: ")")
        else { return 0 }
        // Fields after the command name: state is field 3; utime and stime are fields 14 and 15.
        let fields = text[text.index(after: close)...].split(separator: " ")
        guard fields.count > 13, let user = Double(fields[11]), let system = Double(fields[12]) else { return 0 }
        return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
    }

    static func peakResidentBytes(_ pid: Int32) -> Int {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
              let line = text.split(separator: "\n").first(where: { $0.hasPrefix("VmHWM:") }),
              let kilobytes = Int(line.split(separator: " ").dropFirst().first ?? "")
        else { return 0 }
        return kilobytes * 1024
    }

    /// Proportional and private resident memory in kB, from /proc/PID/smaps_rollup.
    static func memoryShares(_ pid: Int32) -> (pss: Double, private: Double) {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/smaps_rollup", encoding: .utf8) else { return (0, 0) }
        func field(_ name: String) -> Double {
            guard let line = text.split(separator: "\n").first(where: { $0.hasPrefix(name + ":") }) else { return 0 }
            return Double(line.split(separator: " ").dropFirst().first ?? "") ?? 0
        }
        return (field("Pss"), field("Private_Clean") + field("Private_Dirty"))
    }

    static func storeBytes(_ path: String) -> Int {
        [path, path + "-wal"].reduce(0) { total, file in
            total + ((try? FileManager.default.attributesOfItem(atPath: file)[.size] as? Int) ?? 0)
        }
    }
}
