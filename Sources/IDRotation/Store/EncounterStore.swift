import Foundation
import GRDB
import TracerCore

extension NodeStore {
    // Merges a pending aggregate into its row. SQLite's multi-argument min()/max() return NULL
    // when any argument is NULL, hence the coalesce pairs for the optional RSSI bounds.
    private static let upsertEncounter = """
        INSERT INTO encounters (peer_id, own_window_start, first_seen, last_seen, sightings,
            rssi_min, rssi_max, rssi_sum, rssi_count, tx_power, reported_rssi, learned_by, rssi_histogram, place_id)
        VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
        ON CONFLICT (own_window_start, peer_id) DO UPDATE SET
            first_seen = min(first_seen, excluded.first_seen),
            last_seen = max(last_seen, excluded.last_seen),
            sightings = sightings + excluded.sightings,
            rssi_min = min(coalesce(rssi_min, excluded.rssi_min), coalesce(excluded.rssi_min, rssi_min)),
            rssi_max = max(coalesce(rssi_max, excluded.rssi_max), coalesce(excluded.rssi_max, rssi_max)),
            rssi_sum = rssi_sum + excluded.rssi_sum,
            rssi_count = rssi_count + excluded.rssi_count,
            tx_power = coalesce(excluded.tx_power, tx_power),
            reported_rssi = coalesce(excluded.reported_rssi, reported_rssi),
            learned_by = learned_by | excluded.learned_by,
            rssi_histogram = \(mergeHistograms.name)(rssi_histogram, excluded.rssi_histogram),
            -- The place where the window's contact began is kept; a later one fills in only a
            -- window that had none.
            place_id = coalesce(place_id, excluded.place_id)
        """

    /// The columns every full encounter read selects, in `Encounter.init(row:)`'s order.
    static let encounterColumns = """
        e.peer_id, e.own_window_start, e.first_seen, e.last_seen, e.sightings, e.rssi_min, e.rssi_max,
        e.rssi_sum, e.rssi_count, e.tx_power, e.reported_rssi, e.learned_by, e.rssi_histogram,
        p.name, p.latitude, p.longitude, p.precision_m
        FROM encounters e LEFT JOIN places p ON p.id = e.place_id
        """

    /// The SQL function the upsert merges two histogram blobs with (NULL, for none, is empty).
    /// Registered on every connection that writes (`NodeStore.open`).
    static let mergeHistograms = DatabaseFunction("tracer_merge_rssi_histograms", argumentCount: 2, pure: true) { values in
        let existing = Data.fromDatabaseValue(values[0]) ?? Data()
        let added = Data.fromDatabaseValue(values[1]) ?? Data()
        if existing.isEmpty || added.isEmpty {
            let only = existing.isEmpty ? added : existing
            return only.isEmpty ? nil : only
        }
        guard let merged = RSSIHistogram.mergeEncoded(existing, added) else {
            throw DatabaseError(message: "an rssi_histogram of \(existing.count) or \(added.count) bytes is not a valid histogram")
        }
        return merged
    }

    /// Writes a batch of aggregated sightings in one transaction: all of it or none of it.
    public func write(_ batch: SightingBatch) throws(StoreError) {
        guard !batch.isEmpty else { return }
        let encounters = Array(batch.pending.values)
        try write { db in
            var placeIDs: [Place: Int64] = [:]
            var insertedPlaceIDs: [Int64] = []
            let statement = try db.cachedStatement(sql: Self.upsertEncounter)
            for encounter in encounters {
                var placeID: Int64?
                if let place = encounter.place {
                    if let known = placeIDs[place] {
                        placeID = known
                    } else {
                        let (id, inserted) = try Self.placeID(of: place, in: db)
                        if inserted { insertedPlaceIDs.append(id) }
                        placeIDs[place] = id
                        placeID = id
                    }
                }
                statement.setUncheckedArguments([
                    encounter.peer.databaseValue, encounter.ownWindowStart, encounter.firstSeen,
                    encounter.lastSeen, encounter.sightings, encounter.rssiMin.map { Int($0) },
                    encounter.rssiMax.map { Int($0) }, encounter.rssiSum, encounter.rssiCount,
                    encounter.txPower.map { Int($0) }, encounter.reportedRSSI.map { Int($0) },
                    encounter.learnedBy.rawValue,
                    encounter.rssiHistogram.isEmpty ? nil : Data(encounter.rssiHistogram.encoded),
                    placeID,
                ])
                try statement.execute()
            }
            // A window keeps the place where its contact began, so a place first met by a window
            // already placed is referenced by nothing: kept, a moving node's new cells would pile
            // up as a track until the next purge.
            for id in insertedPlaceIDs {
                try db.execute(
                    sql: "DELETE FROM places WHERE id = ? AND NOT EXISTS (SELECT 1 FROM encounters WHERE place_id = ?)",
                    arguments: [id, id])
            }
        }
    }

    /// The id of a place's row, inserted when it is new (`inserted`).
    private static func placeID(of place: Place, in db: Database) throws -> (id: Int64, inserted: Bool) {
        let values: StatementArguments = [
            place.position?.latitude, place.position?.longitude, place.position?.precisionMeters, place.name,
        ]
        if let id = try Int64.fetchOne(
            db, sql: "SELECT id FROM places WHERE latitude IS ? AND longitude IS ? AND precision_m IS ? AND name IS ?",
            arguments: values) {
            return (id, false)
        }
        try db.execute(sql: "INSERT INTO places (latitude, longitude, precision_m, name) VALUES (?, ?, ?, ?)", arguments: values)
        return (db.lastInsertedRowID, true)
    }

