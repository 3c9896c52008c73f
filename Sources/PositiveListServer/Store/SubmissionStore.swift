import Foundation
import IDRotation
import PositiveListFormat

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
/// ``ServerStore/loadPublishedIDs()``). `StoreContractTests` runs every promise stated here on
/// both back ends.
public protocol SubmissionStore: Sendable {
    // Uploads and codes (HTTP API, `append`, `issue-code`).
    func recordIssuedCode(_ code: UploadCode, authority: String, issuedAt: UnixSeconds, expiresAt: UnixSeconds) async throws(ServerStoreError)
    func status(of code: UploadCode, now: UnixSeconds) async throws(ServerStoreError) -> UploadCodeStatus
    func appendHistory(
        _ entries: [PositiveListEntry], credential: SubmissionCredential, idempotencyKey: IdempotencyKey?, now: UnixSeconds
    ) async throws(ServerStoreError) -> SubmissionOutcome
    func appendKeyHistory(
        _ records: [DailyKeyRecord], credential: SubmissionCredential, idempotencyKey: IdempotencyKey?, now: UnixSeconds
    ) async throws(ServerStoreError) -> SubmissionOutcome
    func summary(now: UnixSeconds) async throws(ServerStoreError) -> StoreSummary

    // Publication.
    /// Waits for (SQLite) or takes at once (PostgreSQL: ``PublishError/anotherInstancePublishing``
    /// when another instance holds it) the right to publish; the publisher releases it when done.
    func lockPublication() async throws(PublishError) -> any PublicationLock
    /// The pending ids to publish: windows ending after `cutoff` (retention), and none valid
    /// after `dueBy` (the publication time less the clock-skew allowance).
    func pendingEntries(endingAfter cutoff: UnixSeconds, dueBy: UnixSeconds) async throws(ServerStoreError) -> PendingEntries
    func nextBatchNumber() async throws(ServerStoreError) -> UInt64
    /// Records a batch whose file is written, publishing exactly `pending`'s entries.
    func recordBatch(_ batch: BatchRecord, publishing pending: PendingEntries) async throws(ServerStoreError) -> Bool
    func skipExpiredPending(through lastSubmission: Int64, quarantining damaged: [Int64]) async throws(ServerStoreError)
    func expireBatches(endingBy cutoff: UnixSeconds, now: UnixSeconds) async throws(ServerStoreError) -> [UInt64]
    func liveBatches() async throws(ServerStoreError) -> [BatchRecord]
    func claimIndexGeneration() async throws(ServerStoreError) -> UInt64
    func purge(endingBefore cutoff: UnixSeconds, now: UnixSeconds) async throws(ServerStoreError)

    // Key publication.
    func dueKeys(before firstUndueDay: UTCDay) async throws(ServerStoreError) -> [DailyKeyRecord]
    func pendingKeyCount() async throws(ServerStoreError) -> Int
    /// The days and intervals of the keys not yet published, each pair once: what tells the
    /// scheduler when the next one becomes due.
    func heldKeyDays() async throws(ServerStoreError) -> [HeldKeyDay]
    func nextKeyBatchNumber() async throws(ServerStoreError) -> UInt64
    func recordKeyBatch(_ batch: KeyBatchRecord, keys: [DailyKey]) async throws(ServerStoreError) -> Bool
    func expireKeyBatches(endingBy cutoff: UnixSeconds, now: UnixSeconds) async throws(ServerStoreError) -> [UInt64]
    func liveKeyBatches() async throws(ServerStoreError) -> [KeyBatchRecord]
    func claimKeyIndexGeneration() async throws(ServerStoreError) -> UInt64
}

/// A day and interval some unpublished keys have (their due time depends on both).
public struct HeldKeyDay: Sendable, Hashable {
    public let day: UTCDay
    public let intervalSeconds: Int64
}

/// The right to publish, held until ``release()``.
public protocol PublicationLock: Sendable {
    func release() async
}

extension ServerStore: SubmissionStore {
    public func recordBatch(_ batch: BatchRecord, publishing pending: PendingEntries) async throws(ServerStoreError) -> Bool {
        try await recordBatch(batch, expectedWatermark: pending.afterSubmission, quarantining: pending.damagedSubmissions)
    }

    /// The data directory's `publish.lock` (an flock), so that the schedule inside `serve` and a
    /// `tracer-server publish` run never interleave; waits for the other one to finish.
    public func lockPublication() async throws(PublishError) -> any PublicationLock {
        try FilePublicationLock.take(path: publicationLockPath)
    }
}

/// ``PublishLock`` as a ``PublicationLock``.
///
/// `@unchecked Sendable` is safe: the lock is only created, then released once by the publisher
/// that holds it; `PublishLock` has no mutable state (its descriptor is a constant).
final class FilePublicationLock: PublicationLock, @unchecked Sendable {
    private var lock: PublishLock?
    init(_ lock: PublishLock) { self.lock = lock }
    func release() async { lock = nil }

    /// Waits for the lock file at `path`.
    static func take(path: String) throws(PublishError) -> FilePublicationLock {
        do {
            return FilePublicationLock(try PublishLock(path: path))
        } catch {
            throw .file(error)
        }
    }
}
