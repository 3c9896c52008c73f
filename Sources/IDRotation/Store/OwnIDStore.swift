import GRDB
import TracerCore

extension NodeStore: OwnIDHistory {
    public func latestOwnID() throws -> OwnID? {
        try read { db in
            try Row.fetchOne(
                db, sql: "SELECT id, valid_from, valid_until FROM own_ids ORDER BY valid_until DESC LIMIT 1"
            ).map(OwnID.init(row:))
        }
    }

    public func recordOwnID(_ ownID: OwnID) throws {
        try write { db in
            try db.execute(
                sql: "INSERT INTO own_ids (id, valid_from, valid_until) VALUES (?, ?, ?)",
                arguments: [ownID.id.databaseValue, ownID.window.start, ownID.window.end])
        }
    }

    /// Every id this node has used that is still kept, oldest first.
    public func ownIDs() throws(StoreError) -> [OwnID] {
        try read { db in
            try Row.fetchAll(db, sql: "SELECT id, valid_from, valid_until FROM own_ids ORDER BY valid_from")
                .map(OwnID.init(row:))
        }
    }
}

extension OwnID {
    init(row: Row) {
        let start: UnixSeconds = row[1]
        let end: UnixSeconds = row[2]
        // The schema's CHECK keeps windows non-empty; a hand-edited file must still not trap.
        self.init(id: UserID(databaseValue: row[0]), window: IDWindow(start: start, end: max(end, start + 1)))
    }
}
