import _CryptoExtras
import Crypto
import Dispatch
import Foundation
import IDRotation
import Matching
import PositiveListFormat
import Synchronization
import TracerCore
import TransparencyLog

/// Key-matching figures for BENCHMARKS.md (issue 13, figure b): `keyCount` published daily keys
/// (15-minute windows, so 96 derived ids each) matched against a node database of
/// `encounterCount` encounters over 28 days.
///
/// The keys are cut into key batches as the server cuts them, and each batch into the
/// `ListLogEntry`s its log carries, appended into a tlog-tiles tree with a checkpoint signed with
/// the list's key and timestamped, kept as `FollowedLogStore` keeps it (`log/state`,
/// `log/entries`) in a cache directory: `tracer check --offline` runs exactly the path it runs
/// after an update (load the entries, open the checkpoint, decode, derive, look up). The same run
/// times the phases in-process and a per-id baseline (one `AES.permute` per id, and one
/// HMAC-SHA256 per id) on a subset of the keys, scaled up.
///
/// Every method must find exactly the planted exposures: a wrong count stops the run.
struct KeyMatchBenchmark {
    let directory: String
    let keyCount: Int
    let encounterCount: Int
    /// How many key batches the keys are spread over. The server cuts one an hour (the default
    /// publication) and keeps a batch until its last day leaves the 28 days, so a steady list
    /// is about 28 × 24 batches.
    let batchCount: Int

    static let interval: Int64 = 900
    /// Keys with one derived id met inside that id's window: the exposures every method must find.
    static let plantedInsideWindow = 500
    /// Keys with one derived id met a day after that id's window (a replayed id): must not match.
    static let plantedOutsideWindow = 100
    static let repetitions = 3
    /// The baselines derive every `baselineStride`-th key and are scaled up by it.
    static let baselineStride = 50

    func run() throws {
        say("# Key matching benchmark (\(Date()))")
        let load = (try? String(contentsOfFile: "/proc/loadavg", encoding: .utf8))?.split(separator: " ").prefix(3).joined(separator: " ") ?? "?"
        let cpu = (try? String(contentsOfFile: "/proc/cpuinfo", encoding: .utf8))?
            .split(separator: "\n").first { $0.hasPrefix("model name") }?.split(separator: ":").last?.trimmingCharacters(in: .whitespaces) ?? "?"
        say("\(ProcessInfo.processInfo.activeProcessorCount) cores (\(cpu)), load average \(load)")
        say("keys: \(grouped(keyCount)) at \(Self.interval) s windows in \(batchCount) key batches; node: \(grouped(encounterCount)) encounters, "
            + "\(Self.plantedInsideWindow) met inside a derived id's window, \(Self.plantedOutsideWindow) a day after it")

        let clock = ContinuousClock()
        let started = clock.now
        let data = try generate()
        say("generated in \(format(seconds(clock.now - started), 1)) s (not part of any figure): \(grouped(data.keyCount)) keys "
            + "(\(grouped(data.idCount)) derived ids) in \(data.batchCount) key batches, "
            + "\(grouped(data.encounterCount)) encounters")

        say("list log (not part of any figure): \(grouped(data.log.entryCount)) entries, entries file \(megabytes(data.log.entriesFileBytes)), "
            + "state \(grouped(data.log.stateFileBytes)) bytes, origin \(data.log.origin), written in \(format(data.log.writeSeconds, 2)) s")
        // A copy of the node's store and cache, to profile `tracer check` on them (heaptrack).
        if let keep = ProcessInfo.processInfo.environment["TRACER_BENCH_KEEP"] {
            try FileManager.default.copyItem(atPath: directory, toPath: keep)
            say("kept a copy of the store and the cache in \(keep) (TRACER_BENCH_KEEP)")
        }

        let logPhases = try measureLogPhases(data)
        let cli = try measureCLI(data)
        let baseline = try measureBaselines(data)
        report(data, logPhases: logPhases, cli: cli, baseline: baseline)
    }

    // MARK: Data

