import Foundation
import GRDB
import ServerStorage

/// The ids of the live batches (``PublishedIDIndex``), kept as true as the database that lists
/// those batches (see ``DatabaseMirror``: brought up to date when another process committed or
/// this one recorded or expired a batch).
///
/// The `batches` table says which batches are live and what each published (its `entries`).
/// Bringing the index up to date reads only what changed: the entries of batches it does not
/// hold yet, and drops the batches no longer live.
enum PublishedIDCache {
    static func make() -> DatabaseMirror<PublishedIDIndex> {
        DatabaseMirror(PublishedIDIndex()) { index, db in
            try bringUpToDate(&index, db: db)
        }
    }

    private static func bringUpToDate(_ index: inout PublishedIDIndex, db: Database) throws {
        var live: Set<UInt64> = []
        var added: [(number: UInt64, ids: [UInt64])] = []
        // SQLite reads a row's blob only when the column is read: a batch held already costs
        // its number alone.
        let rows = try Row.fetchCursor(db, sql: "SELECT number, id_count, entries FROM batches WHERE expired_at IS NULL")
        while let row = try rows.next() {
            let number = UInt64(row[0] as Int64)
            live.insert(number)
            guard !index.batches.contains(number) else { continue }
            added.append((number, try PublishedIDBatch(number: number, idCount: row[1], content: row[2]).entries.map(\.id.rawValue)))
        }
        index.remove(batches: index.batches.subtracting(live))
        index.insert(added)
    }
}
