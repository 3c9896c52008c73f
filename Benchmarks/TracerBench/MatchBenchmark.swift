import Crypto
import Foundation
import IDRotation
import Matching
import PositiveListFormat
import TracerCore
import TracerTestSupport

/// Matching figures for BENCHMARKS.md (issue 6): a signed positive list of `listedIDCount` ids
/// matched against a node database of `encounterCount` encounters, by our matcher in-process, by
/// `tracer check` as a user runs it, and by two baselines a user might write instead (a SQLite
/// join and Python sets), all on the same generated data in one run.
///
/// Every method reads the list as the log a node follows (the id batches cut into
/// `ListLogEntry`s, held as `FollowedLogStore` keeps them): the baselines read the same cache's
/// entries file (Benchmarks/baselines/log_entries.py).
///
/// Every method must find exactly the planted exposures: a wrong count stops the run.
struct MatchBenchmark {
    let directory: String
    let repository: URL
    let listedIDCount: Int
    let encounterCount: Int

    static let idsPerBatch = 1_000_000
    /// Encounters with listed ids inside the ids' windows: the exposures every method must find.
    static let plantedInsideWindow = 500
    /// Encounters with listed ids but outside the ids' windows (a replayed id): must not match.
    static let plantedOutsideWindow = 100
    /// Our matcher and `tracer check` run this many times (they take a fraction of a second, so
    /// one run on a shared machine is noise); the median is reported.
    static let repetitions = 5
    static let tolerance = PositiveListMatcher.defaultClockSkewTolerance

    func run() throws {
        say("# Matching benchmark (\(Date()))")
        // Other work on the machine moves every figure; the load says how much there was.
        let load = (try? String(contentsOfFile: "/proc/loadavg", encoding: .utf8))?.split(separator: " ").prefix(3).joined(separator: " ") ?? "?"
        say("\(ProcessInfo.processInfo.activeProcessorCount) cores, load average \(load), SQLite \(NodeStore.sqliteVersion)")
        say("list: \(grouped(listedIDCount)) ids; node: \(grouped(encounterCount)) encounters, "
            + "\(Self.plantedInsideWindow) inside a listed id's window, \(Self.plantedOutsideWindow) outside one")

        let clock = ContinuousClock()
        let generationStarted = clock.now
        let data = try generate()
        say("generated in \(format(seconds(clock.now - generationStarted), 1)) s (not part of any figure): "
            + "\(grouped(data.listedIDCount)) ids in \(data.batchCount) batches, \(grouped(data.encounterCount)) encounters; "
            + "list log of \(grouped(data.log.entryCount)) entries, entries file \(megabytes(data.log.entriesFileBytes))")

        let ours = try measureInProcess(data)
        let cli = try measureCLI(data)
        let python = try pythonExecutable()
        say("baselines run with \(python)")
        let join = try measureSQLiteJoin(data, python: python)
        let sets = try measureSetIntersection(data, python: python)
        report(data, ours: ours, cli: cli, join: join, sets: sets)
    }

    // MARK: Data

    struct GeneratedData {
        let databasePath: String
        let batchCount: Int
        /// The same ids as the list log a node follows.
        let log: FollowedLogCache
        let publicKey: PositiveListPublicKey
        let listedIDCount: Int
        let encounterCount: Int
        /// The peer ids of the encounters inside their listed windows.
        let exposedPeers: Set<UserID>
    }

