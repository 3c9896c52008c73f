import Foundation
import IDRotation
import Places
import TracerCore

/// Encounter logging figures for BENCHMARKS.md: throughput with the node's batching against a
/// one-transaction-per-sighting baseline measured in the same run, the size of a 28-day file,
/// and the time to purge it.
struct StoreBenchmark {
    let directory: String

    func run() async throws {
        say("# Encounter store benchmark (\(Date()))")
        say("SQLite \(NodeStore.sqliteVersion), \(ProcessInfo.processInfo.activeProcessorCount) cores")
        try await throughput()
        try twentyEightDays()
    }

    /// 2,000 peers in range, each heard about 4 times a second: 8,000 sightings per simulated
    /// second, flushed once per simulated second as `EncounterLog` does, ids rotating every 15 min.
    func throughput() async throws {
        let peers = (0..<2_000).map { _ in UserID.random() }
        let total = 1_000_000
        let perSecond = 8_000
        var random = SystemRandomNumberGenerator()
        let start: UnixSeconds = 1_795_300_000
        let rssi = (0..<4_096).map { _ in Int8.random(in: -95 ... -40, using: &random) }

        func sighting(_ index: Int) -> Sighting {
            let time = start + UnixSeconds(index / perSecond)
            let window = time - time % 900
            // Peer ids rotate with their own windows too: a fresh id per peer per 15 minutes.
            let peer = UserID(rawValue: peers[index % peers.count].rawValue &+ UInt64(window))
            return Sighting(peer: peer, ownWindowStart: window, time: time, rssi: rssi[index % rssi.count])
        }

        // Batched, as the node does it.
        let batchedStore = try NodeStore.open(location("throughput-batched.db"))
        let batchedCPUBefore = processCPUSeconds()
        let batchedSeconds = try measure {
            var batch = SightingBatch()
            var second = start
            for index in 0..<total {
                let next = sighting(index)
                if next.time != second {
                    try batchedStore.write(batch)
                    batch = SightingBatch()
                    second = next.time
                }
                batch.add(next)
            }
            try batchedStore.write(batch)
        }
        let batchedCPU = processCPUSeconds() - batchedCPUBefore
        let written = try batchedStore.encounters().reduce(0) { $0 + $1.sightings }
        precondition(written == total, "batched run lost sightings: \(written) of \(total)")
        let rows = try batchedStore.counts().encounters

        // The same, through the EncounterLog actor the node uses: one actor call per sighting.
        let actorStore = try NodeStore.open(location("throughput-actor.db"))
        let log = EncounterLog(store: actorStore)
        let actorCPUBefore = processCPUSeconds()
        let actorSeconds = try await measureAsync {
            var second = start
            for index in 0..<total {
                let next = sighting(index)
                if next.time != second {
                    try await log.flush()
                    second = next.time
                }
                await log.record(next)
            }
            try await log.flush()
        }
        let actorCPU = processCPUSeconds() - actorCPUBefore
        let actorWritten = try actorStore.encounters().reduce(0) { $0 + $1.sightings }
        precondition(actorWritten == total, "actor run lost sightings: \(actorWritten) of \(total)")

        // Baseline: the same upsert, one transaction per sighting (what logging each advertising
        // report as it arrives would do). Run on a slice and reported as a rate.
        let baselineCount = 20_000
        let baselineStore = try NodeStore.open(location("throughput-baseline.db"))
        let baselineSeconds = try measure {
            for index in 0..<baselineCount {
                var single = SightingBatch()
                single.add(sighting(index))
                try baselineStore.write(single)
            }
        }

        let batchedRate = Double(total) / batchedSeconds
        let baselineRate = Double(baselineCount) / baselineSeconds
        say("")
        say("## Sightings per second (2,000 peers, \(total) sightings, 8,000 per simulated second)")
        say(String(format: "batched, SightingBatch + NodeStore.write once per simulated second: %.0f sightings/s (%.2f s, %d rows)", batchedRate, batchedSeconds, rows))
        say(String(format: "batched, through the EncounterLog actor (one await per sighting): %.0f sightings/s (%.2f s)", Double(total) / actorSeconds, actorSeconds))
        say(String(format: "CPU per million sightings (user + system, all threads; what other processes' load moves least): batched %.2f s, through EncounterLog %.2f s",
                   batchedCPU * 1_000_000 / Double(total), actorCPU * 1_000_000 / Double(total)))
        say(String(format: "baseline (one transaction per sighting, %d sightings): %.0f sightings/s", baselineCount, baselineRate))
        say(String(format: "ratio batched/baseline: %.1fx; actor path/baseline: %.1fx (target: >= 50,000 sightings/s)", batchedRate / baselineRate, Double(total) / actorSeconds / baselineRate))
    }

