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
/// The keys are written as real signed key batches into a cache directory laid out as the node's
/// `PositiveListCache` holds them (`index.tpli` with no id batches, `keys/index.tpki`,
/// `keys/N.tpkb`), so `tracer check --offline` runs exactly the path it runs after an update:
/// read the cached key batches, verify them, derive, look up. The same run times the phases
/// in-process and a per-id baseline (one `AES.permute` per id, and one HMAC-SHA256 per id) on a
/// subset of the keys, scaled up.
///
/// The same keys are also written as the list log a node follows (issue 39): the same batches cut
/// into `ListLogEntry`s, appended into a tlog-tiles tree, a checkpoint signed with the list's key
/// and timestamped, kept as `FollowedLogStore` keeps it (`log/state`, `log/entries`) in a second
/// cache directory. `tracer check --offline` runs against both caches in the same run, in turn,
/// and `PositiveListMatcher.match(logEntries:)` is timed in-process beside `match(keyBatches:)`.
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
            + "(\(grouped(data.idCount)) derived ids) in \(data.batches.count) key batches of \(megabytes(data.batchBytes)) in all, "
            + "\(grouped(data.encounterCount)) encounters")

        say("list log (not part of any figure): \(grouped(data.log.entryCount)) entries, entries file \(megabytes(data.log.entriesFileBytes)), "
            + "state \(grouped(data.log.stateFileBytes)) bytes, origin \(data.log.origin), written in \(format(data.log.writeSeconds, 2)) s")
        // A copy of the node's store and both caches, to profile `tracer check` on them (heaptrack).
        if let keep = ProcessInfo.processInfo.environment["TRACER_BENCH_KEEP"] {
            try FileManager.default.copyItem(atPath: directory, toPath: keep)
            say("kept a copy of the store and both caches in \(keep) (TRACER_BENCH_KEEP)")
        }

        let phases = try measurePhases(data)
        let logPhases = try measureLogPhases(data)
        let cli = try measureCLI(data)
        let baseline = try measureBaselines(data)
        report(data, phases: phases, logPhases: logPhases, cli: cli, baseline: baseline)
    }

    // MARK: Data

    struct GeneratedData {
        let databasePath: String
        let cacheDirectory: String
        let batches: [CachedBatch]
        let publicKey: PositiveListPublicKey
        let keyCount: Int
        let idCount: Int
        let batchBytes: Int
        let encounterCount: Int
        let exposedPeers: Set<UserID>
        let log: GeneratedLog
    }

    /// The same keys as a followed list log, in a cache directory of their own.
    struct GeneratedLog {
        let cacheDirectory: String
        let origin: String
        let entryCount: Int
        let entriesFileBytes: Int
        let stateFileBytes: Int
        let treeSize: UInt64
        let rootHash: MerkleHash
        let writeSeconds: Double
        var store: FollowedLogStore { FollowedLogStore(directory: cacheDirectory + "/log") }
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

        let cacheDirectory = directory + "/cache"
        try FileManager.default.createDirectory(atPath: cacheDirectory + "/batches", withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: cacheDirectory + "/keys", withIntermediateDirectories: true)

        let plantedCount = Self.plantedInsideWindow + Self.plantedOutsideWindow
        var planted: [DailyKeyRecord] = []
        var listings: [PositiveListIndex.BatchListing] = []
        var batches: [CachedBatch] = []
        var logEntries: [Data] = []
        var logCutSeconds = 0.0
        var keys = 0
        var ids = 0
        var bytes = 0
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
            let file = try PositiveListKeyBatch.encode(number: number, records: records, signingKey: signingKey)
            let path = cacheDirectory + "/" + PositiveListKeyBatch.relativePath(number: number)
            try Data(file).write(to: URL(fileURLWithPath: path))
            listings.append(PositiveListIndex.BatchListing(
                number: number, timeRange: PositiveListKeyBatch.timeRange(of: records), byteCount: file.count,
                sha256: Array(SHA256.hash(data: file)), kind: .keys))
            batches.append(CachedBatch(number: number, path: path))
            // The same batch as the server's log carries it: cut into entries of at most 64 kB.
            let cutStarted = ContinuousClock.now
            for entry in try ListLogEntry.entries(keyBatch: number, records: records) { logEntries.append(Data(try entry.encode())) }
            logCutSeconds += seconds(ContinuousClock.now - cutStarted)
            keys += records.count
            ids += records.reduce(0) { $0 + derivation.windowIndices(of: $1.day).count }
            bytes += file.count
        }
        guard planted.count == plantedCount else {
            throw BenchmarkFailure("only \(planted.count) keys to plant \(plantedCount) encounters on: too few keys")
        }
        // The node's cache: an id index with no id batches, the key index, the key batches.
        let idIndex = try PositiveListIndex(generation: 1, publishedAt: now, batches: []).encode(signingKey: signingKey)
        try Data(idIndex).write(to: URL(fileURLWithPath: cacheDirectory + "/" + PositiveListIndex.relativePath))
        let keyIndex = try PositiveListKeyIndex(generation: 1, publishedAt: now, accepts: .both, batches: listings).encode(signingKey: signingKey)
        try Data(keyIndex).write(to: URL(fileURLWithPath: cacheDirectory + "/" + PositiveListKeyIndex.relativePath))
        try Data("{\"lastUpdated\": \(now)}\n".utf8).write(to: URL(fileURLWithPath: cacheDirectory + "/state.json"))
        let log = try writeLog(logEntries, cutSeconds: logCutSeconds, signingKey: signingKey, now: now)
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
            databasePath: databasePath, cacheDirectory: cacheDirectory, batches: batches,
            publicKey: PositiveListPublicKey(signingKey.publicKey), keyCount: keys, idCount: ids, batchBytes: bytes,
            encounterCount: sightings.rowCount, exposedPeers: exposedPeers, log: log)
    }

    /// Writes `entries` as the followed log a node holds after following the list's log from its
    /// start: the tree built by the server's appender, a checkpoint with the default origin signed
    /// by the list's key plus the log's timestamp cosignature, and state and entries through
    /// `FollowedLogStore` (what `ListLogUpdater` saves). Checks that the checkpoint opens as the
    /// node opens it before anything is measured.
    private func writeLog(_ entries: [Data], cutSeconds: Double, signingKey: Curve25519.Signing.PrivateKey, now: UnixSeconds) throws -> GeneratedLog {
        let started = ContinuousClock.now
        let cacheDirectory = directory + "/log-cache"
        let origin = PositiveListPublicKey(signingKey.publicKey).defaultLogOrigin
        let appended = try LogAppender.append(entries, to: .empty)
        let signer = try NoteSigner(name: origin, privateKey: signingKey)
        let timestamp = try NoteSigner(name: origin, type: .cosignatureV1, privateKey: signingKey)
        let note = try Checkpoint(origin: origin, treeSize: appended.rightEdge.treeSize, rootHash: appended.rootHash)
            .signed(by: [signer, timestamp], timestamp: UInt64(now)).encoded
        let opened = try Checkpoint.open(
            note, origin: origin, logKey: try NoteVerifierKey(name: origin, type: .ed25519, publicKey: signingKey.publicKey),
            witnesses: [timestamp.verifierKey])
        guard opened.checkpoint.treeSize == UInt64(entries.count), opened.checkpoint.rootHash == appended.rightEdge.rootHash,
              opened.cosignatures.first?.cosignatureTime == UInt64(now)
        else { throw BenchmarkFailure("the log's checkpoint does not open as written") }
        let store = FollowedLogStore(directory: cacheDirectory + "/log")
        try store.save(FollowedLogState(checkpointNote: note, edge: appended.rightEdge), appending: entries)
        try Data("{\"lastUpdated\": \(now)}\n".utf8).write(to: URL(fileURLWithPath: cacheDirectory + "/state.json"))
        let size = { (path: String) in ((try? FileManager.default.attributesOfItem(atPath: path))?[.size] as? NSNumber)?.intValue ?? 0 }
        return GeneratedLog(
            cacheDirectory: cacheDirectory, origin: origin, entryCount: entries.count, entriesFileBytes: size(store.directory + "/entries"),
            stateFileBytes: size(store.directory + "/state"), treeSize: appended.rightEdge.treeSize, rootHash: appended.rootHash,
            writeSeconds: cutSeconds + seconds(ContinuousClock.now - started))
    }

    // MARK: In-process phases

    struct PhaseFigures {
        /// Opening the store and reading the encounters.
        var loadSeconds: Double
        /// `PositiveListMatcher.match(keyBatches:…)`: read, verify, derive and look up.
        var matchSeconds: Double
        /// Reading and verifying every key batch (signature, order), alone.
        var readSeconds: Double
        /// Deriving every key's ids, alone (on every core, keys read from the parsed batches).
        var deriveSeconds: Double
        var matches: Int
    }

    private func measurePhases(_ data: GeneratedData) throws -> PhaseFigures {
        var runs: [PhaseFigures] = []
        for _ in 0..<Self.repetitions {
            let clock = ContinuousClock()
            let started = clock.now
            let store = try NodeStore.open(StoreLocation(path: data.databasePath, source: .flag, ownsDirectory: false))
            let encounters = try store.encounterTimes()
            let loaded = clock.now
            let outcome = try PositiveListMatcher(encounters: encounters).match(keyBatches: data.batches, publicKey: data.publicKey)
            let matched = clock.now
            try check(
                "in-process", keys: outcome.keysChecked, ids: outcome.idsChecked,
                matchedPeers: Set(outcome.matches.map(\.times.peer)), outside: outcome.idsSeenOutsideTheirWindow, data)

            // The phases apart: read and verify every batch, then derive every key's ids.
            var readSeconds = 0.0
            var deriveSeconds = 0.0
            var derived = 0
            for batch in data.batches {
                let readStarted = clock.now
                let parsed = try readBatch(batch, publicKey: data.publicKey)
                let read = clock.now
                derived += deriveAll(parsed).ids
                deriveSeconds += seconds(clock.now - read)
                readSeconds += seconds(read - readStarted)
            }
            guard derived == data.idCount else { throw BenchmarkFailure("derivation alone: \(derived) ids, expected \(data.idCount)") }
            runs.append(PhaseFigures(
                loadSeconds: seconds(loaded - started), matchSeconds: seconds(matched - loaded),
                readSeconds: readSeconds, deriveSeconds: deriveSeconds, matches: outcome.matches.count))
        }
        let median = runs.sorted { $0.loadSeconds + $0.matchSeconds < $1.loadSeconds + $1.matchSeconds }[runs.count / 2]
        say("in-process (median of \(runs.count), load + match s: \(runs.map { format($0.loadSeconds + $0.matchSeconds, 3) }.joined(separator: ", "))): "
            + "load \(format(median.loadSeconds, 3)) s + match \(format(median.matchSeconds, 3)) s; apart: read+verify "
            + "\(format(median.readSeconds, 3)) s, derive \(format(median.deriveSeconds, 3)) s")
        return median
    }

    struct LogPhaseFigures {
        /// `FollowedLogStore.load()`: read the state and the entries file, split it into entries.
        var loadEntriesSeconds: Double
        /// Opening the held checkpoint with the list's key (what the check does before matching).
        var openSeconds: Double
        /// Opening the store and reading the encounters.
        var loadEncountersSeconds: Double
        /// `PositiveListMatcher.match(logEntries:)`: decode, derive and look up.
        var matchSeconds: Double
        /// Decoding every entry (`ListLogEntry(decoding:)`) alone.
        var decodeSeconds: Double
        var entries: Int
        var keyBatches: Int

        var total: Double { loadEntriesSeconds + openSeconds + loadEncountersSeconds + matchSeconds }
    }

    /// What `tracer check` does with a followed log, in-process: load the held entries, open the
    /// checkpoint, read the encounters, `match(logEntries:)`; and decoding the entries alone.
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
            let outcome = PositiveListMatcher(encounters: encounters).match(logEntries: held.entries)
            let matched = clock.now
            try check(
                "in-process (log)", keys: outcome.outcome.keysChecked, ids: outcome.outcome.idsChecked,
                matchedPeers: Set(outcome.outcome.matches.map(\.times.peer)), outside: outcome.outcome.idsSeenOutsideTheirWindow, data)
            guard outcome.unreadableEntries == 0, outcome.keyBatches == data.batches.count, outcome.idBatches == 0 else {
                throw BenchmarkFailure("in-process (log): \(outcome.unreadableEntries) unreadable entries, \(outcome.keyBatches) key batches, "
                    + "\(outcome.idBatches) id batches; expected 0, \(data.batches.count), 0")
            }

            // Decoding alone: every entry into its records.
            let decodeStarted = clock.now
            var decodedKeys = 0
            for entry in held.entries {
                guard case .keys(let records) = try ListLogEntry(decoding: [UInt8](entry)).payload else { continue }
                decodedKeys += records.count
            }
            let decodeSeconds = seconds(clock.now - decodeStarted)
            guard decodedKeys == data.keyCount else { throw BenchmarkFailure("decoding alone: \(decodedKeys) keys, expected \(data.keyCount)") }
            runs.append(LogPhaseFigures(
                loadEntriesSeconds: seconds(loadedEntries - started), openSeconds: seconds(openedAt - loadedEntries),
                loadEncountersSeconds: seconds(loaded - openedAt), matchSeconds: seconds(matched - loaded), decodeSeconds: decodeSeconds,
                entries: held.entries.count, keyBatches: outcome.keyBatches))
        }
        let median = runs.sorted { $0.total < $1.total }[runs.count / 2]
        say("in-process from the log (median of \(runs.count), s: \(runs.map { format($0.total, 3) }.joined(separator: ", "))): "
            + "load entries \(format(median.loadEntriesSeconds, 3)) s + open checkpoint \(format(median.openSeconds, 3)) s + "
            + "load encounters \(format(median.loadEncountersSeconds, 3)) s + match(logEntries:) \(format(median.matchSeconds, 3)) s; "
            + "apart: decode every entry \(format(median.decodeSeconds, 3)) s")
        return median
    }

    private func readBatch(_ batch: CachedBatch, publicKey: PositiveListPublicKey) throws -> PositiveListKeyBatch {
        guard let file = FileManager.default.contents(atPath: batch.path) else { throw BenchmarkFailure("cannot read \(batch.path)") }
        return try PositiveListKeyBatch(verifying: Array(file), publicKey: publicKey)
    }

    /// Every key's ids of `batch`, derived on every core into per-worker buffers (what the
    /// matcher does, without the lookups); returns the id count and an XOR of all ids.
    private func deriveAll(_ batch: PositiveListKeyBatch) -> (ids: Int, checksum: UInt64) {
        let positions = Array(0..<batch.count)
        let groups = batch.groups
        let chunk = 64
        let chunkCount = (positions.count + chunk - 1) / chunk
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
                for position in positions[(taken * chunk)..<min(positions.count, (taken + 1) * chunk)] {
                    let group = groups.last { $0.keys.lowerBound <= position }!
                    let derivation = try! IDDerivation(intervalSeconds: group.intervalSeconds)
                    let indices = derivation.windowIndices(of: group.day)
                    derivation.ids(key: batch.key(at: position), windowIndices: indices, into: buffer)
                    for offset in 0..<indices.count { checksum ^= buffer[offset].rawValue }
                    ids += indices.count
                }
            }
            total.withLock { $0.ids += ids; $0.checksum ^= checksum }
        }
        return total.withLock { $0 }
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

    struct CLIPair {
        var index: CLIFigures
        var log: CLIFigures
    }

    /// The real `tracer check --offline --json` on the signed-index cache and on the followed-log
    /// cache, alternately (index, log, index, log, …) so that both see the same load.
    private func measureCLI(_ data: GeneratedData) throws -> CLIPair? {
        let tracer = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
            .deletingLastPathComponent().appendingPathComponent("tracer").path
        guard FileManager.default.isExecutableFile(atPath: tracer),
              try MeasuredProcess.run(tracer, ["check", "--help"], scratchDirectory: directory).exitCode == 0
        else {
            say("tracer check: skipped: tracer check not built (expected at \(tracer))")
            return nil
        }
        func arguments(_ cacheDirectory: String) -> [String] {
            [
                "check", "--offline", "--json", "--quiet", "--db", data.databasePath,
                "--cache-dir", cacheDirectory, "--server-key", data.publicKey.base64,
            ]
        }
        say("tracer check: \(tracer) \(arguments(data.cacheDirectory).joined(separator: " "))")
        say("tracer check from the log: the same with --cache-dir \(data.log.cacheDirectory)")
        var indexRuns: [CLIFigures] = []
        var logRuns: [CLIFigures] = []
        for _ in 0..<Self.repetitions {
            indexRuns.append(try runCheck(tracer, arguments(data.cacheDirectory), fromLog: false, data))
            logRuns.append(try runCheck(tracer, arguments(data.log.cacheDirectory), fromLog: true, data))
        }
        let index = median(indexRuns)
        let log = median(logRuns)
        say("tracer check (median of \(indexRuns.count), s: \(indexRuns.map { format($0.seconds, 3) }.joined(separator: ", "))): "
            + "\(format(index.seconds, 3)) s, CPU \(format(index.cpuSeconds, 3)) s (runs: \(indexRuns.map { format($0.cpuSeconds, 2) }.joined(separator: ", "))), "
            + "peak RSS \(peak(index)), \(index.detail)")
        say("tracer check from the log (median of \(logRuns.count), s: \(logRuns.map { format($0.seconds, 3) }.joined(separator: ", "))): "
            + "\(format(log.seconds, 3)) s, CPU \(format(log.cpuSeconds, 3)) s (runs: \(logRuns.map { format($0.cpuSeconds, 2) }.joined(separator: ", "))), "
            + "peak RSS \(peak(log)) (runs: \(logRuns.map { megabytes($0.peakResidentBytes) }.joined(separator: ", "))), \(log.detail)")
        return CLIPair(index: index, log: log)
    }

    private func median(_ runs: [CLIFigures]) -> CLIFigures { runs.sorted { $0.seconds < $1.seconds }[runs.count / 2] }

    /// One `tracer check`; its report must count every key and id and find exactly the planted
    /// exposures, and say it matched the list it was meant to (the log's size, or no log).
    private func runCheck(_ tracer: String, _ arguments: [String], fromLog: Bool, _ data: GeneratedData) throws -> CLIFigures {
        let who = fromLog ? "tracer check from the log" : "tracer check"
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
        guard logEntries == (fromLog ? data.log.treeSize : nil) else {
            throw BenchmarkFailure("\(who) matched \(logEntries.map { "a log of \($0) entries" } ?? "the index"), not the list meant")
        }
        return CLIFigures(
            seconds: child.seconds, peakResidentBytes: child.peakResidentBytes, peakIsUpperBound: child.peakIsUpperBound,
            cpuSeconds: child.cpuSeconds, detail: "exit \(child.exitCode), \(report["matchedIDs"] ?? "?") matched ids, encountersChecked \(report["encountersChecked"] ?? "?")"
                + (fromLog ? ", logEntries \(logEntries ?? 0), keyBatches \(list?["keyBatches"] ?? "?")" : ""))
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

    /// Every `baselineStride`-th key of every batch, derived four ways on every core; each must
    /// give the same ids as the batch derivation (the HMAC baseline derives other ids by design
    /// and is only timed).
    private func measureBaselines(_ data: GeneratedData) throws -> BaselineFigures {
        let parsed = try data.batches.map { try readBatch($0, publicKey: data.publicKey) }
        var records: [DailyKeyRecord] = []
        for batch in parsed {
            for position in stride(from: 0, to: batch.count, by: Self.baselineStride) {
                let group = batch.groups.last { $0.keys.lowerBound <= position }!
                records.append(DailyKeyRecord(day: group.day, intervalSeconds: group.intervalSeconds, key: batch.key(at: position)))
            }
        }
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

    private func report(_ data: GeneratedData, phases: PhaseFigures, logPhases: LogPhaseFigures, cli pair: CLIPair?, baseline: BaselineFigures) {
        let cli = pair?.index
        let ids = Double(data.idCount)
        func rate(_ count: Double, _ seconds: Double) -> String { grouped(Int(count / seconds)) + " ids/s" }
        func verdict(_ met: Bool) -> String { met ? "met" : "**missed**" }
        let subset = Double(baseline.ids)
        let lookup = phases.matchSeconds - phases.readSeconds - phases.deriveSeconds

        say("")
        say("| Figure | Result | Target |")
        say("| --- | --- | --- |")
        if let cli {
            say("| Whole `tracer check --offline --json` (process) | \(format(cli.seconds, 3)) s (CPU \(format(cli.cpuSeconds, 3)) s), \(rate(ids, cli.seconds)), peak RSS \(peak(cli)) | "
                + "< 2 s: \(verdict(cli.seconds < 2)); < 64 MB: \(verdict(cli.peakResidentBytes < 64 << 20)) |")
        } else {
            say("| Whole `tracer check` | skipped: tracer check not built | — |")
        }
        if let log = pair?.log, let index = pair?.index {
            say("| Whole `tracer check --offline --json` from the list log (process; \(grouped(data.log.entryCount)) entries, \(megabytes(data.log.entriesFileBytes))) | "
                + "\(format(log.seconds, 3)) s (CPU \(format(log.cpuSeconds, 3)) s), \(rate(ids, log.seconds)), peak RSS \(peak(log)) | "
                + "≤ 2 s: \(verdict(log.seconds <= 2)); ≤ 64 MB: \(verdict(log.peakResidentBytes <= 64 << 20)) |")
            say("| Ratio log / index, same run: wall / CPU / peak RSS | \(format(log.seconds / index.seconds, 2)) / "
                + "\(format(log.cpuSeconds / index.cpuSeconds, 2)) / \(format(Double(log.peakResidentBytes) / Double(index.peakResidentBytes), 2)) "
                + "(peak RSS + \(megabytes(log.peakResidentBytes - index.peakResidentBytes))) | — |")
        }
        say("| In-process: open store + read encounters + match keys | \(format(phases.loadSeconds + phases.matchSeconds, 3)) s "
            + "(\(format(phases.loadSeconds, 3)) + \(format(phases.matchSeconds, 3))), \(rate(ids, phases.matchSeconds)) in the match | — |")
        say("| In-process from the log: load entries + open checkpoint + open store and read encounters + `match(logEntries:)` | "
            + "\(format(logPhases.total, 3)) s (\(format(logPhases.loadEntriesSeconds, 3)) + \(format(logPhases.openSeconds, 3)) + "
            + "\(format(logPhases.loadEncountersSeconds, 3)) + \(format(logPhases.matchSeconds, 3))), \(rate(ids, logPhases.matchSeconds)) in the match | — |")
        say("| `match(logEntries:)` / `match(keyBatches:)`, in-process | \(format(logPhases.matchSeconds, 3)) s / \(format(phases.matchSeconds, 3)) s = "
            + "\(format(logPhases.matchSeconds / phases.matchSeconds, 2)) | — |")
        say("| Log phases apart: decode every entry (`ListLogEntry(decoding:)`) | \(format(logPhases.decodeSeconds, 3)) s | — |")
        say("| Phases apart: read + verify key batches | \(format(phases.readSeconds, 3)) s | — |")
        say("| Phases apart: derive (batch AES-CTR, every core) | \(format(phases.deriveSeconds, 3)) s, \(rate(ids, phases.deriveSeconds)) | — |")
        say("| Phases apart: the rest of the match (lookups, chunking; match − read − derive) | \(format(lookup, 3)) s | — |")
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