    private func generate() throws -> GeneratedData {
        let key = Curve25519.Signing.PrivateKey()
        var random = SystemRandomNumberGenerator()
        let now = UnixSeconds(Date().timeIntervalSince1970)
        // Windows start between 27 and 1 days ago, so that an encounter placed an hour before or
        // after a window is still inside the node's 28 days and in the past.
        let earliestWindowStart = now - 27 * .secondsPerDay
        let windowStartSpan = 26 * .secondsPerDay
        let idWindow: UnixSeconds = 900

        let cacheDirectory = directory + "/log-cache"
        try FileManager.default.createDirectory(atPath: cacheDirectory, withIntermediateDirectories: true)

        // The list, batch by batch, keeping aside the entries that encounters will use.
        let batchCount = max(1, (listedIDCount + Self.idsPerBatch - 1) / Self.idsPerBatch)
        let plantedCount = Self.plantedInsideWindow + Self.plantedOutsideWindow
        var plantedEntries: [PositiveListEntry] = []
        var logEntries: [Data] = []
        var logCutSeconds = 0.0
        var listed = 0
        for batchIndex in 0..<batchCount {
            let size = min(Self.idsPerBatch, listedIDCount - batchIndex * Self.idsPerBatch)
            let drawn = (0..<size).map { _ in random.next() as UInt64 }.sorted()
            // Entries must be strictly increasing; a repeat among random 64-bit ids is rare enough
            // to drop rather than replace.
            var ids: [UInt64] = []
            ids.reserveCapacity(drawn.count)
            for id in drawn where ids.last != id { ids.append(id) }
            let entries = ids.map { id in
                let from = earliestWindowStart + UnixSeconds.random(in: 0..<windowStartSpan, using: &random)
                return PositiveListEntry(id: UserID(rawValue: id), validFrom: from, validUntil: from + idWindow)
            }
            // Spread the planted entries over the batches.
            let plantedHere = plantedCount / batchCount + (batchIndex < plantedCount % batchCount ? 1 : 0)
            var positions = Set<Int>()
            while positions.count < min(plantedHere, entries.count) { positions.insert(Int.random(in: 0..<entries.count, using: &random)) }
            plantedEntries += positions.map { entries[$0] }

            let number = UInt64(batchIndex + 1)
            // The batch as the server's log carries it: cut into entries of at most 64 kB.
            let cutStarted = ContinuousClock.now
            for entry in try ListLogEntry.entries(idBatch: number, entries: entries) { logEntries.append(Data(try entry.encode())) }
            logCutSeconds += seconds(ContinuousClock.now - cutStarted)
            listed += entries.count
        }
        let log = try FollowedLogCache.write(logEntries, to: cacheDirectory, cutSeconds: logCutSeconds, signingKey: key, now: now)
        logEntries = []

        // The node's encounters: planted ones first, then strangers at random times.
        plantedEntries.shuffle(using: &random)
        var sightings = SightingBatch()
        func addEncounter(_ peer: UserID, from firstSeen: UnixSeconds, to lastSeen: UnixSeconds) {
            let ownWindowStart = firstSeen - firstSeen % idWindow
            let rssi = Int8.random(in: -90 ... -45, using: &random)
            sightings.add(Sighting(peer: peer, ownWindowStart: ownWindowStart, time: firstSeen, rssi: rssi, txPower: 0, learnedBy: .read))
            sightings.add(Sighting(peer: peer, ownWindowStart: ownWindowStart, time: lastSeen, rssi: rssi, txPower: 0))
        }
        var exposedPeers = Set<UserID>()
        for (position, entry) in plantedEntries.enumerated() {
            let length = UnixSeconds.random(in: 10...300, using: &random)
            if position < Self.plantedInsideWindow {
                let firstSeen = entry.validFrom + UnixSeconds.random(in: 0...(idWindow - length), using: &random)
                addEncounter(entry.id, from: firstSeen, to: firstSeen + length)
                exposedPeers.insert(entry.id)
            } else {
                // Clear of the window by more than the clock-skew tolerance, before or after it.
                let gap = Self.tolerance + UnixSeconds.random(in: 60...3_600, using: &random)
                if Bool.random(using: &random) {
                    addEncounter(entry.id, from: entry.validUntil + gap, to: entry.validUntil + gap + length)
                } else {
                    addEncounter(entry.id, from: entry.validFrom - gap - length, to: entry.validFrom - gap)
                }
            }
        }
        let strangers = encounterCount - plantedEntries.count
        for _ in 0..<max(0, strangers) {
            let firstSeen = now - 28 * .secondsPerDay + 3_600 + UnixSeconds.random(in: 0..<(28 * .secondsPerDay - 7_200), using: &random)
            addEncounter(UserID(rawValue: random.next()), from: firstSeen, to: firstSeen + UnixSeconds.random(in: 10...900, using: &random))
        }

        let databasePath = directory + "/node.db"
        do {
            // Closed at the end of this scope, before anything reads it.
            let store = try NodeStore.open(StoreLocation(path: databasePath, source: .flag, ownsDirectory: false))
            try store.write(sightings)
        }
        return GeneratedData(
            databasePath: databasePath, batchCount: batchCount, log: log,
            publicKey: PositiveListPublicKey(key.publicKey), listedIDCount: listed,
            encounterCount: sightings.rowCount, exposedPeers: exposedPeers)
    }

