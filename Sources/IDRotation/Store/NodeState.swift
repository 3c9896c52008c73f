import GRDB

/// Small named values that other modules keep beside the encounters (the last exposure check,
/// which exposures were already notified, reports made), in the same file so that `tracer forget`
/// and backups treat them with the rest of the node's data.
extension NodeStore {
    public func stateValue(forKey key: String) throws(StoreError) -> String? {
        try read { db in try String.fetchOne(db, sql: "SELECT value FROM node_state WHERE key = ?", arguments: [key]) }
    }

    public func setStateValue(_ value: String?, forKey key: String) throws(StoreError) {
        try write { db in
            if let value {
                try db.execute(
                    sql: "INSERT INTO node_state (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                    arguments: [key, value])
            } else {
                try db.execute(sql: "DELETE FROM node_state WHERE key = ?", arguments: [key])
            }
        }
    }
}
