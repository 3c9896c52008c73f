import Foundation
import Logging
import GATTExchange

// Figures only: the stack's own info logs would interleave with them.
LoggingSystem.bootstrap { label in
    var handler = StreamLogHandler.standardError(label: label)
    // TRACER_BENCH_LOG_LEVEL=debug shows the stack's reasoning, for a slow round.
    handler.logLevel = ProcessInfo.processInfo.environment["TRACER_BENCH_LOG_LEVEL"].flatMap { Logger.Level(rawValue: $0) } ?? .warning
    return handler
}

// Usage: swift run -c release TracerBench [store | store-places | link [ROUNDS] | exchange [ROUNDS] | server | crowd [MINUTES] [NODES]
//        | crowd-rootcanal [MINUTES] [NODES] | crowd-bumble [MINUTES] [NODES] | crowd-figures FOLDER | match [IDS] [ENCOUNTERS]
//        | match-keys [KEYS] [ENCOUNTERS] [KEY_BATCHES] | log-bytes [SPACINGS] [UPLOADS] | log-append [ENTRIES] [ROUNDS] | list-bytes [UPLOADS_PER_DAY,...] [ID_UPLOADS]
//        | object-store [ROUNDS] [IDS] | store-backends [SECONDS] | verdicts [--data DIR] [--sessions FILE] [--readings FILE] [--svg PATH] [--newest | --stress | --self-calibration]
//        | flood [TRACER_SERVER] [OPEN_FILES] [CONNECTIONS] [SECONDS] | console-signin [ROUNDS] [ATTEMPTS_PER_MINUTE] | console-pages [ROUNDS] [TRACER_SERVER]
//        | refresh [RUNS] [SCALE] | radio-time [SECONDS] [bumble|rootcanal] [SCHEDULES] [ROTATION] | walk-by [VISITORS] [SCHEDULES]
//        | exchange [ROUNDS] [bumble|rootcanal] [SCHEDULES] | metrics [ROUNDS] [NODE_SECONDS]]
let arguments = CommandLine.arguments.dropFirst()
let which = arguments.first ?? "store"
let directory = NSTemporaryDirectory() + "tracer-bench-" + UUID().uuidString
try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
defer { try? FileManager.default.removeItem(atPath: directory) }

