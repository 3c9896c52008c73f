import GRDB
import PositiveListFormat
import ServerStorage
import TracerCore

/// The server database's schema as ordered migrations; a released step never changes.
enum ServerSchema {
    /// "TRPS": marks the file as a Tracer positive list server database.
    static let applicationID: Int32 = 0x5452_5053

    static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1: submissions, upload codes, batches") { db in
            try db.execute(sql: "PRAGMA application_id = \(applicationID)")
            try db.execute(sql: """
                -- One row per accepted history: who sent it and how, for the authority's audit.
                CREATE TABLE submissions (
                    number INTEGER PRIMARY KEY AUTOINCREMENT,
                    authority TEXT NOT NULL,
                    via_upload_code INTEGER NOT NULL,
                    received_at INTEGER NOT NULL,
                    id_count INTEGER NOT NULL,
                    new_id_count INTEGER NOT NULL
                );

                -- Each id once, keyed by its own value: the id is the rowid, so the table is a
                -- single B-tree and a duplicate costs one lookup. Submission numbers only grow
                -- (AUTOINCREMENT never reuses one), so "rows of submissions after the last
                -- batch's" is exactly what the next batch publishes, with no published flag to
                -- update.
                CREATE TABLE submitted_ids (
                    id INTEGER NOT NULL PRIMARY KEY,
                    valid_from INTEGER NOT NULL,
                    valid_until INTEGER NOT NULL,
                    submission INTEGER NOT NULL REFERENCES submissions(number),
                    CHECK (valid_until > valid_from)
                );
                -- Covering, so that reading what the next batch publishes is one sequential
                -- scan of the newest index entries, not a random lookup per id.
                CREATE INDEX submitted_ids_by_submission ON submitted_ids(submission, id, valid_from, valid_until);

                -- Codes are kept only as SHA-256 digests.
                CREATE TABLE upload_codes (
                    digest BLOB NOT NULL PRIMARY KEY,
                    authority TEXT NOT NULL,
                    issued_at INTEGER NOT NULL,
                    expires_at INTEGER NOT NULL,
                    used_at INTEGER
                ) WITHOUT ROWID;

                -- A repeated request with the same Idempotency-Key (per credential) answers
                -- with the submission it created the first time.
                CREATE TABLE idempotency_keys (
                    scope TEXT NOT NULL,
                    key TEXT NOT NULL,
                    request_digest BLOB NOT NULL,
                    submission INTEGER NOT NULL REFERENCES submissions(number),
                    created_at INTEGER NOT NULL,
                    PRIMARY KEY (scope, key)
                ) WITHOUT ROWID;

                -- Published batches. Expired ones keep their row (expired_at set) so a batch
                -- number is never used twice.
                CREATE TABLE batches (
                    number INTEGER PRIMARY KEY,
                    range_start INTEGER NOT NULL,
                    range_end INTEGER NOT NULL,
                    byte_count INTEGER NOT NULL,
                    sha256 BLOB NOT NULL,
                    id_count INTEGER NOT NULL,
                    last_submission INTEGER NOT NULL,
                    published_at INTEGER NOT NULL,
                    expired_at INTEGER
                );

                CREATE TABLE server_state (
                    key TEXT NOT NULL PRIMARY KEY,
                    value
                ) WITHOUT ROWID;
                """)
        }
        migrator.registerMigration("v2: pending ids in arrival order, published ids keyed by value") { db in
            try db.execute(sql: """
                -- Ids accepted since the last batch, in arrival order: rows go in rowid order,
                -- so every insert appends to the end of the table's B-tree and an upload writes a
                -- few new pages, whatever the size of the store. (A (submission, id) primary key
                -- appends too, but its uniqueness check costs a second search per row.) The
                -- watermark of the batches (see ServerStore.watermark) splits the table: rows at
                -- or below it are published and wait to be merged into published_ids. There is
                -- no index on id: keeping one up to date cost a random page write per id, the
                -- cost this table exists to avoid; "is this id pending?" is answered from memory
                -- (PendingIDCache). Nor on submission: the table holds about one publication
                -- interval of uploads, which publication reads whole anyway. No foreign key
                -- either: checking it would cost a lookup per id, and the submission row is
                -- written by the same transaction.
                CREATE TABLE pending_ids (
                    submission INTEGER NOT NULL,
                    id INTEGER NOT NULL,
                    valid_from INTEGER NOT NULL,
                    valid_until INTEGER NOT NULL,
                    CHECK (valid_until > valid_from)
                );

                -- Each published id once, keyed by its own value (the rowid), so "was this id
                -- accepted before?" is one lookup. Filled at publication, sorted, in one pass.
                -- It keeps only what retention needs: an id's window is in its batch file, and
                -- which upload it came from is forgotten once it is published.
                CREATE TABLE published_ids (
                    id INTEGER NOT NULL PRIMARY KEY,
                    valid_until INTEGER NOT NULL
                );

                -- The v1 table held both: rows after the watermark were the unpublished ones.
                CREATE TEMPORARY TABLE v1_watermark AS SELECT max(
                    coalesce((SELECT max(last_submission) FROM batches), 0),
                    coalesce((SELECT value FROM server_state WHERE key = 'skipped_through'), 0)) AS submission;
                INSERT INTO pending_ids (submission, id, valid_from, valid_until)
                    SELECT submission, id, valid_from, valid_until FROM submitted_ids
                    WHERE submission > (SELECT submission FROM v1_watermark) ORDER BY submission, id;
                INSERT INTO published_ids (id, valid_until)
                    SELECT id, valid_until FROM submitted_ids
                    WHERE submission <= (SELECT submission FROM v1_watermark) ORDER BY id;
                DROP TABLE v1_watermark;
                DROP TABLE submitted_ids;
                """)
        }
        migrator.registerMigration("v3: pending ids one blob per submission, published ids from the batch files") { db in
            try db.execute(sql: """
                -- One row per upload holding its new entries (see PendingEntriesBlob): an upload
                -- is one insert at the end of the table whatever its size. Rows leave in the
                -- transaction that records the batch publishing them.
                CREATE TABLE pending_histories (
                    submission INTEGER PRIMARY KEY,
                    id_count INTEGER NOT NULL,
                    entries BLOB NOT NULL
                );

                -- Pending rows found damaged at publication (a blob that does not decode): not
                -- published, kept here for the operator instead of stopping every publication.
                CREATE TABLE damaged_pending_histories (
                    submission INTEGER PRIMARY KEY,
                    id_count INTEGER NOT NULL,
                    entries BLOB NOT NULL
                );
                """)
            // v2's pending rows above the watermark become blobs; those at or below it are in
            // published batches already.
            let watermark = try ServerStore.watermark(db)
            let rows = try Row.fetchCursor(
                db, sql: "SELECT submission, id, valid_from, valid_until FROM pending_ids WHERE submission > ? ORDER BY submission, id",
                arguments: [watermark])
            var submission: Int64?
            var entries: [PositiveListEntry] = []
            func flush() throws {
                guard let submission, !entries.isEmpty else { return }
                // By the id's unsigned value, as uploads store them (SQLite ordered them signed).
                entries.sort { $0.id < $1.id }
                try db.execute(
                    sql: "INSERT INTO pending_histories (submission, id_count, entries) VALUES (?, ?, ?)",
                    arguments: [submission, entries.count, PendingEntriesBlob.encode(entries)])
                entries.removeAll()
            }
            while let row = try rows.next() {
                let rowSubmission: Int64 = row[0]
                if rowSubmission != submission {
                    try flush()
                    submission = rowSubmission
                }
                entries.append(PositiveListEntry(id: UserID(databaseValue: row[1]), validFrom: row[2], validUntil: row[3]))
            }
            try flush()
            // Published ids are read from the live batch files now (PublishedIDCache).
            try db.execute(sql: "DROP TABLE pending_ids; DROP TABLE published_ids")
        }
        migrator.registerMigration("v4: daily keys and key batches") { db in
            try db.execute(sql: """
                -- What a submission carried: 'ids' or 'keys' (its id_count and new_id_count then
                -- count keys), for the authority's audit.
                ALTER TABLE submissions ADD COLUMN kind TEXT NOT NULL DEFAULT 'ids';

                -- Every accepted daily key until its batch expires, keyed by the key itself: the
                -- table is stored in key order, which for random keys is a random order, and has
                -- no column linking a key to its submission or to the other keys of its upload.
                -- batch is NULL while the key waits for its day to end plus the publication delay.
                CREATE TABLE submitted_keys (
                    key BLOB NOT NULL PRIMARY KEY CHECK (length(key) = 16),
                    day INTEGER NOT NULL,
                    interval INTEGER NOT NULL,
                    batch INTEGER
                ) WITHOUT ROWID;
                -- Publication reads the pending keys that are due; expiry drops a batch's keys.
                CREATE INDEX submitted_keys_by_batch ON submitted_keys(batch, day);

                -- Published key batches, numbered apart from id batches; like batches, expired
                -- ones keep their row so that a number is never used twice.
                CREATE TABLE key_batches (
                    number INTEGER PRIMARY KEY,
                    range_start INTEGER NOT NULL,
                    range_end INTEGER NOT NULL,
                    byte_count INTEGER NOT NULL,
                    sha256 BLOB NOT NULL,
                    key_count INTEGER NOT NULL,
                    fake_key_count INTEGER NOT NULL,
                    published_at INTEGER NOT NULL,
                    expired_at INTEGER
                );
                """)
        }
        registerConsoleMigration(&migrator)
        migrator.registerMigration("v6: what each batch published, in the database") { db in
            try db.execute(sql: """
                -- What each batch published (the log appends it, uploads are checked against the
                -- ids), so that the published files are output only: id entries as
                -- PendingEntriesBlob, key records as PublishedKeysBlob. NULL in a row recorded
                -- before this step: the store fills it from the batch's file when it opens the
                -- database (RecordedBatchFile); an expired batch needs none.
                ALTER TABLE batches ADD COLUMN entries BLOB;
                ALTER TABLE key_batches ADD COLUMN records BLOB;
                """)
        }
        return migrator
    }
}