    // MARK: Ours

    struct InProcessFigures {
        /// Loading the held log's entries, opening the store and reading its encounters.
        var loadSeconds: Double
        /// Building the table, reading and matching every entry (`match(heldEntries:)`).
        var matchSeconds: Double
        var totalSeconds: Double { loadSeconds + matchSeconds }
        var idsChecked: Int
        var matches: Int
    }

    /// The node's own path, minus argument parsing, opening the checkpoint and output: load the
    /// held log, open the store, read the encounters, match the log's entries.
    private func measureInProcess(_ data: GeneratedData) throws -> InProcessFigures {
        var runs: [InProcessFigures] = []
        for _ in 0..<Self.repetitions {
            let clock = ContinuousClock()
            let started = clock.now
            guard let held = try data.log.store.load() else { throw BenchmarkFailure("in-process: the followed log is not held") }
            let store = try NodeStore.open(StoreLocation(path: data.databasePath, source: .flag, ownsDirectory: false))
            let encounters = try store.encounterTimes()
            let loaded = clock.now
            let matchedLog = try PositiveListMatcher(encounters: encounters).match(heldEntries: held.entries)
            let matched = clock.now
            guard matchedLog.unreadableEntries == 0, matchedLog.idBatches == data.batchCount else {
                throw BenchmarkFailure("in-process: \(matchedLog.unreadableEntries) unreadable entries, \(matchedLog.idBatches) id batches of \(data.batchCount)")
            }
            let outcome = matchedLog.outcome

            guard outcome.idsChecked == data.listedIDCount else {
                throw BenchmarkFailure("in-process: checked \(outcome.idsChecked) ids, the list has \(data.listedIDCount)")
            }
            let matchedPeers = Set(outcome.matches.map(\.times.peer))
            guard outcome.matches.count == Self.plantedInsideWindow, matchedPeers == data.exposedPeers else {
                throw BenchmarkFailure("in-process: \(outcome.matches.count) matches, \(matchedPeers.subtracting(data.exposedPeers).count) not planted; expected the \(Self.plantedInsideWindow) planted")
            }
            guard outcome.idsSeenOutsideTheirWindow == Self.plantedOutsideWindow else {
                throw BenchmarkFailure("in-process: \(outcome.idsSeenOutsideTheirWindow) ids seen outside their window, expected \(Self.plantedOutsideWindow)")
            }
            runs.append(InProcessFigures(
                loadSeconds: seconds(loaded - started), matchSeconds: seconds(matched - loaded),
                idsChecked: outcome.idsChecked, matches: outcome.matches.count))
        }
        let median = runs.sorted { $0.totalSeconds < $1.totalSeconds }[runs.count / 2]
        say("ours, in-process (median of \(runs.count), total s: \(runs.map { format($0.totalSeconds, 3) }.joined(separator: ", "))): "
            + "load \(format(median.loadSeconds, 3)) s + match \(format(median.matchSeconds, 3)) s, \(median.matches) matches")
        return median
    }

    struct ChildFigures {
        var seconds: Double
        var peakResidentBytes: Int
        var peakIsUpperBound: Bool
        var matches: Int
        /// For the baselines: the time the script measured itself, without the interpreter's start.
        var workSeconds: Double?
        var detail: String
    }