switch which {
case "store":
    try await StoreBenchmark(directory: directory).run()
case "store-places":
    // The 28-day file without places, with a fixed place, and with a new gpsd cell per person.
    try StoreBenchmark(directory: directory).places()
case "link":
    // Run from the repository root: it starts Bumble from .venv-bumble and Tests/Support/bumble.
    let rounds = arguments.dropFirst().first.flatMap { Int($0) } ?? 50
    try await LinkBenchmark(repository: URL(fileURLWithPath: FileManager.default.currentDirectoryPath), rounds: rounds).run()
case "exchange":
    // Run from the repository root, like "link".
    // exchange [ROUNDS] [bumble|rootcanal] [SCHEDULES]: SCHEDULES (comma-separated scan plans,
    // none by default) are measured after the continuous comparison with Bumble.
    let rounds = arguments.dropFirst().first.flatMap { Int($0) } ?? 50
    try await ExchangeBenchmark(
        repository: URL(fileURLWithPath: FileManager.default.currentDirectoryPath), rounds: rounds,
        onRootCanal: arguments.dropFirst(2).first == "rootcanal", plans: try scanPlans(arguments.dropFirst(3).first, default: [])).run()
case "radio-time":
    // radio-time [SECONDS] [bumble|rootcanal] [SCHEDULES] [ROTATION]: the node's radio account
    // against its HCI trace (issue 40), SECONDS per scan plan of the comma-separated SCHEDULES
    // (default minute-bursts,standard), ids rotating every ROTATION seconds (default 30).
    // Run from the repository root, like "link".
    try await RadioTimeBenchmark(
        repository: URL(fileURLWithPath: FileManager.default.currentDirectoryPath),
        seconds: arguments.dropFirst().first.flatMap { Int($0) } ?? 180,
        onRootCanal: arguments.dropFirst(2).first == "rootcanal",
        plans: try scanPlans(arguments.dropFirst(3).first, default: [.minuteBursts, .standard]),
        rotationSeconds: arguments.dropFirst(4).first.flatMap { Int($0) } ?? 30).run()
case "flood":
    // flood [TRACER_SERVER] [OPEN_FILES] [CONNECTIONS] [SECONDS]: a `serve` process under
    // `ulimit -n OPEN_FILES` flooded from one and from 50 loopback addresses (issue 25).
    // TRACER_SERVER defaults to the tracer-server built beside this benchmark; give an older
    // build's to measure the same cases before a change.
    let rest = Array(arguments.dropFirst())
    let beside = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("tracer-server").path
    try await FloodBenchmark(
        directory: directory, serverPath: rest.first ?? beside, openFiles: rest.dropFirst().first.flatMap { Int($0) } ?? 4_096,
        connections: rest.dropFirst(2).first.flatMap { Int($0) } ?? 5_000, seconds: rest.dropFirst(3).first.flatMap { Int($0) } ?? 10
    ).run()
case "refresh":
    // refresh [RUNS] [SCALE]: issue 29's upload-to-verdict time across real processes, the
    // node's revalidation schedule divided by SCALE (default 60), and the idle traffic. Run
    // from the repository root (it starts Bumble from .venv-bumble); build tracer and
    // tracer-server beside TracerBench first.
    let runs = arguments.dropFirst().first.flatMap { Int($0) } ?? 30
    let scale = arguments.dropFirst(2).first.flatMap { Int64($0) } ?? 60
    try await RefreshBenchmark(
        repository: URL(fileURLWithPath: FileManager.default.currentDirectoryPath), directory: directory, runs: runs, scale: scale
    ).run()
case "server":
    // Run from the repository root: it starts nginx with deploy/nginx/tracer-server.conf.
    try await ServerBenchmark(directory: directory, repository: URL(fileURLWithPath: FileManager.default.currentDirectoryPath)).run()
case "metrics":
    // metrics [ROUNDS] [NODE_SECONDS]: what the server's and the node's metrics cost (issue 41).
    // Run from the repository root, with tracer built next to TracerBench (like "crowd").
    try await MetricsBenchmark(
        directory: directory, repository: URL(fileURLWithPath: FileManager.default.currentDirectoryPath),
        rounds: arguments.dropFirst().first.flatMap { Int($0) } ?? 3,
        nodeSeconds: arguments.dropFirst(2).first.flatMap { Int($0) } ?? 120).run()
case "store-backends":
    // store-backends [SECONDS]: appends/s into SQLite and into a throwaway PostgreSQL 15 (one and
    // two instances); needs postgresql-15 (scripts/setup).
    let seconds = arguments.dropFirst().first.flatMap { Int($0) } ?? 10
    try await StoreBackendBenchmark(directory: directory, seconds: seconds).run()
case "crowd", "crowd-rootcanal", "crowd-bumble":
    // Run from the repository root, like "link"; build both first: swift build -c release --product tracer, then --product TracerBench.
    // crowd: issue 7's run (Bumble, ids every 120 s, node log level error).
    // crowd-rootcanal, crowd-bumble: issue 12's run on either phy (ids every 60 s, debug JSON logs, a
    // passive listener on the phy). On RootCanal the nodes' controllers cycle DEFAULT, LAIRD_BL654,
    // CSR_RCK_PTS_DONGLE; TRACER_ROOTCANAL_PHY names rootcanal_phy.py if it is not in Tests/Support/rootcanal.
    // TRACER_CROWD_DIR keeps the node databases and logs in that folder instead of a temporary one.
    let minutes = arguments.dropFirst().first.flatMap { Double($0) } ?? 10
    let nodes = arguments.dropFirst(2).first.flatMap { Int($0) } ?? 10
    var crowd = CrowdBenchmark(
        repository: URL(fileURLWithPath: FileManager.default.currentDirectoryPath), directory: try nodeFiles(orIn: directory),
        nodes: nodes, minutes: minutes)
    if which != "crowd" {
        crowd.phy = which == "crowd-rootcanal" ? .rootcanal : .bumble
        crowd.rotationInterval = 60
        crowd.logLevel = "debug"
        crowd.observeAdvertising = true
    }
    try await crowd.run()
case "walk-by":
    // walk-by [VISITORS] [SCHEDULES]: 6 resident nodes and VISITORS (default 8) arriving every 30 s for
    // 60/120/180/300 s on RootCanal, once per scan schedule of the comma-separated SCHEDULES (default
    // minute-bursts,standard; given to the nodes as TRACER_SCAN_SCHEDULE); first sighting and
    // both-ways times per (visitor, resident) pair, CPU, RSS, receiver share. Run from the
    // repository root and build tracer first, like "crowd"; TRACER_CROWD_DIR keeps the files, as there.
    let visitors = arguments.dropFirst().first.flatMap { Int($0) } ?? 8
    let schedules = arguments.dropFirst(2).first.map { $0.split(separator: ",").map(String.init) } ?? ["minute-bursts", "standard"]
    try await WalkByBenchmark(
        repository: URL(fileURLWithPath: FileManager.default.currentDirectoryPath), directory: try nodeFiles(orIn: directory),
        visitors: max(0, visitors), schedules: schedules
    ).run()
case "crowd-figures":
    // The figures of a run kept with TRACER_CROWD_DIR, computed again from its files.
    guard let kept = arguments.dropFirst().first else { throw BenchmarkError("usage: TracerBench crowd-figures FOLDER") }
    let run = try JSONDecoder().decode(CrowdRun.self, from: Data(contentsOf: URL(fileURLWithPath: kept + "/crowd.json")))
    try CrowdFigures.report(run, directory: kept)
    // The status files as the nodes left them when they stopped (a run reads them just before).
    CrowdFigures.statusFiles((0..<run.nodes).map { (try? String(contentsOfFile: kept + "/node\($0).db-status.json", encoding: .utf8)) ?? "" })
case "match":
    // Run from the repository root: it runs Benchmarks/baselines/*.py, and `tracer check` from
    // the folder this binary is in, so build both (`--product` builds one product per call):
    // `swift build -c release --product tracer && swift build -c release --product TracerBench`.
    let ids = arguments.dropFirst().first.flatMap { Int($0) } ?? 10_000_000
    let encounters = arguments.dropFirst(2).first.flatMap { Int($0) } ?? 100_000
    try MatchBenchmark(
        directory: directory, repository: URL(fileURLWithPath: FileManager.default.currentDirectoryPath),
        listedIDCount: ids, encounterCount: encounters
    ).run()
case "match-keys":
    // match-keys [KEYS] [ENCOUNTERS] [KEY_BATCHES]: issue 13's figure (b). It runs `tracer check`
    // from the folder this binary is in, so build both, as for "match".
    let keys = arguments.dropFirst().first.flatMap { Int($0) } ?? 1_000_000
    let encounters = arguments.dropFirst(2).first.flatMap { Int($0) } ?? 100_000
    // Hourly key batches kept for 28 days, as the server publishes them by default.
    let keyBatches = arguments.dropFirst(3).first.flatMap { Int($0) } ?? 28 * 24
    try KeyMatchBenchmark(directory: directory, keyCount: keys, encounterCount: encounters, batchCount: max(1, keyBatches)).run()
case "list-bytes":
    // list-bytes [UPLOADS_PER_DAY,...] [ID_UPLOADS]: byte counts only, so a debug build gives the same figures.
    let rates = arguments.dropFirst().first.map { $0.split(separator: ",").compactMap { Int($0) } } ?? [1_000, 10_000, 25_000]
    let idUploads = arguments.dropFirst(2).first.flatMap { Int($0) } ?? 1_000
    try await ListBytesBenchmark(directory: directory, uploadsPerDay: rates, idUploads: idUploads).run()
case "log-bytes":
    // log-bytes [SPACING_SECONDS,...] [UPLOADS_PER_DAY]: byte counts of the log against today's format
    // (issue 39), in fast time; needs nginx and curl for the response heads.
    let spacings = arguments.dropFirst().first.map { $0.split(separator: ",").compactMap { Int64($0) } } ?? [1_800, 300]
    let uploads = arguments.dropFirst(2).first.flatMap { Int($0) } ?? 1_000
    try await LogBytesBenchmark(directory: directory, repository: URL(fileURLWithPath: FileManager.default.currentDirectoryPath), uploadsPerDay: uploads, spacings: spacings).run()
case "log-append":
    // log-append [ENTRIES] [ROUNDS]: the appender's cost on logs of 0 to 10 billion entries (issue 39).
    let entries = arguments.dropFirst().first.flatMap { Int($0) } ?? 100_000
    let rounds = arguments.dropFirst(2).first.flatMap { Int($0) } ?? 5
    try LogAppendBenchmark(directory: directory, batch: entries, sizes: [0, 1_000, 1_000_000, 10_000_000, 10_000_000_000], rounds: rounds).run()
case "object-store":
    // object-store [ROUNDS] [IDS]: publish-to-visible time on moto's S3, started from
    // $TRACER_MOTO_PYTHON or .venv-bumble (scripts/setup installs moto[server] there).
    let rounds = arguments.dropFirst().first.flatMap { Int($0) } ?? 3
    let ids = arguments.dropFirst(2).first.flatMap { Int($0) } ?? 1_000_000
    try await ObjectStoreBenchmark(directory: directory, rounds: max(1, rounds), idsPerBatch: max(1, ids)).run()
case "verdicts":
    // verdicts [--data DIR | --sessions FILE --readings FILE] [--svg PATH]: issue 26's figures from the MIT LL / U. Arizona field
    // recordings (DIR holds mitll_ua_sessions.csv and mitll_ua_readings.csv; by default
    // ../shared/data/mitll-ua from the repository root). A debug build gives the same figures.
    var options = Array(arguments.dropFirst())
    func option(_ name: String) -> String? {
        guard let index = options.firstIndex(of: name), index + 1 < options.count else { return nil }
        defer { options.removeSubrange(index...index + 1) }
        return options[index + 1]
    }
    // --sessions FILE and --readings FILE read any other pair of CSV files with the same columns.
    let data = option("--data") ?? "../shared/data/mitll-ua"
    let svg = option("--svg")
    // --newest runs only the newest round's section: quicker while exploring. --stress runs only
    // issue 37's stress table (every candidate under every stress, and the choice of the default);
    // --self-calibration only what each piece of a node's own calibration buys under the stress.
    try VerdictsBenchmark(
        sessionsCSV: option("--sessions") ?? data + "/mitll_ua_sessions.csv",
        readingsCSV: option("--readings") ?? data + "/mitll_ua_readings.csv", directory: directory, svgPath: svg,
        newestOnly: options.contains("--newest"), stressOnly: options.contains("--stress"),
        selfCalibrationOnly: options.contains("--self-calibration")
    ).run()
case "console-signin":
    // console-signin [ROUNDS] [ATTEMPTS_PER_MINUTE]: scrypt's cost per sign-in check (issue 28).
    let rounds = arguments.dropFirst().first.flatMap { Int($0) } ?? 20
    let attempts = arguments.dropFirst(2).first.flatMap { Int($0) } ?? 10
    try ConsoleSignInBenchmark(rounds: max(1, rounds), attemptsPerMinute: max(1, attempts)).run()
case "console-pages":
    // console-pages [ROUNDS] [TRACER_SERVER]: each console page's weight and time to first byte
    // from a real `serve` (issue 28); TRACER_SERVER defaults to the one built beside this benchmark.
    let rounds = arguments.dropFirst().first.flatMap { Int($0) } ?? 20
    let beside = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("tracer-server").path
    try await ConsolePagesBenchmark(directory: directory, serverPath: arguments.dropFirst(2).first ?? beside, rounds: max(1, rounds)).run()
default:
    FileHandle.standardError.write(Data("unknown benchmark '\(which)'; available: store, store-places, link, exchange, server, crowd, crowd-rootcanal, crowd-bumble, crowd-figures, match, match-keys, list-bytes, store-backends, object-store, verdicts, flood, console-signin, console-pages, refresh, radio-time, walk-by\n".utf8))
    exit(2)
}

/// Where a run of `tracer run` nodes keeps their databases and logs: TRACER_CROWD_DIR, created if
/// need be, or else `temporary` (removed at the end).
func nodeFiles(orIn temporary: String) throws -> String {
    guard let kept = ProcessInfo.processInfo.environment["TRACER_CROWD_DIR"] else { return temporary }
    try FileManager.default.createDirectory(atPath: kept, withIntermediateDirectories: true)
    return URL(fileURLWithPath: kept).standardizedFileURL.path
}

/// Writes a line of figures straight to stdout, unbuffered, so that it reaches a file or pipe even
/// if a later step hangs and the run is killed.
func say(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}

/// Scan plans named in a comma-separated argument (`ScanPlan`'s setting names), or `fallback`.
func scanPlans(_ argument: String?, default fallback: [ScanPlan]) throws -> [ScanPlan] {
    guard let argument else { return fallback }
    return try argument.split(separator: ",").map { name in
        guard let plan = ScanPlan(rawValue: String(name)) else {
            throw BenchmarkError("no scan plan \"\(name)\": " + ScanPlan.allCases.map(\.rawValue).joined(separator: ", "))
        }
        return plan
    }
}
