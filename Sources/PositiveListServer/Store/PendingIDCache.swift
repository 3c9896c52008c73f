import GRDB
import Synchronization

/// The ids of `pending_histories`, held in memory so that an upload can ask "is this id already
/// pending?" although the table keeps each upload's ids as one blob.
///
/// An index on a table of pending ids is what made appending slow before: random ids dirty one
/// of its pages per id, and with half a million pending ids keeping it up to date cost about
/// ten times as much as appending the rows themselves. The set costs about 40 bytes per pending
/// id, and pending ids are at most the uploads of one publication interval (an hour by
/// default).
///
/// The database stays the truth and the set only a copy of one table, checked inside every
/// write transaction that uses it:
/// - another connection (a `tracer-server append` or `publish` process next to the server) may
///   have changed `pending_histories`: `PRAGMA data_version` changes exactly when another connection
///   committed, so the set is reloaded then;
/// - this connection's own appends are added only once their transaction committed, so a
///   rolled-back upload leaves no trace;
/// - anything else this connection does to `pending_histories` (recording a batch) calls
///   ``invalidate()``, and the next upload reloads.
final class PendingIDCache: Sendable {
    private struct Snapshot {
        var ids: Set<UInt64> = []
        /// `PRAGMA data_version` when `ids` was last known to match the table; nil when it
        /// must be reloaded.
        var dataVersion: Int64?
    }

    private let snapshot = Mutex(Snapshot())

    /// Runs `body` with the pending ids as of the current write transaction.
    ///
    /// Call only inside a write transaction (BEGIN IMMEDIATE), so that no other connection can
    /// commit between the check and the use.
    func withCurrentIDs<T>(_ db: Database, _ body: (Set<UInt64>) throws -> T) throws -> T {
        let dataVersion = try Int64.fetchOne(db, sql: "PRAGMA data_version")
        let isCurrent = snapshot.withLock { $0.dataVersion != nil && $0.dataVersion == dataVersion }
        if !isCurrent {
            var ids = Set<UInt64>()
            let rows = try Row.fetchCursor(db, sql: "SELECT id_count, entries FROM pending_histories")
            while let row = try rows.next() {
                // A damaged blob will not be published (see ServerStore.pendingEntries), so its
                // ids are not pending: sent again, they count as new.
                for entry in PendingEntriesBlob.decode(row[1], idCount: row[0]) ?? [] { ids.insert(entry.id.rawValue) }
            }
            snapshot.withLock { $0 = Snapshot(ids: ids, dataVersion: dataVersion) }
        }
        return try snapshot.withLock { try body($0.ids) }
    }

    /// Records ids this connection appended to `pending_histories`, after their transaction
    /// committed.
    func recordCommitted(_ ids: [UInt64]) {
        snapshot.withLock { $0.ids.formUnion(ids) }
    }

    /// Forgets the set; the next use reloads it from the table.
    func invalidate() {
        snapshot.withLock { $0 = Snapshot() }
    }
}
