import Foundation
import GRDB
import TracerCore

extension NodeStore {
    public func dailyKey(for day: UTCDay, intervalSeconds: Int64, recordingIfAbsent newKey: DailyKey) throws -> DailyKey {
        try write { db in
            // Insert-or-keep then read, in one transaction: whoever recorded the day's key first
            // wins, and every caller gets that key.
            try db.execute(
                sql: "INSERT INTO daily_keys (day, interval_seconds, key) VALUES (?, ?, ?) ON CONFLICT DO NOTHING",
                arguments: [day.number, intervalSeconds, Data(newKey.bytes)])
            let stored = try Data.fetchOne(
                db, sql: "SELECT key FROM daily_keys WHERE day = ? AND interval_seconds = ?",
                arguments: [day.number, intervalSeconds])
            return try DailyKey(bytes: stored ?? Data())
        }
    }

    /// Every daily key still kept, oldest day first.
    public func dailyKeys() throws(StoreError) -> [DailyKeyRecord] {
        try read { db in
            try Row.fetchAll(db, sql: "SELECT day, interval_seconds, key FROM daily_keys ORDER BY day, interval_seconds")
                .map { row in
                    let key: Data = row[2]
                    return DailyKeyRecord(day: UTCDay(number: row[0]), intervalSeconds: row[1], key: try DailyKey(bytes: key))
                }
        }
    }
}
