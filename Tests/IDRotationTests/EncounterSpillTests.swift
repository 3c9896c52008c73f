import Foundation
import GRDB
@testable import IDRotation
import Testing
import TestTiers
import TracerCore

/// Encounters a node holds in memory when it stops with a store that refuses writes go to a spill
/// in a runtime directory, and its next start writes them into the store, once.
@Suite(.tags(.unit)) struct EncounterSpillTests {
    /// `peers` seen in two windows, several times each, with and without RSSI, from `offset`
    /// seconds into each window.
    static func sightings(peers: [UserID], offset: Int64 = 0) -> [Sighting] {
        var sightings: [Sighting] = []
        for (index, peer) in peers.enumerated() {
            for step in 0..<4 {
                let window: UnixSeconds = 1_800_000_000 + Int64(step % 2) * 900
                sightings.append(Sighting(peer: peer, ownWindowStart: window, time: window + offset + Int64(index % 60 + step),
                                          rssi: step == 2 ? nil : Int8(-40 - (index + step + Int(offset)) % 40),
                                          txPower: step == 1 ? Int8(offset % 7) : nil, learnedBy: step == 0 ? .read : .written))
            }
        }
        return sightings
    }

    static func batch(_ sightings: [Sighting]) -> SightingBatch {
        var batch = SightingBatch()
        for sighting in sightings { batch.add(sighting) }
        return batch
    }

    /// The store at `store`, limited to the pages it has now: the next write that needs a page
    /// fails as a full disk does (SQLITE_FULL), on this connection only.
    static func fillUp(_ store: NodeStore) throws {
        try store.write { db in
            let pages = try Int.fetchOne(db, sql: "PRAGMA page_count") ?? 1
            _ = try Int.fetchOne(db, sql: "PRAGMA max_page_count = \(pages)")
        }
    }

    @Test func encountersMergedInMemoryEqualWhatTheStoresUpsertMakesOfThem() throws {
        let temporary = TemporaryDirectory()
        defer { temporary.remove() }
        let peers = (0..<20).map { _ in UserID.random() }
        let earlier = Self.batch(Self.sightings(peers: peers)), later = Self.batch(Self.sightings(peers: peers, offset: 30))

        let upserted = try NodeStore.open(temporary.location("upserted.db"))
        try upserted.write(earlier)
        try upserted.write(later)

        var merged = SightingBatch()
        for encounter in earlier.pending.values { merged.add(encounter) }
        for encounter in later.pending.values { merged.add(encounter) }
        #expect(merged.sightingCount == earlier.sightingCount + later.sightingCount)
        let inMemory = try NodeStore.open(temporary.location("merged.db"))
        try inMemory.write(merged)

        let byKey = { (encounters: [Encounter]) in Dictionary(uniqueKeysWithValues: encounters.map { ($0.key, $0) }) }
        let expected = byKey(try upserted.encounters()), actual = byKey(try inMemory.encounters())
        #expect(expected.count == peers.count * 2 && actual == expected)
        #expect(expected.values.allSatisfy { $0.sightings == 4 }, "the two batches did not meet in the same rows")
    }

    @Test func aSpillIsKeptInTheFirstRuntimeDirectoryThatTakesItAndReplacedByTheNext() throws {
        let temporary = TemporaryDirectory()
        defer { temporary.remove() }
        let spill = EncounterSpill(directories: ["/proc/no-such-directory", temporary.path + "/run"], storePath: temporary.path + "/node.db")
        #expect(try spill.take() == nil)

        let first = Self.batch(Self.sightings(peers: (0..<5).map { _ in .random() }))
        let kept = try spill.keep(first)
        #expect(kept.path.hasPrefix(temporary.path + "/run/unwritten-encounters-") && spill.existing == [kept])
        #expect(try spill.take()?.pending == first.pending)

        let second = Self.batch(Self.sightings(peers: (0..<3).map { _ in .random() }))
        try spill.keep(second)
        #expect(try spill.take()?.pending == second.pending, "the second spill did not replace the first")
        // Private: the node's store's rights, in a directory of its own.
        var info = stat()
        #expect(stat(kept.path, &info) == 0 && info.st_mode & 0o777 == 0o600)
        #expect(stat(temporary.path + "/run", &info) == 0 && info.st_mode & 0o777 == 0o700)

        try spill.discard()
        #expect(spill.existing.isEmpty && !FileManager.default.fileExists(atPath: kept.path + "-wal"))
    }

    @Test func runtimeDirectoriesComeFromSystemdThenTheUserThenRun() {
        let environment = ["RUNTIME_DIRECTORY": "/run/tracer-a:/run/other", "XDG_RUNTIME_DIR": "/run/user/1000"]
        #expect(EncounterSpill.candidateDirectories(environment: environment) == ["/run/tracer-a", "/run/user/1000/tracer", "/run/tracer"])
        #expect(EncounterSpill.candidateDirectories(environment: ["XDG_RUNTIME_DIR": "relative"]) == ["/run/tracer"])
        // One spill per store, named without the store's path.
        let a = EncounterSpill(forStoreAt: "/var/lib/tracer/tracer.db", environment: [:])
        let b = EncounterSpill(forStoreAt: "/var/lib/tracer/other.db", environment: [:])
        #expect(a.locations.count == 1 && a.locations != b.locations)
        #expect(!(a.locations.first?.path.contains("var") ?? true))
    }

    /// The node stops while its store refuses writes: what it held is kept, the next start writes
    /// it, and a start after that writes nothing again.
    @Test func theLogKeepsWhatTheStoreRefusesWhenItStopsAndTheNextStartWritesItOnce() async throws {
        let temporary = TemporaryDirectory()
        defer { temporary.remove() }
        let location = temporary.location()
        let spill = EncounterSpill(directories: [temporary.path + "/run"], storePath: location.path)
        let sightings = Self.sightings(peers: (0..<300).map { _ in .random() })
        let held = Self.batch(sightings)

        do {
            let store = try NodeStore.open(location)
            try Self.fillUp(store)
            let log = EncounterLog(store: store, spill: spill)
            // All recorded before the first flush: a few rows would fit in the pages the store
            // has, and the flush would write them.
            for sighting in sightings { await log.record(sighting) }
            let running = Task { await log.runPeriodicFlush(every: .milliseconds(5)) }
            #expect(await eventuallyRefused(log))
            running.cancel()
            await running.value
            #expect(try store.counts().encounters == 0, "the filled store took writes")
        }
        #expect(spill.existing.count == 1, "nothing was kept at the stop")

        // The next start, with room again: the kept encounters are written, the spill removed.
        do {
            let store = try NodeStore.open(location)
            let log = EncounterLog(store: store, spill: spill)
            let running = Task { await log.runPeriodicFlush(every: .milliseconds(5)) }
            #expect(await eventually { spill.existing.isEmpty }, "the spill was not removed after its encounters were written")
            running.cancel()
            await running.value
            let written = try store.encounters()
            #expect(written.count == held.rowCount && written.reduce(0) { $0 + $1.sightings } == held.sightingCount)
        }
        // A start after that finds nothing to write twice.
        let store = try NodeStore.open(location)
        let log = EncounterLog(store: store, spill: spill)
        let running = Task { await log.runPeriodicFlush(every: .milliseconds(5)) }
        try await Task.sleep(for: .milliseconds(50))
        running.cancel()
        await running.value
        #expect(try store.encounters().reduce(0) { $0 + $1.sightings } == held.sightingCount)
    }

    /// Whether the log's flushes fail (it holds sightings it could not write), within a second.
    private func eventuallyRefused(_ log: EncounterLog) async -> Bool {
        for _ in 0..<200 {
            if await log.pendingSightings > 0, (try? await log.flush()) == nil { return true }
            try? await Task.sleep(for: .milliseconds(5))
        }
        return false
    }

    private func eventually(_ condition: @Sendable () -> Bool) async -> Bool {
        for _ in 0..<400 {
            if condition() { return true }
            try? await Task.sleep(for: .milliseconds(5))
        }
        return condition()
    }
}
