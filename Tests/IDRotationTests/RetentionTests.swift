import Foundation
import GRDB
import IDRotation
import Testing
import TestTiers
import TracerCore

@Suite(.tags(.unit)) struct RetentionTests {
    let now: UnixSeconds = 1_795_324_033
    let day = UnixSeconds.secondsPerDay

    func daysAgo(_ days: Double) -> UnixSeconds { now - UnixSeconds(days * Double(day)) }

    @Test func purgesEncountersAndOwnIDsOlderThan28DaysOnly() throws {
        let temporary = TemporaryDirectory()
        defer { temporary.remove() }
        let store = try NodeStore.open(temporary.location())
        let kept = UserID.random()
        let expired = UserID.random()
        var batch = SightingBatch()
        batch.add(Sighting(peer: kept, ownWindowStart: daysAgo(27.9) - 300, time: daysAgo(27.9), rssi: -60))
        batch.add(Sighting(peer: expired, ownWindowStart: daysAgo(28.1) - 300, time: daysAgo(28.1), rssi: -60))
        try store.write(batch)
        let keptOwn = OwnID(id: .random(), window: IDWindow(start: daysAgo(27.9) - 900, end: daysAgo(27.9)))
        let expiredOwn = OwnID(id: .random(), window: IDWindow(start: daysAgo(28.1) - 900, end: daysAgo(28.1)))
        try store.recordOwnID(keptOwn)
        try store.recordOwnID(expiredOwn)

        let result = try store.purge(now: now)
        #expect(result == PurgeResult(encountersDeleted: 1, ownIDsDeleted: 1))
        #expect(try store.encounters().map(\.peer) == [kept])
        #expect(try store.ownIDs() == [keptOwn])
        #expect(try store.lastPurge() == now)
        #expect(try store.purge(now: now) == PurgeResult(encountersDeleted: 0, ownIDsDeleted: 0))
    }

    @Test func anEncounterSeenRecentlyIsKeptEvenIfItStartedLongAgo() throws {
        let temporary = TemporaryDirectory()
        defer { temporary.remove() }
        let store = try NodeStore.open(temporary.location())
        let peer = UserID.random()
        var batch = SightingBatch()
        batch.add(Sighting(peer: peer, ownWindowStart: daysAgo(28.2), time: daysAgo(28.2)))
        batch.add(Sighting(peer: peer, ownWindowStart: daysAgo(28.2), time: daysAgo(27.9)))
        try store.write(batch)
        #expect(try store.purge(now: now).encountersDeleted == 0)
    }

    @Test func ownIDsCanBeKeptForLessTimeButNeverLonger() throws {
        let temporary = TemporaryDirectory()
        defer { temporary.remove() }
        let store = try NodeStore.open(temporary.location())
        let recent = OwnID(id: .random(), window: IDWindow(start: daysAgo(2) - 900, end: daysAgo(2)))
        let older = OwnID(id: .random(), window: IDWindow(start: daysAgo(10) - 900, end: daysAgo(10)))
        try store.recordOwnID(recent)
        try store.recordOwnID(older)
        let policy = try RetentionPolicy(encounterDays: 28, ownIDDays: 7)
        #expect(try store.purge(now: now, policy: policy).ownIDsDeleted == 1)
        #expect(try store.ownIDs() == [recent])

        #expect(throws: StoreError.self) { try RetentionPolicy(encounterDays: 14, ownIDDays: 21) }
        #expect(throws: StoreError.self) { try RetentionPolicy(encounterDays: 29) }
        #expect(throws: StoreError.self) { try RetentionPolicy(encounterDays: 0) }
    }

    @Test func purgeLeavesNoCopyInTheWAL() throws {
        let temporary = TemporaryDirectory()
        defer { temporary.remove() }
        let location = temporary.location()
        let store = try NodeStore.open(location)
        var batch = SightingBatch()
        for _ in 0..<200 { batch.add(Sighting(peer: .random(), ownWindowStart: daysAgo(30), time: daysAgo(30))) }
        try store.write(batch)
        try store.purge(now: now)
        let walSize = (try? FileManager.default.attributesOfItem(atPath: location.path + "-wal")[.size] as? NSNumber)?.intValue
        #expect((walSize ?? 0) == 0)
        #expect(try store.counts().encounters == 0)
    }

    @Test func deletedIDsAreOverwrittenInTheFile() throws {
        let temporary = TemporaryDirectory()
        defer { temporary.remove() }
        let location = temporary.location()
        let store = try NodeStore.open(location)
        let peer = try UserID(hex: "5eed5eed5eed5eed")
        var batch = SightingBatch()
        batch.add(Sighting(peer: peer, ownWindowStart: daysAgo(30), time: daysAgo(30)))
        try store.write(batch)
        try store.purge(now: now)
        let file = try Data(contentsOf: URL(fileURLWithPath: location.path))
        #expect(file.range(of: Data(peer.bytes)) == nil)
    }
}

@Suite(.tags(.unit)) struct PeriodicPurgeTests {
    @Test func purgesOnStartAndAgainOnEveryTick() async throws {
        let temporary = TemporaryDirectory()
        defer { temporary.remove() }
        let store = try NodeStore.open(temporary.location())
        let clock = ManualClock(1_795_324_033)
        let old = clock.now() - 29 * .secondsPerDay
        var batch = SightingBatch()
        batch.add(Sighting(peer: .random(), ownWindowStart: old, time: old))
        try store.write(batch)

        let task = Task { await store.purgePeriodically(every: .milliseconds(20), clock: clock) }
        try await waitUntil { try store.counts().encounters == 0 }

        // A row that expires while the job runs is removed at a later tick.
        var later = SightingBatch()
        later.add(Sighting(peer: .random(), ownWindowStart: clock.now() - 60, time: clock.now() - 60))
        try store.write(later)
        #expect(try store.counts().encounters == 1)
        clock.advance(28 * .secondsPerDay)
        try await waitUntil { try store.counts().encounters == 0 }
        task.cancel()
        await task.value
    }

    private func waitUntil(_ condition: () throws -> Bool) async throws {
        let held = try await eventually(condition)
        if !held { Issue.record("condition not met within 10 s") }
    }
}