    struct GeneratedData {
        let databasePath: String
        let publicKey: PositiveListPublicKey
        let keyCount: Int
        let idCount: Int
        let batchCount: Int
        /// The keys as signed key batch files (the index's format, by the server's writer).
        let encounterCount: Int
        let exposedPeers: Set<UserID>
        let log: FollowedLogCache
    }

    private func generate() throws -> GeneratedData {
        let signingKey = Curve25519.Signing.PrivateKey()
        var random = SystemRandomNumberGenerator()
        let now = UnixSeconds(Date().timeIntervalSince1970)
        let today = UTCDay(containing: now)
        // Key days from 27 to 2 days ago: every window is inside the node's 28 days, and a
        // replay one day later is still in the past.
        let firstDay = today.number - 27
        let dayCount: Int64 = 26
        let derivation = try IDDerivation(intervalSeconds: Self.interval)

        let cacheDirectory = directory + "/log-cache"
        try FileManager.default.createDirectory(atPath: cacheDirectory, withIntermediateDirectories: true)

        let plantedCount = Self.plantedInsideWindow + Self.plantedOutsideWindow
        var planted: [DailyKeyRecord] = []
        var batches = 0
        var logEntries: [Data] = []
        var logCutSeconds = 0.0
        var keys = 0
        var ids = 0
        for batchIndex in 0..<batchCount {
            let size = keyCount / batchCount + (batchIndex < keyCount % batchCount ? 1 : 0)
            guard size > 0 else { continue }
            let records = (0..<size).map { _ in
                var raw = [UInt8](repeating: 0, count: DailyKey.byteCount)
                raw.withUnsafeMutableBytes { buffer in
                    buffer.storeBytes(of: random.next() as UInt64, toByteOffset: 0, as: UInt64.self)
                    buffer.storeBytes(of: random.next() as UInt64, toByteOffset: 8, as: UInt64.self)
                }
                return DailyKeyRecord(
                    day: UTCDay(number: firstDay + Int64.random(in: 0..<dayCount, using: &random)),
                    intervalSeconds: Self.interval, key: try! DailyKey(bytes: raw))
            }
            let plantedHere = plantedCount / batchCount + (batchIndex < plantedCount % batchCount ? 1 : 0)
            var positions = Set<Int>()
            while positions.count < min(plantedHere, records.count) { positions.insert(Int.random(in: 0..<records.count, using: &random)) }
            planted += positions.map { records[$0] }

            let number = UInt64(batchIndex + 1)
            batches += 1
            // The batch as the server's log carries it: cut into entries of at most 64 kB.
            let cutStarted = ContinuousClock.now
            for entry in try ListLogEntry.entries(keyBatch: number, records: records) { logEntries.append(Data(try entry.encode())) }
            logCutSeconds += seconds(ContinuousClock.now - cutStarted)
            keys += records.count
            ids += records.reduce(0) { $0 + derivation.windowIndices(of: $1.day).count }
        }
        guard planted.count == plantedCount else {
            throw BenchmarkFailure("only \(planted.count) keys to plant \(plantedCount) encounters on: too few keys")
        }
        let log = try FollowedLogCache.write(logEntries, to: cacheDirectory, cutSeconds: logCutSeconds, signingKey: signingKey, now: now)
        logEntries = []

        var sightings = SightingBatch()
        func addEncounter(_ peer: UserID, from firstSeen: UnixSeconds, to lastSeen: UnixSeconds) {
            let ownWindowStart = firstSeen - firstSeen % Self.interval
            let rssi = Int8.random(in: -90 ... -45, using: &random)
            sightings.add(Sighting(peer: peer, ownWindowStart: ownWindowStart, time: firstSeen, rssi: rssi, txPower: 0, learnedBy: .read))
            sightings.add(Sighting(peer: peer, ownWindowStart: ownWindowStart, time: lastSeen, rssi: rssi, txPower: 0))
        }
        planted.shuffle(using: &random)
        var exposedPeers = Set<UserID>()
        for (position, record) in planted.enumerated() {
            // One window of the key's day; the encounter uses the id that key derives for it.
            let indices = derivation.windowIndices(of: record.day)
            let index = UInt32.random(in: indices, using: &random)
            let id = derivation.id(key: record.key, windowIndex: index)
            let length = UnixSeconds.random(in: 10...300, using: &random)
            var firstSeen = derivation.nominalStart(ofWindowIndex: index) + UnixSeconds.random(in: 0...(Self.interval - length), using: &random)
            if position < Self.plantedInsideWindow {
                exposedPeers.insert(id)
            } else {
                // The same id a day later: far outside its window, whatever the tolerance and jitter.
                firstSeen += .secondsPerDay
            }
            addEncounter(id, from: firstSeen, to: firstSeen + length)
        }
        for _ in 0..<max(0, encounterCount - planted.count) {
            let firstSeen = now - 28 * .secondsPerDay + 3_600 + UnixSeconds.random(in: 0..<(28 * .secondsPerDay - 7_200), using: &random)
            addEncounter(UserID(rawValue: random.next()), from: firstSeen, to: firstSeen + UnixSeconds.random(in: 10...900, using: &random))
        }
        let databasePath = directory + "/node.db"
        do {
            let store = try NodeStore.open(StoreLocation(path: databasePath, source: .flag, ownsDirectory: false))
            try store.write(sightings)
        }
        return GeneratedData(
            databasePath: databasePath, publicKey: PositiveListPublicKey(signingKey.publicKey), keyCount: keys, idCount: ids,
            batchCount: batches, encounterCount: sightings.rowCount, exposedPeers: exposedPeers, log: log)
    }

