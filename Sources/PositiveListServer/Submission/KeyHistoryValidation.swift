import TracerCore

/// Why a key history was refused. Positions are 0-based indexes into `keys`; keys are never
/// echoed: each is as private as all of a day's ids.
public enum KeyHistoryRejection: Error, Sendable, Equatable {
    case empty
    case tooManyKeys(count: Int, limit: Int)
    case invalidKey(position: Int)
    case invalidInterval(position: Int, allowed: [Int64])
    case dayTooOld(position: Int, retentionDays: Int)
    case dayInFuture(position: Int)
    case duplicateDay(position: Int, first: Int)

    public var code: String {
        switch self {
        case .empty: return "empty_history"
        case .tooManyKeys: return "too_many_keys"
        case .invalidKey: return "invalid_key"
        case .invalidInterval: return "invalid_interval"
        case .dayTooOld: return "day_too_old"
        case .dayInFuture: return "day_in_future"
        case .duplicateDay: return "duplicate_day"
        }
    }

    public var detail: String {
        switch self {
        case .empty:
            return "The history lists no keys; send at least one."
        case .tooManyKeys(let count, let limit):
            return "The history lists \(count) keys; at most \(limit) are accepted in one history."
        case .invalidKey(let position):
            return "keys[\(position)].key is not a 16-byte key written as 32 hexadecimal characters."
        case .invalidInterval(let position, let allowed):
            return "keys[\(position)].intervalSeconds is not a rotation interval this server accepts (\(allowed.map(String.init).joined(separator: ", ")) seconds); set the node's rotation_interval to one of them."
        case .dayTooOld(let position, let days):
            return "keys[\(position)].day ended more than \(days) days ago; only keys from the retention period are accepted."
        case .dayInFuture(let position):
            return "keys[\(position)].day has not begun yet; check the device's clock."
        case .duplicateDay(let position, let first):
            return "keys[\(position)] has the same day and intervalSeconds as keys[\(first)]; a device has one key per day and interval."
        }
    }
}

/// The rules a key history must pass before anything is stored: the id rules' counterparts
/// (retention, clock skew, size), plus one key per (day, interval).
public struct KeyHistoryRules: Sendable {
    public let maxKeys: Int
    public let retentionSeconds: Int64
    public let retentionDays: Int
    public let clockSkewSeconds: Int64
    /// The rotation intervals keys are accepted for: those the deployment's nodes use. Every
    /// key makes every node derive a day's ids (86,400 / interval), so an interval of a few
    /// seconds would let one upload of 64 keys cost every node's check millions of ids.
    public let allowedIntervals: [Int64]

    /// The node's default rotation interval (node.rotation_interval): 96 ids per key.
    public static let defaultIntervals: [Int64] = [900]

    public init(maxKeys: Int, retentionDays: Int, clockSkewSeconds: Int64, allowedIntervals: [Int64] = defaultIntervals) {
        self.allowedIntervals = allowedIntervals.sorted()
        self.maxKeys = maxKeys
        self.retentionSeconds = Int64(retentionDays) * UnixSeconds.secondsPerDay
        self.retentionDays = retentionDays
        self.clockSkewSeconds = clockSkewSeconds
    }

    /// The keys as the store keeps them, in upload order, or the first problem found.
    public func validate(_ history: SubmittedKeyHistory, now: UnixSeconds) throws(KeyHistoryRejection) -> [DailyKeyRecord] {
        guard !history.keys.isEmpty else { throw .empty }
        guard history.keys.count <= maxKeys else { throw .tooManyKeys(count: history.keys.count, limit: maxKeys) }
        var records: [DailyKeyRecord] = []
        records.reserveCapacity(history.keys.count)
        var seen: [DayAndInterval: Int] = [:]
        for (position, submitted) in history.keys.enumerated() {
            guard let key = try? DailyKey(hex: submitted.key) else { throw .invalidKey(position: position) }
            guard allowedIntervals.contains(submitted.intervalSeconds),
                  let derivation = try? IDDerivation(intervalSeconds: submitted.intervalSeconds)
            else {
                throw .invalidInterval(position: position, allowed: allowedIntervals)
            }
            // Days are checked before building a UTCDay so that no product can overflow.
            guard submitted.day >= 0 else { throw .dayTooOld(position: position, retentionDays: retentionDays) }
            guard submitted.day < Int64(UInt32.max) else { throw .dayInFuture(position: position) }
            let day = UTCDay(number: submitted.day)
            guard day.end > now - retentionSeconds else { throw .dayTooOld(position: position, retentionDays: retentionDays) }
            guard day.start <= now + clockSkewSeconds, !derivation.windowIndices(of: day).isEmpty else {
                throw .dayInFuture(position: position)
            }
            if let first = seen.updateValue(position, forKey: DayAndInterval(day: submitted.day, interval: submitted.intervalSeconds)) {
                throw .duplicateDay(position: position, first: first)
            }
            records.append(DailyKeyRecord(day: day, intervalSeconds: submitted.intervalSeconds, key: key))
        }
        return records
    }

    private struct DayAndInterval: Hashable {
        let day: Int64
        let interval: Int64
    }
}
