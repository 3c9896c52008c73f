import Foundation
import GRDB
@testable import IDRotation
import Testing
import TestTiers
import TracerCore

@Suite(.tags(.unit)) struct PlaceStoreTests {
    static let library = Place(name: "Library, main entrance", position: nil)!
    static let bus = Place(name: nil, position: Place.Position(latitude: 52.52045, longitude: 13.40612, precisionMeters: 100))!
    static let namedBus = Place(name: "Bus 42", position: bus.position)!

    @Test func eachEncounterKeepsThePlaceWhereItsContactBegan() throws {
        let temporary = TemporaryDirectory()
        defer { temporary.remove() }
        let store = try NodeStore.open(temporary.location())
        let (a, b, c, d) = (UserID.random(), UserID.random(), UserID.random(), UserID.random())
        var batch = SightingBatch()
        batch.add(Sighting(peer: a, ownWindowStart: 900, time: 1_000, rssi: -60, place: Self.library))
        batch.add(Sighting(peer: a, ownWindowStart: 900, time: 1_100, rssi: -60, place: Self.bus))
        batch.add(Sighting(peer: b, ownWindowStart: 900, time: 1_000, rssi: -60, place: Self.namedBus))
        batch.add(Sighting(peer: c, ownWindowStart: 900, time: 1_000, rssi: -60))
        batch.add(Sighting(peer: d, ownWindowStart: 900, time: 1_000, rssi: -60))
        try store.write(batch)
        // A later batch: the first place stays; a window without one takes the first it gets.
        var later = SightingBatch()
        later.add(Sighting(peer: b, ownWindowStart: 900, time: 1_200, rssi: -60, place: Self.library))
        later.add(Sighting(peer: c, ownWindowStart: 900, time: 1_200, rssi: -60, place: Self.bus))
        try store.write(later)
        let places = Dictionary(uniqueKeysWithValues: try store.encounters().map { ($0.peer, $0.place) })
        #expect(places[a] == Self.library)
        #expect(places[b] == Self.namedBus)
        #expect(places[c] == Self.bus)
        #expect(places[d] == .some(nil))
        // Each place is stored once, however many encounters name it.
        #expect(try store.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM places") } == 3)
        // The matching path reads whole rows by key, with their place.
        let byKey = try store.encounters(at: [EncounterTimes(peer: a, ownWindowStart: 900, firstSeen: 1_000, lastSeen: 1_100)])
        #expect(byKey.map(\.place) == [Self.library])
    }

    /// The README promises a place per window, not a track: flushes of a window already placed,
    /// from a node that moved on, must leave no rows for the cells it passed through.
    @Test func cellsPassedThroughByAPlacedWindowLeaveNoTrack() throws {
        let temporary = TemporaryDirectory()
        defer { temporary.remove() }
        let store = try NodeStore.open(temporary.location())
        let peer = UserID.random()
        for step in 0..<5 {
            let cell = Place(name: nil, position: Place.Position(
                latitude: 52.52 + Double(step) * 0.001, longitude: 13.40, precisionMeters: 100))!
            var batch = SightingBatch()
            batch.add(Sighting(peer: peer, ownWindowStart: 900, time: 1_000 + UnixSeconds(step) * 60, rssi: -60, place: cell))
            try store.write(batch)
        }
        #expect(try store.encounters().map(\.place?.position?.latitude) == [52.52])
        #expect(try store.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM places") } == 1)
    }

    @Test func theEncounterLogStampsThePlaceInForce() async throws {
        let temporary = TemporaryDirectory()
        defer { temporary.remove() }
        let store = try NodeStore.open(temporary.location())
        let log = EncounterLog(store: store, placeInForce: { PlaceStoreTests.bus })
        await log.record(Sighting(peer: .random(), ownWindowStart: 900, time: 1_000, rssi: -60))
        try await log.flush()
        #expect(try store.encounters().map(\.place) == [Self.bus])
    }

    @Test func purgeDeletesPlacesWithTheirLastEncounterAndForgetDeletesAll() throws {
        let temporary = TemporaryDirectory()
        defer { temporary.remove() }
        let location = temporary.location()
        let store = try NodeStore.open(location)
        let now: UnixSeconds = 1_795_324_033
        let old = now - 29 * .secondsPerDay, recent = now - 1 * .secondsPerDay
        var batch = SightingBatch()
        batch.add(Sighting(peer: .random(), ownWindowStart: old, time: old + 10, place: Self.library))
        batch.add(Sighting(peer: .random(), ownWindowStart: old, time: old + 10, place: Self.bus))
        batch.add(Sighting(peer: .random(), ownWindowStart: recent, time: recent + 10, place: Self.bus))
        try store.write(batch)
        let result = try store.purge(now: now)
        #expect(result.encountersDeleted == 2)
        #expect(result.placesDeleted == 1)
        #expect(try store.read { db in try String.fetchAll(db, sql: "SELECT name FROM places WHERE name IS NOT NULL") }.isEmpty)
        #expect(try store.encounters().map(\.place) == [Self.bus])

        try NodeStore.deleteAllData(at: location)
        #expect(!FileManager.default.fileExists(atPath: location.path))
    }

    /// A database made by the previous schema (v3) keeps every row and value; its rows have no
    /// place, and new sightings of the same window fill one in.
    @Test func aVersion3DatabaseMigratesWithItsEncountersAndNoPlaces() throws {
        let temporary = TemporaryDirectory()
        defer { temporary.remove() }
        let location = temporary.location()
        let peer = UserID.random()
        do {
            try FileManager.default.createDirectory(
                atPath: (location.path as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
            let queue = try DatabaseQueue(path: location.path)
            try Schema.migrator.migrate(queue, upTo: "v3: RSSI histogram per encounter")
            try queue.write { db in
                try db.execute(
                    sql: """
                        INSERT INTO encounters (own_window_start, peer_id, first_seen, last_seen, sightings,
                            rssi_min, rssi_max, rssi_sum, rssi_count, tx_power, reported_rssi, learned_by, rssi_histogram)
                        VALUES (900, ?, 1000, 1200, 2, -70, -50, -120, 2, -20, -55, 1, ?)
                        """,
                    arguments: [peer.databaseValue, Data(RSSIHistogram([-70: 1, -50: 1]).encoded)])
            }
            let columns = try queue.read { db in try db.columns(in: "encounters").map(\.name) }
            try #require(!columns.contains("place_id"), "not a v3 database: \(columns)")
            try queue.close()
        }
        let store = try NodeStore.open(location)
        #expect(try store.appliedSchemaVersions() == NodeStore.schemaVersions)
        let old = try #require(try store.encounters().first)
        #expect((old.firstSeen, old.lastSeen, old.sightings, old.rssiMin, old.rssiMax) == (1_000, 1_200, 2, -70, -50))
        #expect((old.rssiSum, old.rssiCount, old.txPower, old.reportedRSSI, old.learnedBy) == (-120, 2, -20, -55, .read))
        #expect(old.rssiHistogram.counts == [-70: 1, -50: 1])
        #expect(old.place == nil)

        var batch = SightingBatch()
        batch.add(Sighting(peer: peer, ownWindowStart: 900, time: 1_300, rssi: -45, place: Self.library))
        try store.write(batch)
        let merged = try #require(try store.encounters().first)
        #expect((merged.sightings, merged.lastSeen, merged.place) == (3, 1_300, Self.library))
        #expect(try store.integrityCheck() == ["ok"])
    }
}