    /// 28 days at 1,000 distinct people a day, each in range for 1 to 8 of our 15-minute windows
    /// (their id rotates too, so each window is a new peer id), one sighting every 4 s.
    func twentyEightDays() throws {
        var random = SystemRandomNumberGenerator()
        let now: UnixSeconds = 1_795_300_000
        let firstDay = now - 28 * .secondsPerDay
        let location = location("28-days.db")
        let store = try NodeStore.open(location)
        var sightings = 0
        let fillSeconds = try measure {
            for day in 0..<28 {
                let dayStart = firstDay + UnixSeconds(day) * .secondsPerDay
                var batch = SightingBatch()
                for _ in 0..<1_000 {
                    let arrival = dayStart + UnixSeconds.random(in: 0..<(.secondsPerDay - 8 * 900), using: &random)
                    let windows = Int.random(in: 1...8, using: &random)
                    let closeness = Int8.random(in: -90 ... -45, using: &random)
                    for window in 0..<windows {
                        let windowStart = arrival - arrival % 900 + UnixSeconds(window) * 900
                        let peer = UserID.random(using: &random)
                        var time = max(windowStart, arrival)
                        while time < windowStart + 900 {
                            batch.add(Sighting(peer: peer, ownWindowStart: windowStart, time: time,
                                               rssi: closeness, txPower: 0, learnedBy: time == arrival ? .read : []))
                            sightings += 1
                            time += 4
                        }
                    }
                }
                try store.write(batch)
                try recordOwnIDs(ofDayStarting: dayStart, in: store, using: &random)
            }
        }
        try store.purge(now: now - .secondsPerDay * 100)  // checkpoints the WAL; deletes nothing
        let counts = try store.counts()
        let bytes = fileSize(location.path)
        say("")
        say("## 28 days at 1,000 distinct people a day (each 1-8 windows, a sighting every 4 s)")
        say(String(format: "%d sightings -> %d encounter rows, %d own ids; file %.2f MB (target < 10 MB); filled in %.1f s",
                     sightings, counts.encounters, counts.ownIDs, Double(bytes) / 1_048_576, fillSeconds))

        // The daily purge: one day expires.
        let daily = try measure { _ = try store.purge(now: now + .secondsPerDay) }
        // The worst case: the node was off for a month and everything expires at once.
        var purged = PurgeResult(encountersDeleted: 0, ownIDsDeleted: 0)
        let everything = try measure { purged = try store.purge(now: now + 30 * .secondsPerDay) }
        say(String(format: "purge of one expired day: %.3f s; purge of all 28 days (%d rows): %.3f s (target < 1 s)",
                     daily, purged.encountersDeleted + purged.ownIDsDeleted, everything))
        say(String(format: "file after purging everything: %.2f MB (pages are kept for reuse; no VACUUM)",
                     Double(fileSize(location.path)) / 1_048_576))
    }

    /// Where the 28-day node of `twentyEightDays` was when it met each person.
    enum PlaceMode: String, CaseIterable {
        /// No place configured (the default).
        case none
        /// A fixed node: one name for every encounter.
        case name
        /// A moving node with gpsd, at its worst for size: a different 100 m cell for every
        /// person it meets (28,000 cells), each stored once and named by every row of that person.
        case cellPerPerson = "cell-per-person"
    }

