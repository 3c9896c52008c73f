import GRDB

/// The store's schema, as an ordered list of migrations. A migration, once released, never
/// changes: a new schema version is a new step appended to the list.
enum Schema {
    /// "TRCR": marks the file as a Tracer node database (`PRAGMA application_id`).
    static let applicationID: Int32 = 0x5452_4352

    static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1: own ids and aggregated encounters") { db in
            try db.execute(sql: "PRAGMA application_id = \(applicationID)")
            // Ids are stored as their 8 bytes read as a signed 64-bit integer: compact, and
            // cheaper to index and compare than blobs.
            try db.execute(sql: """
                CREATE TABLE own_ids (
                    id INTEGER NOT NULL PRIMARY KEY,
                    valid_from INTEGER NOT NULL,
                    valid_until INTEGER NOT NULL,
                    CHECK (valid_until > valid_from)
                ) WITHOUT ROWID;
                CREATE INDEX own_ids_by_valid_until ON own_ids(valid_until);

                -- One row per (our id window, peer id): sightings update it, they never add rows.
                -- The key leads with our window, which only grows, so new rows append to the end
                -- of the tree (pages stay full) and a purge deletes a contiguous range of it.
                CREATE TABLE encounters (
                    own_window_start INTEGER NOT NULL,
                    peer_id INTEGER NOT NULL,
                    first_seen INTEGER NOT NULL,
                    last_seen INTEGER NOT NULL,
                    sightings INTEGER NOT NULL CHECK (sightings > 0),
                    rssi_min INTEGER,
                    rssi_max INTEGER,
                    rssi_sum INTEGER NOT NULL DEFAULT 0,
                    rssi_count INTEGER NOT NULL DEFAULT 0,
                    tx_power INTEGER,
                    reported_rssi INTEGER,
                    learned_by INTEGER NOT NULL DEFAULT 0,
                    PRIMARY KEY (own_window_start, peer_id),
                    CHECK (last_seen >= first_seen)
                ) WITHOUT ROWID;

                CREATE TABLE node_state (
                    key TEXT NOT NULL PRIMARY KEY,
                    value
                ) WITHOUT ROWID;
                """)
        }
        migrator.registerMigration("v2: daily keys") { db in
            // The key each userId of a day derives from (IDDerivation), per rotation interval:
            // a node restarted with another interval draws another key rather than reuse one
            // whose published record names a different interval. Own ids recorded before this
            // step stay random; nothing derives them.
            try db.execute(sql: """
                CREATE TABLE daily_keys (
                    day INTEGER NOT NULL,
                    interval_seconds INTEGER NOT NULL CHECK (interval_seconds BETWEEN 5 AND 86400),
                    key BLOB NOT NULL CHECK (typeof(key) = 'blob' AND length(key) = 16),
                    PRIMARY KEY (day, interval_seconds)
                ) WITHOUT ROWID;
                """)
        }
        migrator.registerMigration("v3: RSSI histogram per encounter") { db in
            // Rows logged before this step keep their bounds, sum and count and get no
            // histogram (NULL): the risk model scores them by their strongest value.
            try db.execute(sql: "ALTER TABLE encounters ADD COLUMN rssi_histogram BLOB")
        }
        migrator.registerMigration("v4 (places): the place of each encounter") { db in
            // Only adds: rows logged before this step keep every value and have no place (NULL).
            // A place is stored once and referenced by its id, so an encounter row grows by a
            // byte or two; purge deletes places no encounter references any more. No foreign key:
            // SQLite would scan every encounter for each place a purge deletes.
            try db.execute(sql: """
                CREATE TABLE places (
                    id INTEGER NOT NULL PRIMARY KEY,
                    name TEXT,
                    latitude REAL,
                    longitude REAL,
                    precision_m INTEGER,
                    CHECK (name IS NOT NULL OR latitude IS NOT NULL),
                    CHECK ((latitude IS NULL) = (longitude IS NULL) AND (latitude IS NULL) = (precision_m IS NULL))
                );
                CREATE INDEX places_by_value ON places(latitude, longitude, precision_m, name);
                ALTER TABLE encounters ADD COLUMN place_id INTEGER;
                """)
        }
        return migrator
    }

    static var knownMigrations: [String] { migrator.migrations }
}