    /// Encounters last seen at or after `since`, ordered by first sighting.
    public func encounters(since: UnixSeconds = .min) throws(StoreError) -> [Encounter] {
        try read { db in
            try Row.fetchAll(
                db,
                sql: """
                    SELECT \(Self.encounterColumns)
                    WHERE e.last_seen >= ? ORDER BY e.first_seen, e.peer_id
                    """,
                arguments: [since]
            ).map(Encounter.init(row:))
        }
    }

    public struct Counts: Sendable, Equatable {
        public var ownIDs: Int
        public var dailyKeys: Int
        public var encounters: Int
        public var distinctPeers: Int
    }

    public func counts() throws(StoreError) -> Counts {
        try read { db in
            Counts(
                ownIDs: try Int.fetchOne(db, sql: "SELECT count(*) FROM own_ids") ?? 0,
                dailyKeys: try Int.fetchOne(db, sql: "SELECT count(*) FROM daily_keys") ?? 0,
                encounters: try Int.fetchOne(db, sql: "SELECT count(*) FROM encounters") ?? 0,
                distinctPeers: try Int.fetchOne(db, sql: "SELECT count(DISTINCT peer_id) FROM encounters") ?? 0)
        }
    }
}

extension Encounter {
    init(row: Row) {
        let rssiMin: Int? = row[5]
        let rssiMax: Int? = row[6]
        let txPower: Int? = row[9]
        let reported: Int? = row[10]
        self.peer = UserID(databaseValue: row[0])
        self.ownWindowStart = row[1]
        self.firstSeen = row[2]
        self.lastSeen = row[3]
        self.sightings = row[4]
        self.rssiMin = rssiMin.flatMap { Int8(exactly: $0) }
        self.rssiMax = rssiMax.flatMap { Int8(exactly: $0) }
        self.rssiSum = row[7]
        self.rssiCount = row[8]
        self.txPower = txPower.flatMap { Int8(exactly: $0) }
        self.reportedRSSI = reported.flatMap { Int8(exactly: $0) }
        self.learnedBy = LearnedBy(rawValue: row[11])
        let histogram: Data? = row[12]
        self.rssiHistogram = histogram.flatMap { RSSIHistogram(encoded: $0) } ?? RSSIHistogram()
        let latitude: Double? = row[14], longitude: Double? = row[15], precision: Int? = row[16]
        var position: Place.Position?
        if let latitude, let longitude, let precision {
            position = Place.Position(latitude: latitude, longitude: longitude, precisionMeters: precision)
        }
        self.place = Place(name: row[13], position: position)
    }
}

/// When an encounter happened, and nothing else: what matching a positive list needs for each of
/// possibly hundreds of thousands of rows. The rest of a row is read only for the few that match.
public struct EncounterTimes: Sendable, Hashable {
    public var peer: UserID
    public var ownWindowStart: UnixSeconds
    public var firstSeen: UnixSeconds
    public var lastSeen: UnixSeconds

    public init(peer: UserID, ownWindowStart: UnixSeconds, firstSeen: UnixSeconds, lastSeen: UnixSeconds) {
        self.peer = peer
        self.ownWindowStart = ownWindowStart
        self.firstSeen = firstSeen
        self.lastSeen = lastSeen
    }

    public init(_ encounter: Encounter) {
        self.init(peer: encounter.peer, ownWindowStart: encounter.ownWindowStart, firstSeen: encounter.firstSeen, lastSeen: encounter.lastSeen)
    }
}

extension NodeStore {
    /// The times of every encounter last seen at or after `since`, in no particular order,
    /// read through a cursor so that no intermediate row objects pile up.
    public func encounterTimes(since: UnixSeconds = .min) throws(StoreError) -> [EncounterTimes] {
        try read { db in
            var times: [EncounterTimes] = []
            times.reserveCapacity(try Int.fetchOne(db, sql: "SELECT count(*) FROM encounters WHERE last_seen >= ?", arguments: [since]) ?? 0)
            let cursor = try Row.fetchCursor(
                db, sql: "SELECT peer_id, own_window_start, first_seen, last_seen FROM encounters WHERE last_seen >= ?",
                arguments: [since])
            while let row = try cursor.next() {
                times.append(EncounterTimes(
                    peer: UserID(databaseValue: row[0]), ownWindowStart: row[1], firstSeen: row[2], lastSeen: row[3]))
            }
            return times
        }
    }

    /// The whole rows of the given encounters (by their key); missing ones are left out.
    public func encounters(at keys: [EncounterTimes]) throws(StoreError) -> [Encounter] {
        try read { db in
            let statement = try db.cachedStatement(sql: """
                SELECT \(Self.encounterColumns)
                WHERE e.own_window_start = ? AND e.peer_id = ?
                """)
            return try keys.compactMap { key in
                try Row.fetchOne(statement, arguments: [key.ownWindowStart, key.peer.databaseValue]).map(Encounter.init(row:))
            }
        }
    }
}