    /// `tracer check` as a user runs it, from the binary built next to this one.
    private func measureCLI(_ data: GeneratedData) throws -> ChildFigures? {
        let tracer = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
            .deletingLastPathComponent().appendingPathComponent("tracer").path
        guard FileManager.default.isExecutableFile(atPath: tracer),
              try MeasuredProcess.run(tracer, ["check", "--help"], scratchDirectory: directory).exitCode == 0
        else {
            say("ours, tracer check: skipped: tracer check not built (expected at \(tracer))")
            return nil
        }
        let arguments = [
            "check", "--offline", "--json", "--quiet", "--db", data.databasePath,
            "--cache-dir", data.log.cacheDirectory, "--server-key", data.publicKey.base64,
        ]
        var runs: [ChildFigures] = []
        for _ in 0..<Self.repetitions {
            let child = try MeasuredProcess.run(tracer, arguments, scratchDirectory: directory)
            // 3 when the risk model scores the matches as exposure, 0 when it scores them below
            // its threshold: either way the check ran, and the matched ids are checked below.
            guard child.exitCode == 3 || child.exitCode == 0 else {
                throw BenchmarkFailure("tracer check exited \(child.exitCode): \(child.standardError.prefix(1_000))")
            }
            let report = try child.jsonReport()
            let idsChecked = report["idsChecked"] as? Int
            // A count, or the list of ids itself.
            let matched = (report["matchedIDs"] as? Int) ?? (report["matchedIDs"] as? [Any])?.count
            guard idsChecked == data.listedIDCount else {
                throw BenchmarkFailure("tracer check: idsChecked \(String(describing: report["idsChecked"])), the list has \(data.listedIDCount)")
            }
            guard matched == Self.plantedInsideWindow else {
                throw BenchmarkFailure("tracer check: matchedIDs \(String(describing: report["matchedIDs"])), expected \(Self.plantedInsideWindow)")
            }
            if let outside = report["idsSeenOutsideTheirWindow"] as? Int, outside != Self.plantedOutsideWindow {
                throw BenchmarkFailure("tracer check: \(outside) ids seen outside their window, expected \(Self.plantedOutsideWindow)")
            }
            let encountersChecked = report["encountersChecked"].map { "\($0)" } ?? "?"
            runs.append(ChildFigures(
                seconds: child.seconds, peakResidentBytes: child.peakResidentBytes, peakIsUpperBound: child.peakIsUpperBound, matches: matched ?? 0,
                workSeconds: nil, detail: "exit \(child.exitCode), encountersChecked \(encountersChecked)"))
        }
        let median = runs.sorted { $0.seconds < $1.seconds }[runs.count / 2]
        say("ours, tracer check (median of \(runs.count), s: \(runs.map { format($0.seconds, 3) }.joined(separator: ", "))): "
            + "\(format(median.seconds, 3)) s, peak RSS \(peak(median)), \(median.matches) matched ids, \(median.detail)")
        return median
    }

    // MARK: Baselines

    private func pythonExecutable() throws -> String {
        if let configured = ProcessInfo.processInfo.environment["TRACER_BENCH_PYTHON"] { return configured }
        // The interpreter itself, not a version manager's shim script, so that its start-up time
        // and memory are Python's.
        let path = try ProcessResult.run("/usr/bin/env", ["python3", "-c", "import sys; print(sys.executable)"]).output
            .trimmingCharacters(in: .whitespacesAndNewlines)
        guard path.hasPrefix("/") else { throw BenchmarkFailure("python3 not found: \(path)") }
        return path
    }

    private func baselineScript(_ name: String) -> String {
        repository.appendingPathComponent("Benchmarks/baselines/" + name).path
    }

    /// Runs a baseline script on the benchmark's data and checks that it read the whole list and
    /// found exactly the planted matches; returns the process figures and its JSON report.
    private func runBaseline(
        _ script: String, countKey: String, _ data: GeneratedData, python: String
    ) throws -> (child: MeasuredProcess, report: [String: Any], matches: Int) {
        let child = try MeasuredProcess.run(
            python, [baselineScript(script), "--db", data.databasePath, "--cache-dir", data.log.cacheDirectory,
                     "--tolerance", String(Self.tolerance)],
            scratchDirectory: directory)
        guard child.exitCode == 0 else { throw BenchmarkFailure("\(script) exited \(child.exitCode): \(child.standardError.prefix(2_000))") }
        let report = try child.jsonReport()
        let matches = report["matches"] as? Int ?? -1
        guard report[countKey] as? Int == data.listedIDCount else {
            throw BenchmarkFailure("\(script) took in \(String(describing: report[countKey])) ids, the list has \(data.listedIDCount)")
        }
        guard matches == Self.plantedInsideWindow else {
            throw BenchmarkFailure("\(script) found \(matches) matches, ours \(Self.plantedInsideWindow)")
        }
        return (child, report, matches)
    }

    private func measureSQLiteJoin(_ data: GeneratedData, python: String) throws -> ChildFigures {
        let (child, report, matches) = try runBaseline("sqlite_join.py", countKey: "idsLoaded", data, python: python)
        let load = report["loadSeconds"] as? Double ?? 0
        let join = report["joinSeconds"] as? Double ?? 0
        let figures = ChildFigures(
            seconds: child.seconds, peakResidentBytes: child.peakResidentBytes, peakIsUpperBound: child.peakIsUpperBound, matches: matches,
            workSeconds: load + join, detail: "load \(format(load, 2)) s + join \(format(join, 2)) s (\(report["layout"] ?? "?") table)")
        say("baseline (a), SQLite join: \(figures.detail), process \(format(child.seconds, 2)) s, peak RSS \(peak(figures)), \(matches) matches")
        return figures
    }

