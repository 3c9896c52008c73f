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
        #expect(spill.take() == nil)

        let first = Self.batch(Self.sightings(peers: (0..<5).map { _ in .random() }))
        let kept = try spill.keep(first)
        #expect(kept.path.hasPrefix(temporary.path + "/run/unwritten-encounters-") && spill.existing == [kept])
        #expect(spill.take()?.batch.pending == first.pending && spill.take()?.from == [kept])
        // Read without writing: no -wal or -shm left by the reads.
        #expect(!FileManager.default.fileExists(atPath: kept.path + "-wal") && !FileManager.default.fileExists(atPath: kept.path + "-shm"))

        let second = Self.batch(Self.sightings(peers: (0..<3).map { _ in .random() }))
        // A spill not given back (not `held`) is never overwritten; with no other directory, none is kept.
        #expect(throws: StoreError.self) { try spill.keep(second) }
        #expect(spill.take()?.batch.pending == first.pending)
        try spill.keep(second, replacing: [kept])
        #expect(spill.take()?.batch.pending == second.pending, "the second spill did not replace the first")
        // Private: the node's store's rights, in a directory of its own.
        var info = stat()
        #expect(stat(kept.path, &info) == 0 && info.st_mode & 0o777 == 0o600)
        #expect(stat(temporary.path + "/run", &info) == 0 && info.st_mode & 0o777 == 0o700)

        try spill.discardAll()
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
    /// A run of a log on a store that refuses every write (filled up first): records
    /// `sightings` before its first flush (a few rows would fit in the pages the store has), then
    /// stops.
    static func runRefused(_ location: StoreLocation, spill: EncounterSpill, recording sightings: [Sighting]) async throws {
        let store = try NodeStore.open(location)
        try Self.fillUp(store)
        let log = EncounterLog(store: store, spill: spill)
        for sighting in sightings { await log.record(sighting) }
        let running = Task { await log.runPeriodicFlush(every: .milliseconds(5)) }
        #expect(await eventuallyRefused(log))
        running.cancel()
        await running.value
        #expect(try store.counts().encounters == 0, "the filled store took writes")
    }

    /// A run of a log on a store with room, until every spill it could read is written and gone.
    static func runWithRoom(_ location: StoreLocation, spill: EncounterSpill, leaving left: Int = 0) async throws -> [Encounter] {
        let store = try NodeStore.open(location)
        let log = EncounterLog(store: store, spill: spill)
        let running = Task { await log.runPeriodicFlush(every: .milliseconds(5)) }
        #expect(await eventually { spill.existing.count == left }, "the spill was not removed after its encounters were written")
        running.cancel()
        await running.value
        return try store.encounters()
    }

    /// The node stops while its store refuses writes, starts and stops again with the store still
    /// refusing (more sightings meanwhile), then starts with room: every sighting is written once.
    @Test func theLogKeepsWhatTheStoreRefusesAtEachStopAndTheNextGoodStartWritesItOnce() async throws {
        let temporary = TemporaryDirectory()
        defer { temporary.remove() }
        let location = temporary.location()
        let spill = EncounterSpill(directories: [temporary.path + "/run"], storePath: location.path)
        let peers = (0..<300).map { _ in UserID.random() }
        let first = Self.sightings(peers: peers), second = Self.sightings(peers: peers, offset: 30)

        try await Self.runRefused(location, spill: spill, recording: first)
        #expect(spill.existing.count == 1, "nothing was kept at the stop")
        try await Self.runRefused(location, spill: spill, recording: second)
        let both = Self.batch(first + second)
        #expect(spill.existing.count == 1 && spill.take()?.batch.pending == both.pending, "the second stop did not keep both runs' sightings in one spill")

        let written = try await Self.runWithRoom(location, spill: spill)
        #expect(written.count == both.rowCount && written.reduce(0) { $0 + $1.sightings } == both.sightingCount)
    }

    /// A spill the node cannot read (damaged, or from a newer tracer) is left where it is: a stop
    /// keeps its own sightings elsewhere, a good start writes those and removes only them.
    @Test func aSpillTheNodeCannotReadIsNeverOverwrittenNorRemoved() async throws {
        let temporary = TemporaryDirectory()
        defer { temporary.remove() }
        let location = temporary.location()
        let spill = EncounterSpill(directories: [temporary.path + "/run-a", temporary.path + "/run-b"], storePath: location.path)
        let unreadable = spill.locations[0].path
        try FileManager.default.createDirectory(atPath: temporary.path + "/run-a", withIntermediateDirectories: true)
        let garbage = Data("not a database, but someone's encounters".utf8)
        try garbage.write(to: URL(fileURLWithPath: unreadable))

        let sightings = Self.sightings(peers: (0..<300).map { _ in .random() })
        try await Self.runRefused(location, spill: spill, recording: sightings)
        #expect(spill.existing.map(\.path) == [unreadable, spill.locations[1].path], "the stop's sightings were not kept beside the unreadable spill")
        #expect(try Data(contentsOf: URL(fileURLWithPath: unreadable)) == garbage)
        #expect(spill.take()?.unreadable.map(\.location.path) == [unreadable])

        let written = try await Self.runWithRoom(location, spill: spill, leaving: 1)
        #expect(written.reduce(0) { $0 + $1.sightings } == sightings.count)
        let left = try Data(contentsOf: URL(fileURLWithPath: unreadable))
        #expect(spill.existing.map(\.path) == [unreadable] && left == garbage)
        try spill.discardAll()
        #expect(spill.existing.isEmpty)
    }

    /// Whether the log's flushes fail (it holds sightings it could not write), within a second.
    private static func eventuallyRefused(_ log: EncounterLog) async -> Bool {
        for _ in 0..<200 {
            if await log.pendingSightings > 0, (try? await log.flush()) == nil { return true }
            try? await Task.sleep(for: .milliseconds(5))
        }
        return false
    }

    private static func eventually(_ condition: @Sendable () -> Bool) async -> Bool {
        for _ in 0..<400 {
            if condition() { return true }
            try? await Task.sleep(for: .milliseconds(5))
        }
        return condition()
    }
}
