import Foundation
import PositiveListFormat
import ServerStorage
import TracerCore

extension ServerStore: SubmissionStore {
    public var connectionPoolUsage: ConnectionPoolUsage? { nil }

    public func recordBatch(_ batch: BatchRecord, publishing pending: PendingEntries) async throws(ServerStoreError) -> Bool {
        guard let read = pending.read, read.reader == pendingReader else { throw .pendingEntriesReadElsewhere }
        return try await recordBatch(batch, entries: pending.entries, expectedWatermark: read.mark, quarantining: pending.damagedSubmissions)
    }

    /// The data directory's `publish.lock` (an flock), so that the schedule inside `serve` and a
    /// `tracer-server publish` run never interleave; waits for the other one to finish.
    public func lockPublication() async throws(PublicationLockError) -> any PublicationLock {
        try FilePublicationLock.take(path: publicationLockPath)
    }

    /// The lock ``lockPublication()`` takes, by its file alone: for work that publishes next to a
    /// SQLite store without opening it (a bucket sync run without a store, ObjectStoreSync).
    public static func lockPublication(path: String) throws(PublicationLockError) -> any PublicationLock {
        try FilePublicationLock.take(path: path)
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
    static func take(path: String) throws(PublicationLockError) -> FilePublicationLock {
        do {
            return FilePublicationLock(try PublishLock(path: path))
        } catch {
            throw .file(error)
        }
    }
}
