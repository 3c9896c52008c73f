import Foundation
import PositiveListFormat
import TracerCore

/// What the HTTP API, the command-line tools and the ``Publisher`` need from the server's
/// database. Two implementations: ``ServerStore`` (one SQLite file, the default: one server
/// process, with `append` and `publish` next to it) and ``PostgresServerStore`` (several
/// `serve` instances sharing one PostgreSQL database).
///
/// Every implementation keeps these promises, which the publisher's crash safety builds on:
/// - an upload (its ids, audit row, code use, idempotency key) commits whole or not at all, and
///   an upload code is used at most once however many instances see it at the same time;
/// - an accepted id is published in exactly one batch, and is not accepted again while it is
///   pending or in a live batch;
/// - ``recordBatch(_:publishing:)`` refuses (false) when another publisher recorded meanwhile,
///   and a batch number is never recorded twice;
/// - ``lockPublication()`` admits one publisher at a time.
///
/// What only one back end needs stays its own: the SQLite store's lock file and its in-memory
/// index of published ids (``ServerStore/publicationLockPath``,
/// ``ServerStore/loadPublishedIDs()``), and its watermark over pending submissions (carried
/// opaquely in ``PendingEntries`` as a ``PendingRead`` only that store resolves, moved past
/// expired ones inside ``expireBatches(endingBy:now:)``). `StoreContractTests` runs every promise stated here on
/// both back ends.
public protocol SubmissionStore: Sendable {
    // Uploads and codes (HTTP API, `append`, `issue-code`).
    func recordIssuedCode(_ code: UploadCode, authority: String, issuedAt: UnixSeconds, expiresAt: UnixSeconds) async throws(ServerStoreError)
    /// Unknown, valid until its expiry, expired from then on, already used once an upload took
    /// it, or revoked once staff revoked it in the console (both back ends keep the console's
    /// record of the code; `ConsoleStoreTests` tests that case on both).
    func status(of code: UploadCode, now: UnixSeconds) async throws(ServerStoreError) -> UploadCodeStatus
    /// Stores a validated history, whole or not at all. A repeated idempotency key (scoped per
    /// credential) answers `.replayed` with the first receipt, or `.idempotencyKeyReused` for
    /// another body; a code must be valid and is then used. An id pending or in a live batch,
    /// or repeated in the history, is not stored again: the receipt's `stored` counts new ids.
    func appendHistory(
        _ entries: [PositiveListEntry], credential: SubmissionCredential, idempotencyKey: IdempotencyKey?, now: UnixSeconds
    ) async throws(ServerStoreError) -> SubmissionOutcome
    /// As ``appendHistory(_:credential:idempotencyKey:now:)``, for daily keys.
    func appendKeyHistory(
        _ records: [DailyKeyRecord], credential: SubmissionCredential, idempotencyKey: IdempotencyKey?, now: UnixSeconds
    ) async throws(ServerStoreError) -> SubmissionOutcome
    func summary(now: UnixSeconds) async throws(ServerStoreError) -> StoreSummary
    /// The upload codes not used, open and expired at `now`: one short query, all the metrics
    /// listener asks the database at a scrape (``summary(now:)`` counts whole tables).
    /// `upload_codes` holds only codes within the retention period (``purge(endingBefore:now:)``).
    func uploadCodeCounts(now: UnixSeconds) async throws(ServerStoreError) -> UploadCodeCounts
    /// The connection pool's use (metrics); nil for a store without one (SQLite).
    var connectionPoolUsage: ConnectionPoolUsage? { get }