    // MARK: In-process phases

    struct LogPhaseFigures {
        /// `FollowedLogStore.load()`: read the state, and check that the entries file frames what it counts.
        var loadEntriesSeconds: Double
        /// Opening the held checkpoint with the list's key (what the check does before matching).
        var openSeconds: Double
        /// Opening the store and reading the encounters.
        var loadEncountersSeconds: Double
        /// `PositiveListMatcher.match(heldEntries:)`: read the entries, decode, derive and look up.
        var matchSeconds: Double
        /// Reading every entry into memory and decoding it (`ListLogEntry(decoding:)`) alone.
        var decodeSeconds: Double
        /// Deriving every key's ids alone (on every core, from the decoded records).
        var deriveSeconds: Double
        var entries: Int
        var keyBatches: Int

        var total: Double { loadEntriesSeconds + openSeconds + loadEncountersSeconds + matchSeconds }
    }

    /// What `tracer check` does with a followed log, in-process: load the held entries, open the
    /// checkpoint, read the encounters, `match(heldEntries:)`; and reading and decoding the entries, and
    /// deriving their keys' ids, alone.
    private func measureLogPhases(_ data: GeneratedData) throws -> LogPhaseFigures {
        let origin = data.log.origin
        let logKey = try NoteVerifierKey(name: origin, type: .ed25519, publicKey: data.publicKey.key)
        let timestampKey = try NoteVerifierKey(name: origin, type: .cosignatureV1, publicKey: data.publicKey.key)
        var runs: [LogPhaseFigures] = []
        for _ in 0..<Self.repetitions {
            let clock = ContinuousClock()
            let started = clock.now
            guard let held = try data.log.store.load() else { throw BenchmarkFailure("the followed log is not held") }
            let loadedEntries = clock.now
            let opened = try Checkpoint.open(held.state.checkpointNote, origin: origin, logKey: logKey, witnesses: [timestampKey])
            guard opened.checkpoint.treeSize == held.state.treeSize, opened.checkpoint.rootHash == held.state.rootHash,
                  held.state.rootHash == data.log.rootHash, held.entries.count == data.log.entryCount
            else { throw BenchmarkFailure("the held log does not match its checkpoint") }
            let openedAt = clock.now
            let store = try NodeStore.open(StoreLocation(path: data.databasePath, source: .flag, ownsDirectory: false))
            let encounters = try store.encounterTimes()
            let loaded = clock.now
            let outcome = try PositiveListMatcher(encounters: encounters).match(heldEntries: held.entries)
            let matched = clock.now
            try check(
                "in-process (log)", keys: outcome.outcome.keysChecked, ids: outcome.outcome.idsChecked,
                matchedPeers: Set(outcome.outcome.matches.map(\.times.peer)), outside: outcome.outcome.idsSeenOutsideTheirWindow, data)
            guard outcome.unreadableEntries == 0, outcome.keyBatches == data.batchCount, outcome.idBatches == 0 else {
                throw BenchmarkFailure("in-process (log): \(outcome.unreadableEntries) unreadable entries, \(outcome.keyBatches) key batches, "
                    + "\(outcome.idBatches) id batches; expected 0, \(data.batchCount), 0")
            }

            // Decoding alone: every entry into its records.
            let decodeStarted = clock.now
            let records = try Self.keyRecords(held.entries.read())
            let decodeSeconds = seconds(clock.now - decodeStarted)
            guard records.count == data.keyCount else { throw BenchmarkFailure("decoding alone: \(records.count) keys, expected \(data.keyCount)") }

            // Deriving alone: every key's ids, as the matcher derives them, without the lookups.
            let deriveStarted = clock.now
            let derived = perKey(records) { record, derivation, indices, buffer in
                derivation.ids(key: record.key, windowIndices: indices, into: buffer)
                return 0
            }
            let deriveSeconds = seconds(clock.now - deriveStarted)
            guard derived.ids == data.idCount else { throw BenchmarkFailure("derivation alone: \(derived.ids) ids, expected \(data.idCount)") }
            runs.append(LogPhaseFigures(
                loadEntriesSeconds: seconds(loadedEntries - started), openSeconds: seconds(openedAt - loadedEntries),
                loadEncountersSeconds: seconds(loaded - openedAt), matchSeconds: seconds(matched - loaded), decodeSeconds: decodeSeconds,
                deriveSeconds: deriveSeconds, entries: held.entries.count, keyBatches: outcome.keyBatches))
        }
        let median = runs.sorted { $0.total < $1.total }[runs.count / 2]
        say("in-process from the log (median of \(runs.count), s: \(runs.map { format($0.total, 3) }.joined(separator: ", "))): "
            + "load entries \(format(median.loadEntriesSeconds, 3)) s + open checkpoint \(format(median.openSeconds, 3)) s + "
            + "load encounters \(format(median.loadEncountersSeconds, 3)) s + match(heldEntries:) \(format(median.matchSeconds, 3)) s; "
            + "apart: decode every entry \(format(median.decodeSeconds, 3)) s, derive \(format(median.deriveSeconds, 3)) s")
        return median
    }