    private func measureSetIntersection(_ data: GeneratedData, python: String) throws -> ChildFigures {
        let (child, report, matches) = try runBaseline("set_intersection.py", countKey: "idsRead", data, python: python)
        let work = report["seconds"] as? Double ?? 0
        let figures = ChildFigures(
            seconds: child.seconds, peakResidentBytes: child.peakResidentBytes, peakIsUpperBound: child.peakIsUpperBound,
            matches: matches, workSeconds: work, detail: "")
        say("baseline (b), Python sets: \(format(work, 2)) s, process \(format(child.seconds, 2)) s, peak RSS \(peak(figures)), \(matches) matches")
        return figures
    }

    // MARK: Report

    /// Ratios pair like with like: our in-process time against the time each script measured
    /// itself (both without a process start), and `tracer check`'s process time against the
    /// script's process time (both with one).
    private func report(_ data: GeneratedData, ours: InProcessFigures, cli: ChildFigures?, join: ChildFigures, sets: ChildFigures) {
        let ids = Double(data.listedIDCount)
        func rate(_ seconds: Double) -> String { grouped(Int(ids / seconds)) + " ids/s" }
        func verdict(_ met: Bool) -> String { met ? "met" : "**missed**" }
        let joinWork = join.workSeconds ?? join.seconds
        let setsWork = sets.workSeconds ?? sets.seconds

        say("")
        say("| Figure | Result | Target |")
        say("| --- | --- | --- |")
        say("| Ours in-process: open store + read encounters + match | \(format(ours.totalSeconds, 3)) s (\(format(ours.loadSeconds, 3)) + \(format(ours.matchSeconds, 3))), \(rate(ours.totalSeconds)), \(ours.matches) matches | — |")
        say("| Ours in-process: matching alone | \(rate(ours.matchSeconds)) | ≥ 100,000,000 ids/s: \(verdict(ids / ours.matchSeconds >= 100e6)) |")
        if let cli {
            say("| Ours as a user runs it: `tracer check --offline --json` | \(format(cli.seconds, 3)) s, \(rate(cli.seconds)), peak RSS \(peak(cli)), \(cli.matches) matched ids | ≥ 100,000,000 ids/s: \(verdict(ids / cli.seconds >= 100e6)); < 64 MB: \(verdict(cli.peakResidentBytes < 64 << 20)) |")
        } else {
            say("| Ours as a user runs it: `tracer check --offline --json` | skipped: tracer check not built | — |")
        }
        say("| Baseline (a) SQLite join (Python sqlite3) | \(format(joinWork, 2)) s: \(join.detail); process \(format(join.seconds, 2)) s, \(rate(joinWork)), peak RSS \(peak(join)), \(join.matches) matches | — |")
        say("| Baseline (b) Python sets | \(format(setsWork, 2)) s; process \(format(sets.seconds, 2)) s, \(rate(setsWork)), peak RSS \(peak(sets)), \(sets.matches) matches | — |")
        say("| Ratio (a) / ours in-process | \(format(joinWork / ours.totalSeconds, 1))× | ≥ 10×: \(verdict(joinWork / ours.totalSeconds >= 10)) |")
        say("| Ratio (b) / ours in-process | \(format(setsWork / ours.totalSeconds, 1))× | ≥ 3×: \(verdict(setsWork / ours.totalSeconds >= 3)) |")
        if let cli {
            say("| Ratio (a) / ours CLI (process times) | \(format(join.seconds / cli.seconds, 1))× | ≥ 10×: \(verdict(join.seconds / cli.seconds >= 10)) |")
            say("| Ratio (b) / ours CLI (process times) | \(format(sets.seconds / cli.seconds, 1))× | ≥ 3×: \(verdict(sets.seconds / cli.seconds >= 3)) |")
        } else {
            say("| Ratios against ours CLI | skipped: tracer check not built | — |")
        }
    }

    // MARK: Formatting

    /// "≤" when only an upper bound could be measured (see `MeasuredProcess`).
    private func peak(_ figures: ChildFigures) -> String {
        (figures.peakIsUpperBound ? "≤ " : "") + megabytes(figures.peakResidentBytes)
    }

}
