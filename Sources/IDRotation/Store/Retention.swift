import GRDB
import Logging
import TracerCore

/// How long the node keeps what it records.
public struct RetentionPolicy: Sendable, Equatable {
    public static let defaultDays = 28
    /// The promise made to users (``RetentionPromise``): nothing recorded is kept longer.
    public static let maximumDays = RetentionPromise.maximumDays

    public let encounterDays: Int
    public let ownIDDays: Int

    /// Own ids may be kept for less time than encounters, never longer: a kept own id with no
    /// encounter left to match it would serve no one.
    public init(encounterDays: Int = RetentionPolicy.defaultDays, ownIDDays: Int? = nil) throws(StoreError) {
        let ownIDDays = ownIDDays ?? encounterDays
        guard (1...Self.maximumDays).contains(encounterDays), ownIDDays >= 1, ownIDDays <= encounterDays else {
            throw .invalidRetention(encounterDays: encounterDays, ownIDDays: ownIDDays)
        }
        self.encounterDays = encounterDays
        self.ownIDDays = ownIDDays
    }

    private init(days: Int) {
        encounterDays = days
        ownIDDays = days
    }

    public static let standard = RetentionPolicy(days: defaultDays)

    public func encounterCutoff(now: UnixSeconds) -> UnixSeconds { now - Int64(encounterDays) * .secondsPerDay }
    public func ownIDCutoff(now: UnixSeconds) -> UnixSeconds { now - Int64(ownIDDays) * .secondsPerDay }
}

public struct PurgeResult: Sendable, Equatable {
    public var encountersDeleted: Int
    public var ownIDsDeleted: Int
    public var dailyKeysDeleted: Int
    public var placesDeleted: Int

    public init(encountersDeleted: Int, ownIDsDeleted: Int, dailyKeysDeleted: Int = 0, placesDeleted: Int = 0) {
        self.encountersDeleted = encountersDeleted
        self.ownIDsDeleted = ownIDsDeleted
        self.dailyKeysDeleted = dailyKeysDeleted
        self.placesDeleted = placesDeleted
    }
}

extension NodeStore {
    /// Deletes encounters last seen before the cutoff, own ids whose window ended before it, and
    /// daily keys whose day ended before it, in one transaction, then truncates the WAL so the
    /// deleted rows leave no copy behind. Freed pages are reused by later writes; no VACUUM is
    /// needed.
    @discardableResult
    public func purge(now: UnixSeconds, policy: RetentionPolicy = .standard) throws(StoreError) -> PurgeResult {
        let encounterCutoff = policy.encounterCutoff(now: now)
        let ownIDCutoff = policy.ownIDCutoff(now: now)
        let result = try write { db in
            // Sightings fall inside our window, so last_seen >= own_window_start and the first
            // condition only narrows the delete to a key range; the second decides. (After the
            // clock stepped back, a row goes once its window start passes the cutoff too.)
            try db.execute(
                sql: "DELETE FROM encounters WHERE own_window_start < ? AND last_seen < ?",
                arguments: [encounterCutoff, encounterCutoff])
            let encounters = db.changesCount
            // A place goes with the last encounter that was logged there.
            try db.execute(sql: "DELETE FROM places WHERE id NOT IN (SELECT place_id FROM encounters WHERE place_id IS NOT NULL)")
            let places = db.changesCount
            try db.execute(sql: "DELETE FROM own_ids WHERE valid_until < ?", arguments: [ownIDCutoff])
            let ownIDs = db.changesCount
            // A key can recompute every id of its day, so it goes no later than the last of them
            // would at a midnight boundary: when its day has ended before the own-id cutoff. An
            // id whose window began before midnight and ended after it outlives its key by less
            // than a window; it stays reportable as an id.
            try db.execute(
                sql: "DELETE FROM daily_keys WHERE (day + 1) * 86400 < ?",
                arguments: [ownIDCutoff])
            let dailyKeys = db.changesCount
            try db.execute(
                sql: "INSERT INTO node_state (key, value) VALUES ('last_purge', ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                arguments: [now])
            return PurgeResult(encountersDeleted: encounters, ownIDsDeleted: ownIDs, dailyKeysDeleted: dailyKeys, placesDeleted: places)
        }
        try checkpoint()
        return result
    }

    public func lastPurge() throws(StoreError) -> UnixSeconds? {
        try read { db in try Int64.fetchOne(db, sql: "SELECT value FROM node_state WHERE key = 'last_purge'") }
    }
}

extension NodeStore {
    /// Purges once now, then every `interval` until the task is cancelled. A failed purge is
    /// logged and tried again at the next tick; it never stops the node.
    public func purgePeriodically(
        policy: RetentionPolicy = .standard, every interval: Duration = .seconds(3600),
        clock: any WallClock = SystemWallClock(), logger: Logger = Logger(label: "tracer.retention")
    ) async {
        while !Task.isCancelled {
            do {
                let result = try purge(now: clock.now(), policy: policy)
                if result.encountersDeleted + result.ownIDsDeleted + result.dailyKeysDeleted + result.placesDeleted > 0 {
                    logger.info("purged expired data", metadata: [
                        "encounters": "\(result.encountersDeleted)", "ownIDs": "\(result.ownIDsDeleted)",
                        "dailyKeys": "\(result.dailyKeysDeleted)", "places": "\(result.placesDeleted)",
                    ])
                }
            } catch {
                logger.error("purge failed; will retry", metadata: ["error": "\(error)"])
            }
            try? await Task.sleep(for: interval)
        }
    }
}
