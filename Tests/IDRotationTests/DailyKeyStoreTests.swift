import Foundation
import GRDB
@testable import IDRotation
import Testing
import TestTiers
import TracerCore

/// Daily keys in the node's store: one per day and interval, kept across restarts, migrated
/// into, purged and erased with the ids.
@Suite(.tags(.unit)) struct DailyKeyStoreTests {
    let now: UnixSeconds = 1_795_324_033  // 2026-11-22 05:07:13 UTC
    let today = UTCDay(number: 20_779)

    @Test func aDaysKeyIsRecordedOnceAndKeptAcrossReopening() throws {
        let temporary = TemporaryDirectory()
        defer { temporary.remove() }
        let first = DailyKey.random()
        let second = DailyKey.random()
        do {
            let store = try NodeStore.open(temporary.location())
            #expect(try store.dailyKey(for: today, intervalSeconds: 900, recordingIfAbsent: first) == first)
            #expect(try store.dailyKey(for: today, intervalSeconds: 900, recordingIfAbsent: second) == first)
            #expect(try store.dailyKey(for: today, intervalSeconds: 600, recordingIfAbsent: second) == second)
        }
        let reopened = try NodeStore.open(temporary.location())
        #expect(try reopened.dailyKey(for: today, intervalSeconds: 900, recordingIfAbsent: .random()) == first)
        #expect(try reopened.dailyKeys() == [
            DailyKeyRecord(day: today, intervalSeconds: 600, key: second),
            DailyKeyRecord(day: today, intervalSeconds: 900, key: first),
        ])
        #expect(try reopened.counts().dailyKeys == 2)
    }

    /// The node's own store, restarted: the same day gives the same key and the same ids.
    @Test func aRestartedNodeKeepsItsKeyAndIDsInItsStore() async throws {
        let temporary = TemporaryDirectory()
        defer { temporary.remove() }
        let clock = ManualClock(now)
        let schedule = try RotationSchedule()
        let first = try await IDRotator(schedule: schedule, history: try NodeStore.open(temporary.location()), clock: clock)
            .currentID()
        clock.set(first.window.end + 5)
        let store = try NodeStore.open(temporary.location())
        let second = try #require(try await IDRotator(schedule: schedule, history: store, clock: clock).rotateIfDue()).current
        let keys = try store.dailyKeys()
        let key = try #require(keys.first?.key)
        #expect(keys.count == 1)
        let derivation = IDDerivation(schedule: schedule)
        for own in [first, second] {
            #expect(own.id == derivation.id(key: key, windowIndex: derivation.windowIndex(ofWindowStartingAt: own.window.start)!))
        }
        #expect(try store.ownIDs() == [first, second])
    }

    /// A database as the release before daily keys left it (schema v1 only): it gains the table,
    /// keeps its random ids as they were, and new windows use derived ids.
    @Test func aDatabaseFromBeforeDailyKeysMigrates() async throws {
        let temporary = TemporaryDirectory()
        defer { temporary.remove() }
        let location = temporary.location()
        let oldIDs = [
            OwnID(id: .random(), window: IDWindow(start: now - 1_800 - 307, end: now - 900 - 307)),
            OwnID(id: .random(), window: IDWindow(start: now - 900 - 307, end: now - 307)),
        ]
        let peer = UserID.random()
        try makeVersion1Database(at: location.path, ownIDs: oldIDs, peer: peer)

        let store = try NodeStore.open(location)
        #expect(try store.appliedSchemaVersions() == NodeStore.schemaVersions)
        #expect(NodeStore.schemaVersions.contains("v2: daily keys"))
        #expect(try store.ownIDs() == oldIDs)
        #expect(try store.encounters().map(\.peer) == [peer])
        #expect(try store.dailyKeys().isEmpty)

        // The node resumes after the upgrade: the next window's id comes from today's new key.
        let clock = ManualClock(now)
        let rotation = try #require(try await IDRotator(schedule: try RotationSchedule(), history: store, clock: clock).rotateIfDue())
        #expect(rotation.previous == oldIDs[1])
        let key = try #require(try store.dailyKeys().first)
        #expect(key.day == today)
        let derivation = try IDDerivation(intervalSeconds: 900)
        let index = try #require(derivation.windowIndex(ofWindowStartingAt: rotation.current.window.start))
        #expect(rotation.current.id == derivation.id(key: key.key, windowIndex: index))
        #expect(try store.ownIDs() == oldIDs + [rotation.current])
    }

    /// Schema v1 through the migrator's own v1 step, which a released step never changes.
    private func makeVersion1Database(at path: String, ownIDs: [OwnID], peer: UserID) throws {
        let queue = try DatabaseQueue(path: path)
        try Schema.migrator.migrate(queue, upTo: "v1: own ids and aggregated encounters")
        try queue.write { db in
            for own in ownIDs {
                try db.execute(
                    sql: "INSERT INTO own_ids (id, valid_from, valid_until) VALUES (?, ?, ?)",
                    arguments: [own.id.databaseValue, own.window.start, own.window.end])
            }
            try db.execute(
                sql: "INSERT INTO encounters (own_window_start, peer_id, first_seen, last_seen, sightings) VALUES (?, ?, ?, ?, 1)",
                arguments: [ownIDs[ownIDs.count - 1].window.start, peer.databaseValue, now - 600, now - 600])
        }
        let tables = try queue.read { db in try String.fetchAll(db, sql: "SELECT name FROM sqlite_master WHERE type = 'table'") }
        try #require(tables.contains("own_ids") && !tables.contains("daily_keys"), "not a v1 database: \(tables)")
        try queue.close()
    }

    @Test func keysArePurgedWithTheIDsOfTheirDay() throws {
        let temporary = TemporaryDirectory()
        defer { temporary.remove() }
        let location = temporary.location()
        let store = try NodeStore.open(location)
        let cutoff = now - 28 * .secondsPerDay
        let expiredDay = UTCDay(containing: cutoff - .secondsPerDay)  // ended before the cutoff
        let cutoffDay = UTCDay(containing: cutoff)  // ends after it: some of its ids are kept
        let expired = DailyKey.random()
        for (day, key) in [(expiredDay, expired), (cutoffDay, .random()), (today, .random())] {
            _ = try store.dailyKey(for: day, intervalSeconds: 900, recordingIfAbsent: key)
        }
        let result = try store.purge(now: now)
        #expect(result.dailyKeysDeleted == 1)
        #expect(try store.dailyKeys().map(\.day) == [cutoffDay, today])
        // Deleted, and overwritten in the file (secure_delete and the WAL truncated).
        let file = try Data(contentsOf: URL(fileURLWithPath: location.path))
        #expect(file.range(of: Data(expired.bytes)) == nil)

        // Own ids kept for 7 days: keys go after 7 days too.
        let policy = try RetentionPolicy(encounterDays: 28, ownIDDays: 7)
        #expect(try store.purge(now: now, policy: policy).dailyKeysDeleted == 1)
        #expect(try store.dailyKeys().map(\.day) == [today])
    }

    /// `tracer forget` erases the keys' rows before it removes the files: a hard link to the
    /// database, made beforehand, finds no key bytes left in it.
    @Test func deleteAllDataOverwritesTheKeys() throws {
        let temporary = TemporaryDirectory()
        defer { temporary.remove() }
        let location = temporary.location()
        let key = DailyKey.random()
        do {
            let store = try NodeStore.open(location)
            _ = try store.dailyKey(for: today, intervalSeconds: 900, recordingIfAbsent: key)
            try store.checkpoint()
        }
        let linked = temporary.path + "/linked.db"
        try FileManager.default.linkItem(atPath: location.path, toPath: linked)
        let before = try Data(contentsOf: URL(fileURLWithPath: linked))
        try #require(before.range(of: Data(key.bytes)) != nil, "the key is not in the file, so the check below proves nothing")

        try NodeStore.deleteAllData(at: location)
        #expect(!FileManager.default.fileExists(atPath: location.path))
        let after = try Data(contentsOf: URL(fileURLWithPath: linked))
        #expect(after.range(of: Data(key.bytes)) == nil)
    }
}