    /// The 28-day file's size without places, with a fixed place and with a new gpsd cell per
    /// person, in one run (`TracerBench store-places`): the same generator and counts, so the
    /// difference is what places cost.
    func places() throws {
        say("# Encounter store with places (\(Date()))")
        say("SQLite \(NodeStore.sqliteVersion); 28 days at 1,000 distinct people a day (each 1-8 windows, a sighting every 4 s)")
        say("| places | encounter rows | place rows | file (MB) | vs none |")
        say("| --- | --- | --- | --- | --- |")
        var baseline: Int?
        for mode in PlaceMode.allCases {
            let location = location("28-days-\(mode.rawValue).db")
            let store = try NodeStore.open(location)
            try fillTwentyEightDays(store, places: mode)
            try store.purge(now: 1_795_300_000 - .secondsPerDay * 100)  // checkpoints the WAL; deletes nothing
            let bytes = fileSize(location.path)
            let placeRows = Set(try store.encounters().compactMap(\.place)).count
            baseline = baseline ?? bytes
            say(String(format: "| %@ | %d | %d | %.2f | %+.1f %% |", mode.rawValue, try store.counts().encounters, placeRows,
                       Double(bytes) / 1_048_576, 100 * (Double(bytes) / Double(baseline!) - 1)))
        }
    }

    /// The 28 days of `twentyEightDays`, with each person's encounters at the place `places` gives.
    private func fillTwentyEightDays(_ store: NodeStore, places: PlaceMode) throws {
        var random = SystemRandomNumberGenerator()
        let now: UnixSeconds = 1_795_300_000
        let firstDay = now - 28 * .secondsPerDay
        let library = Place(name: "Library, main entrance", position: nil)
        for day in 0..<28 {
            let dayStart = firstDay + UnixSeconds(day) * .secondsPerDay
            var batch = SightingBatch()
            for _ in 0..<1_000 {
                let arrival = dayStart + UnixSeconds.random(in: 0..<(.secondsPerDay - 8 * 900), using: &random)
                let windows = Int.random(in: 1...8, using: &random)
                let closeness = Int8.random(in: -90 ... -45, using: &random)
                let place: Place? = switch places {
                case .none: nil
                case .name: library
                case .cellPerPerson:
                    // Somewhere in a 40 km square around Berlin, on the default 100 m grid.
                    Place(name: nil, position: PlaceGrid.cell(
                        latitude: 52.3 + Double.random(in: 0..<0.36, using: &random),
                        longitude: 13.1 + Double.random(in: 0..<0.6, using: &random), precisionMeters: 100))
                }
                for window in 0..<windows {
                    let windowStart = arrival - arrival % 900 + UnixSeconds(window) * 900
                    let peer = UserID.random(using: &random)
                    var time = max(windowStart, arrival)
                    while time < windowStart + 900 {
                        batch.add(Sighting(peer: peer, ownWindowStart: windowStart, time: time,
                                           rssi: closeness, txPower: 0, learnedBy: time == arrival ? .read : [], place: place))
                        time += 4
                    }
                }
            }
            try store.write(batch)
            try recordOwnIDs(ofDayStarting: dayStart, in: store, using: &random)
        }
    }

    /// A day of the node's own ids, one per 15-minute window, as a running node keeps them.
    private func recordOwnIDs<Random: RandomNumberGenerator>(
        ofDayStarting dayStart: UnixSeconds, in store: NodeStore, using random: inout Random
    ) throws {
        var ownStart = dayStart
        while ownStart < dayStart + .secondsPerDay {
            try store.recordOwnID(OwnID(id: .random(using: &random), window: IDWindow(start: ownStart, end: ownStart + 900)))
            ownStart += 900
        }
    }

    private func location(_ name: String) -> StoreLocation {
        StoreLocation(path: directory + "/" + name, source: .flag, ownsDirectory: false)
    }

    private func measure(_ body: () throws -> Void) throws -> Double {
        let clock = ContinuousClock()
        let elapsed = try clock.measure(body)
        return Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
    }

    private func measureAsync(_ body: () async throws -> Void) async throws -> Double {
        let clock = ContinuousClock()
        let started = clock.now
        try await body()
        let elapsed = clock.now - started
        return Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
    }

    private func fileSize(_ path: String) -> Int {
        ((try? FileManager.default.attributesOfItem(atPath: path))?[.size] as? NSNumber)?.intValue ?? 0
    }
}