    /// The daily keys of the log's key entries, in order.
    private static func keyRecords(_ entries: [Data]) throws -> [DailyKeyRecord] {
        var records: [DailyKeyRecord] = []
        for entry in entries {
            guard case .keys(let keys) = try ListLogEntry(decoding: [UInt8](entry)).payload else { continue }
            records += keys
        }
        return records
    }

    private func check(
        _ who: String, keys: Int?, ids: Int?, matchedPeers: Set<UserID>?, matchedCount: Int? = nil, outside: Int?, _ data: GeneratedData
    ) throws {
        guard keys == data.keyCount else { throw BenchmarkFailure("\(who): checked \(String(describing: keys)) keys, the list has \(data.keyCount)") }
        guard ids == data.idCount else { throw BenchmarkFailure("\(who): checked \(String(describing: ids)) ids, the keys derive \(data.idCount)") }
        if let matchedPeers, matchedPeers != data.exposedPeers {
            throw BenchmarkFailure("\(who): matched \(matchedPeers.count) ids, \(matchedPeers.subtracting(data.exposedPeers).count) not planted; expected the \(data.exposedPeers.count) planted")
        }
        if let matchedCount, matchedCount != data.exposedPeers.count {
            throw BenchmarkFailure("\(who): matched \(matchedCount) ids, expected the \(data.exposedPeers.count) planted")
        }
        guard outside == Self.plantedOutsideWindow else {
            throw BenchmarkFailure("\(who): \(String(describing: outside)) ids seen outside their window, expected \(Self.plantedOutsideWindow)")
        }
    }

    // MARK: tracer check

    struct CLIFigures {
        var seconds: Double
        var peakResidentBytes: Int
        var peakIsUpperBound: Bool
        /// User + system CPU time: less sensitive than wall time to other work on the machine.
        var cpuSeconds: Double
        var detail: String
    }