    // Publication.
    /// Waits for (SQLite) or takes at once (PostgreSQL: ``PublicationLockError/anotherInstancePublishing``
    /// when another instance holds it) the right to publish; the publisher releases it when done.
    func lockPublication() async throws(PublicationLockError) -> any PublicationLock
    /// The pending ids to publish, sorted by id: windows ending after `cutoff` (retention), and
    /// none valid after `dueBy` (the publication time less the clock-skew allowance); every one
    /// is handed over once `dueBy` passed its window. A store may hold back more than the ids
    /// still valid (SQLite holds every submission from the first with such an id), never fewer;
    /// `waitingIDs` counts those held and `nextDueBy` says when the first is due.
    func pendingEntries(endingAfter cutoff: UnixSeconds, dueBy: UnixSeconds) async throws(ServerStoreError) -> PendingEntries
    /// One more than the last batch number ever recorded, expired ones included.
    func nextBatchNumber() async throws(ServerStoreError) -> UInt64
    /// Records a batch, publishing exactly `pending`'s entries, and keeps
    /// those entries with it (``liveBatchContents(idBatchesAfter:keyBatchesAfter:)``). Refuses
    /// (false, nothing changed) when this number or a later one was recorded, or when another
    /// publisher recorded any of `pending`'s ids meanwhile.
    func recordBatch(_ batch: BatchRecord, publishing pending: PendingEntries) async throws(ServerStoreError) -> Bool
    /// Marks live batches whose windows all ended by `cutoff` as expired and returns their
    /// numbers; their ids are new again to later uploads. Pending ids whose windows ended by
    /// `cutoff` before they were published are forgotten (SQLite: whole submissions, oldest
    /// first, up to the first with an id still inside retention).
    func expireBatches(endingBy cutoff: UnixSeconds, now: UnixSeconds) async throws(ServerStoreError) -> [UInt64]
    func liveBatches() async throws(ServerStoreError) -> [BatchRecord]
    /// What the live id batches numbered after `idBatch` and the live key batches numbered after
    /// `keyBatch` published, as recorded with them: what the log appends, so that it needs no
    /// batch file. ``ServerStoreError/batchContentMissing(batch:)`` for a batch recorded without
    /// it (by an older tracer-server); never a batch's content from anywhere else.
    func liveBatchContents(idBatchesAfter idBatch: UInt64, keyBatchesAfter keyBatch: UInt64) async throws(ServerStoreError) -> LiveBatchContents
    /// The live batches of either kind recorded without their content (by a tracer-server from
    /// before SQLite schema v6 or PostgreSQL version 4) that no open could copy in from its file
    /// yet, as ``ServerStoreError/batchContentMissing(batch:)`` names them ("batch 3",
    /// "key batch 2"): while there is one, the retired files (`index.tpli`, `batches/`,
    /// `keys/`) are its only copy and are kept, here and in the bucket.
    func batchesWithoutContent() async throws(ServerStoreError) -> [String]
    /// Forgets upload codes expired or used by `cutoff`, and idempotency keys older than a week.
    func purge(endingBefore cutoff: UnixSeconds, now: UnixSeconds) async throws(ServerStoreError)

    // Key publication.
    /// Unpublished keys of days before `firstUndueDay`, by key (unrelated to uploads).
    func dueKeys(before firstUndueDay: UTCDay) async throws(ServerStoreError) -> [DailyKeyRecord]
    func pendingKeyCount() async throws(ServerStoreError) -> Int
    /// The days and intervals of the keys not yet published, each pair once: what tells the
    /// scheduler when the next one becomes due.
    func heldKeyDays() async throws(ServerStoreError) -> [HeldKeyDay]
    func nextKeyBatchNumber() async throws(ServerStoreError) -> UInt64
    /// Records a key batch, keeping what it published (`published`: the
    /// real keys and the fake ones), and marks its real keys (`keys`) published; refuses (false,
    /// nothing changed) when its number was taken or any key published meanwhile.
    func recordKeyBatch(_ batch: KeyBatchRecord, keys: [DailyKey], published: [DailyKeyRecord]) async throws(ServerStoreError) -> Bool
    /// Marks live key batches whose last day ended by `cutoff` as expired and forgets their
    /// keys, and the pending keys whose day left the retention period; returns the numbers.
    func expireKeyBatches(endingBy cutoff: UnixSeconds, now: UnixSeconds) async throws(ServerStoreError) -> [UInt64]
    func liveKeyBatches() async throws(ServerStoreError) -> [KeyBatchRecord]
}

/// Upload codes not used by an upload, among those the store keeps (the retention period).
public struct UploadCodeCounts: Sendable, Equatable {
    /// Not expired: a diagnosed person may still upload with them.
    public var open: Int
    /// Expired without an upload: issued to people who did not upload in time.
    public var expiredUnused: Int

    public init(open: Int, expiredUnused: Int) {
        self.open = open
        self.expiredUnused = expiredUnused
    }
}

/// A connection pool's connections, how many are idle, and the callers waiting for one.
public struct ConnectionPoolUsage: Sendable, Equatable {
    public var size: Int
    public var idle: Int
    public var waiting: Int

    package init(size: Int, idle: Int, waiting: Int) {
        self.size = size
        self.idle = idle
        self.waiting = waiting
    }
}

/// A day and interval some unpublished keys have (their due time depends on both).
public struct HeldKeyDay: Sendable, Hashable {
    public let day: UTCDay
    public let intervalSeconds: Int64

    package init(day: UTCDay, intervalSeconds: Int64) {
        self.day = day
        self.intervalSeconds = intervalSeconds
    }
}

/// The right to publish, held until ``release()``.
public protocol PublicationLock: Sendable {
    func release() async
}
