import ServerStorage
/// The PostgreSQL store's schema as ordered, numbered migrations; a released step never changes.
/// `tracer_schema_migrations` records the steps applied. Two instances starting at once take
/// turns: migration runs under a transaction-level advisory lock.
enum PostgresSchema {
    /// Advisory lock keys ("TRPS" and a purpose), shared by every instance on the database.
    static let migrationLockKey: Int64 = 0x5452_5053_0000_0001
    static let publicationLockKey: Int64 = 0x5452_5053_0000_0002

    static let migrations: [(version: Int, name: String, sql: String)] = [
        (1, "submissions, upload codes, idempotency keys, ids, batches", """
            -- One row per accepted history: who sent it and how, for the authority's audit.
            CREATE TABLE submissions (
                number bigserial PRIMARY KEY,
                authority text NOT NULL,
                via_upload_code boolean NOT NULL,
                received_at bigint NOT NULL,
                id_count integer NOT NULL,
                new_id_count integer NOT NULL,
                kind text NOT NULL DEFAULT 'ids'
            );

            -- Codes are kept only as SHA-256 digests. An upload marks its code used with
            -- UPDATE ... WHERE used_at IS NULL, which a concurrent upload waits for and then
            -- finds no longer true: a code is used once, whichever instance sees it.
            CREATE TABLE upload_codes (
                digest bytea PRIMARY KEY,
                authority text NOT NULL,
                issued_at bigint NOT NULL,
                expires_at bigint NOT NULL,
                used_at bigint
            );

            CREATE TABLE idempotency_keys (
                scope text NOT NULL,
                key text NOT NULL,
                request_digest bytea NOT NULL,
                submission bigint NOT NULL REFERENCES submissions(number),
                created_at bigint NOT NULL,
                PRIMARY KEY (scope, key)
            );

            -- Every id accepted and not yet expired, keyed by its value (the UInt64's bit
            -- pattern as a bigint): an upload inserts with ON CONFLICT DO NOTHING, so "is this id
            -- new?" is decided by the primary key, atomically across instances. batch is NULL
            -- while the id waits for publication. A batch marks exactly the ids it publishes
            -- (rather than "everything up to a submission number", as the SQLite store does):
            -- submission numbers from a sequence commit out of order when several instances
            -- append, so a watermark could pass an upload not yet committed.
            CREATE TABLE submitted_ids (
                id bigint PRIMARY KEY,
                valid_from bigint NOT NULL,
                valid_until bigint NOT NULL,
                submission bigint NOT NULL,
                batch bigint,
                CHECK (valid_until > valid_from)
            );
            -- Publication reads the pending ids; expiry drops a batch's ids.
            CREATE INDEX submitted_ids_pending ON submitted_ids (id) WHERE batch IS NULL;
            CREATE INDEX submitted_ids_by_batch ON submitted_ids (batch) WHERE batch IS NOT NULL;

            -- Published batches. Expired ones keep their row so a batch number is never reused.
            CREATE TABLE batches (
                number bigint PRIMARY KEY,
                range_start bigint NOT NULL,
                range_end bigint NOT NULL,
                byte_count integer NOT NULL,
                sha256 bytea NOT NULL,
                id_count integer NOT NULL,
                last_submission bigint NOT NULL,
                published_at bigint NOT NULL,
                expired_at bigint
            );

            CREATE TABLE server_state (
                key text PRIMARY KEY,
                value bigint NOT NULL
            );
            """),
        (2, "daily keys and key batches", """
            -- Every accepted daily key until its batch expires, keyed by the key itself, with no
            -- column linking it to its submission or to the other keys of its upload (as in the
            -- SQLite store). batch is NULL while the key waits for its day to end plus the delay.
            CREATE TABLE submitted_keys (
                key bytea PRIMARY KEY CHECK (length(key) = 16),
                day bigint NOT NULL,
                interval bigint NOT NULL,
                batch bigint
            );
            CREATE INDEX submitted_keys_by_batch ON submitted_keys (batch, day);

            -- Published key batches, numbered apart from id batches; expired ones keep their row.
            CREATE TABLE key_batches (
                number bigint PRIMARY KEY,
                range_start bigint NOT NULL,
                range_end bigint NOT NULL,
                byte_count integer NOT NULL,
                sha256 bytea NOT NULL,
                key_count integer NOT NULL,
                fake_key_count integer NOT NULL,
                published_at bigint NOT NULL,
                expired_at bigint
            );
            """),
    ] + [consoleMigration] + [
        (4, "what each batch published", """
            -- What each batch published (the log appends it), so that the published files are
            -- output only: id entries as PendingEntriesBlob, key records as PublishedKeysBlob.
            -- NULL in a row recorded before this step: the store fills it from the batch's file
            -- when it opens the database (RecordedBatchFile); an expired batch needs none.
            ALTER TABLE batches ADD COLUMN entries bytea;
            ALTER TABLE key_batches ADD COLUMN records bytea;
            """),
    ]

    static var latestVersion: Int { migrations.map(\.version).max() ?? 0 }
}