    /// The real `tracer check --offline --json` on the followed-log cache, `repetitions` times.
    private func measureCLI(_ data: GeneratedData) throws -> CLIFigures? {
        let tracer = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
            .deletingLastPathComponent().appendingPathComponent("tracer").path
        guard FileManager.default.isExecutableFile(atPath: tracer),
              try MeasuredProcess.run(tracer, ["check", "--help"], scratchDirectory: directory).exitCode == 0
        else {
            say("tracer check: skipped: tracer check not built (expected at \(tracer))")
            return nil
        }
        let arguments = [
            "check", "--offline", "--json", "--quiet", "--db", data.databasePath,
            "--cache-dir", data.log.cacheDirectory, "--server-key", data.publicKey.base64,
        ]
        say("tracer check: \(tracer) \(arguments.joined(separator: " "))")
        let runs = try (0..<Self.repetitions).map { _ in try runCheck(tracer, arguments, data) }
        let median = runs.sorted { $0.seconds < $1.seconds }[runs.count / 2]
        say("tracer check (median of \(runs.count), s: \(runs.map { format($0.seconds, 3) }.joined(separator: ", "))): "
            + "\(format(median.seconds, 3)) s, CPU \(format(median.cpuSeconds, 3)) s (runs: \(runs.map { format($0.cpuSeconds, 2) }.joined(separator: ", "))), "
            + "peak RSS \(peak(median)) (runs: \(runs.map { megabytes($0.peakResidentBytes) }.joined(separator: ", "))), \(median.detail)")
        return median
    }

    /// One `tracer check`; its report must count every key and id and find exactly the planted
    /// exposures, and say it matched the whole log.
    private func runCheck(_ tracer: String, _ arguments: [String], _ data: GeneratedData) throws -> CLIFigures {
        let who = "tracer check"
        let child = try MeasuredProcess.run(tracer, arguments, scratchDirectory: directory)
        guard child.exitCode == 3 || child.exitCode == 0 else {
            throw BenchmarkFailure("\(who) exited \(child.exitCode): \(child.standardError.prefix(1_000))")
        }
        let report = try child.jsonReport()
        try check(
            who, keys: report["keysChecked"] as? Int, ids: report["idsChecked"] as? Int, matchedPeers: nil,
            matchedCount: report["matchedIDs"] as? Int, outside: report["idsSeenOutsideTheirWindow"] as? Int, data)
        let list = report["list"] as? [String: Any]
        let logEntries = (list?["logEntries"] as? NSNumber)?.uint64Value
        guard logEntries == data.log.treeSize else {
            throw BenchmarkFailure("\(who) matched \(logEntries.map { "a log of \($0) entries" } ?? "no log"), not the log of \(data.log.treeSize)")
        }
        return CLIFigures(
            seconds: child.seconds, peakResidentBytes: child.peakResidentBytes, peakIsUpperBound: child.peakIsUpperBound,
            cpuSeconds: child.cpuSeconds, detail: "exit \(child.exitCode), \(report["matchedIDs"] ?? "?") matched ids, encountersChecked \(report["encountersChecked"] ?? "?")"
                + ", logEntries \(logEntries ?? 0), keyBatches \(list?["keyBatches"] ?? "?")")
    }

    // MARK: Baselines

    struct BaselineFigures {
        var keys: Int
        var ids: Int
        /// The batch derivation (`IDDerivation.ids(key:windowIndices:into:)`) of the same subset.
        var batchSeconds: Double
        /// One `AES.permute` per id, the key schedule set up once per key.
        var permuteSeconds: Double
        /// `IDDerivation.id(key:windowIndex:)` per id: `AES.permute` with a `SymmetricKey` per id.
        var perIDAPISeconds: Double
        /// One HMAC-SHA256 per id (the key as HMAC key, the same 16-byte block as message).
        var hmacSeconds: Double
    }

