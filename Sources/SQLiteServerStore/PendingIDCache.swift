import GRDB
import ServerStorage

/// The ids of `pending_histories`, held in memory so that an upload can ask "is this id already
/// pending?" although the table keeps each upload's ids as one blob.
///
/// An index on a table of pending ids is what made appending slow before: random ids dirty one
/// of its pages per id, and with half a million pending ids keeping it up to date cost about
/// ten times as much as appending the rows themselves. The set costs about 40 bytes per pending
/// id, and pending ids are at most the uploads of one publication interval (an hour by
/// default).
///
/// The database stays the truth (see ``DatabaseMirror``): the set is reloaded whole when another
/// process committed or this one recorded a batch; this connection's own appends are added only
/// once their transaction committed, so a rolled-back upload leaves no trace.
enum PendingIDCache {
    static func make() -> DatabaseMirror<Set<UInt64>> {
        DatabaseMirror([]) { ids, db in
            ids = []
            let rows = try Row.fetchCursor(db, sql: "SELECT id_count, entries FROM pending_histories")
            while let row = try rows.next() {
                // A damaged blob will not be published (see ServerStore.pendingEntries), so its
                // ids are not pending: sent again, they count as new.
                for entry in PendingEntriesBlob.decode(row[1], idCount: row[0]) ?? [] { ids.insert(entry.id.rawValue) }
            }
        }
    }
}