    /// Every `baselineStride`-th key of the log, derived four ways on every core; each must
    /// give the same ids as the batch derivation (the HMAC baseline derives other ids by design
    /// and is only timed).
    private func measureBaselines(_ data: GeneratedData) throws -> BaselineFigures {
        guard let held = try data.log.store.load() else { throw BenchmarkFailure("the followed log is not held") }
        let all = try Self.keyRecords(held.entries.read())
        let records = stride(from: 0, to: all.count, by: Self.baselineStride).map { all[$0] }
        let clock = ContinuousClock()
        // The batch derivation of the same keys, in the same loop as the baselines.
        var started = clock.now
        let batch = perKey(records) { record, derivation, indices, buffer in
            derivation.ids(key: record.key, windowIndices: indices, into: buffer)
            var checksum: UInt64 = 0
            for offset in 0..<indices.count { checksum ^= buffer[offset].rawValue }
            return checksum
        }
        let batchSeconds = seconds(clock.now - started)
        let batchIDs = batch.ids
        let batchChecksum = batch.checksum

        started = clock.now
        let permute = perKey(records) { record, derivation, indices, _ in
            let key = SymmetricKey(data: record.key.bytes)
            var checksum: UInt64 = 0
            for index in indices {
                var block = derivation.block(windowIndex: index)
                try! AES.permute(&block, key: key)
                checksum ^= block.withUnsafeBytes { UInt64(bigEndian: $0.loadUnaligned(as: UInt64.self)) }
            }
            return checksum
        }
        let permuteSeconds = seconds(clock.now - started)

        started = clock.now
        let perIDAPI = perKey(records) { record, derivation, indices, _ in
            var checksum: UInt64 = 0
            for index in indices { checksum ^= derivation.id(key: record.key, windowIndex: index).rawValue }
            return checksum
        }
        let perIDAPISeconds = seconds(clock.now - started)

        started = clock.now
        let hmac = perKey(records) { record, derivation, indices, _ in
            let key = SymmetricKey(data: record.key.bytes)
            var checksum: UInt64 = 0
            for index in indices {
                let mac = HMAC<SHA256>.authenticationCode(for: derivation.block(windowIndex: index), using: key)
                checksum ^= mac.withUnsafeBytes { UInt64(bigEndian: $0.loadUnaligned(as: UInt64.self)) }
            }
            return checksum
        }
        let hmacSeconds = seconds(clock.now - started)

        guard permute.ids == batchIDs, perIDAPI.ids == batchIDs, hmac.ids == batchIDs else {
            throw BenchmarkFailure("baselines derived \(permute.ids), \(perIDAPI.ids), \(hmac.ids) ids, the batch derivation \(batchIDs)")
        }
        guard permute.checksum == batchChecksum, perIDAPI.checksum == batchChecksum else {
            throw BenchmarkFailure("a per-id baseline derived other ids than the batch derivation")
        }
        let figures = BaselineFigures(
            keys: records.count, ids: batchIDs, batchSeconds: batchSeconds, permuteSeconds: permuteSeconds,
            perIDAPISeconds: perIDAPISeconds, hmacSeconds: hmacSeconds)
        say("baselines on \(grouped(records.count)) keys (every \(Self.baselineStride)th, \(grouped(batchIDs)) ids): batch derivation "
            + "\(format(batchSeconds, 3)) s, AES.permute per id \(format(permuteSeconds, 3)) s, IDDerivation.id per id "
            + "\(format(perIDAPISeconds, 3)) s, HMAC-SHA256 per id \(format(hmacSeconds, 3)) s")
        return figures
    }

    /// Runs `derive(record, derivation, windowIndices)` for every record on every core; returns
    /// the id count and the XOR of what `derive` returned.
    private func perKey(
        _ records: [DailyKeyRecord],
        _ derive: @Sendable @escaping (DailyKeyRecord, IDDerivation, Range<UInt32>, UnsafeMutableBufferPointer<UserID>) -> UInt64
    ) -> (ids: Int, checksum: UInt64) {
        let chunk = 16
        let chunkCount = (records.count + chunk - 1) / chunk
        let next = Atomic<Int>(0)
        let total = Mutex<(ids: Int, checksum: UInt64)>((0, 0))
        DispatchQueue.concurrentPerform(iterations: ProcessInfo.processInfo.activeProcessorCount) { _ in
            let buffer = UnsafeMutableBufferPointer<UserID>.allocate(capacity: Int(UnixSeconds.secondsPerDay / 5) + 1)
            buffer.initialize(repeating: UserID(rawValue: 0))
            defer { buffer.deallocate() }
            var ids = 0
            var checksum: UInt64 = 0
            while true {
                let taken = next.add(1, ordering: .relaxed).oldValue
                guard taken < chunkCount else { break }
                for record in records[(taken * chunk)..<min(records.count, (taken + 1) * chunk)] {
                    let derivation = try! IDDerivation(intervalSeconds: record.intervalSeconds)
                    let indices = derivation.windowIndices(of: record.day)
                    checksum ^= derive(record, derivation, indices, buffer)
                    ids += indices.count
                }
            }
            total.withLock { $0.ids += ids; $0.checksum ^= checksum }
        }
        return total.withLock { $0 }
    }

    // MARK: Report

    private func report(_ data: GeneratedData, logPhases: LogPhaseFigures, cli: CLIFigures?, baseline: BaselineFigures) {
        let ids = Double(data.idCount)
        func rate(_ count: Double, _ seconds: Double) -> String { grouped(Int(count / seconds)) + " ids/s" }
        func verdict(_ met: Bool) -> String { met ? "met" : "**missed**" }
        let subset = Double(baseline.ids)
        let lookup = logPhases.matchSeconds - logPhases.decodeSeconds - logPhases.deriveSeconds

        say("")
        say("| Figure | Result | Target |")
        say("| --- | --- | --- |")
        if let cli {
            say("| Whole `tracer check --offline --json` from the list log (process; \(grouped(data.log.entryCount)) entries, \(megabytes(data.log.entriesFileBytes))) | "
                + "\(format(cli.seconds, 3)) s (CPU \(format(cli.cpuSeconds, 3)) s), \(rate(ids, cli.seconds)), peak RSS \(peak(cli)) | "
                + "≤ 2 s: \(verdict(cli.seconds <= 2)); ≤ 64 MB: \(verdict(cli.peakResidentBytes <= 64 << 20)) |")
        } else {
            say("| Whole `tracer check` | skipped: tracer check not built | — |")
        }
        say("| In-process from the log: load entries + open checkpoint + open store and read encounters + `match(heldEntries:)` | "
            + "\(format(logPhases.total, 3)) s (\(format(logPhases.loadEntriesSeconds, 3)) + \(format(logPhases.openSeconds, 3)) + "
            + "\(format(logPhases.loadEncountersSeconds, 3)) + \(format(logPhases.matchSeconds, 3))), \(rate(ids, logPhases.matchSeconds)) in the match | — |")
        say("| Phases apart: decode every entry (`ListLogEntry(decoding:)`) | \(format(logPhases.decodeSeconds, 3)) s | — |")
        say("| Phases apart: derive (batch AES-CTR, every core) | \(format(logPhases.deriveSeconds, 3)) s, \(rate(ids, logPhases.deriveSeconds)) | — |")
        say("| Phases apart: the rest of the match (lookups, chunking; match − decode − derive) | \(format(lookup, 3)) s | — |")
        say("| Subset (\(grouped(baseline.keys)) keys, \(grouped(baseline.ids)) ids): batch derivation | \(format(baseline.batchSeconds, 3)) s, \(rate(subset, baseline.batchSeconds)) | — |")
        for (name, time) in [
            ("baseline: `AES.permute` per id, key set up per key", baseline.permuteSeconds),
            ("baseline: `IDDerivation.id` per id (`SymmetricKey` per id)", baseline.perIDAPISeconds),
            ("baseline: HMAC-SHA256 per id", baseline.hmacSeconds),
        ] {
            say("| Subset: \(name) | \(format(time, 3)) s, \(rate(subset, time)); for all \(grouped(data.idCount)) ids ≈ "
                + "\(format(time * ids / subset, 2)) s; batch derivation \(format(time / baseline.batchSeconds, 1))× faster | — |")
        }
    }

    // MARK: Formatting

    private func peak(_ figures: CLIFigures) -> String {
        (figures.peakIsUpperBound ? "≤ " : "") + megabytes(figures.peakResidentBytes)
    }

}
