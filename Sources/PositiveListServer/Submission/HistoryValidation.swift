import PositiveListFormat
import TracerCore

/// One entry of an uploaded history as JSON carries it.
public struct SubmittedEntry: Codable, Sendable, Equatable {
    public var id: String
    public var validFrom: Int64
    public var validUntil: Int64

    public init(id: String, validFrom: Int64, validUntil: Int64) {
        self.id = id
        self.validFrom = validFrom
        self.validUntil = validUntil
    }
}

/// The body of `POST /v1/histories` (and of the file `tracer-server append` reads).
public struct SubmittedHistory: Codable, Sendable, Equatable {
    public var ids: [SubmittedEntry]

    public init(ids: [SubmittedEntry]) {
        self.ids = ids
    }
}

/// Why a history was refused. Positions are 0-based indexes into `ids`; ids themselves are
/// never echoed, since they are personal data.
public enum HistoryRejection: Error, Sendable, Equatable {
    case empty
    case tooManyIDs(count: Int, limit: Int)
    case invalidID(position: Int)
    case malformedWindow(position: Int)
    case windowTooLong(position: Int, limitSeconds: Int64)
    case tooOld(position: Int, retentionDays: Int)
    case inFuture(position: Int)

    public var code: String {
        switch self {
        case .empty: return "empty_history"
        case .tooManyIDs: return "too_many_ids"
        case .invalidID: return "invalid_id"
        case .malformedWindow: return "invalid_window"
        case .windowTooLong: return "window_too_long"
        case .tooOld: return "window_too_old"
        case .inFuture: return "window_in_future"
        }
    }

    public var detail: String {
        switch self {
        case .empty:
            return "The history lists no ids; send at least one."
        case .tooManyIDs(let count, let limit):
            return "The history lists \(count) ids; at most \(limit) are accepted in one history."
        case .invalidID(let position):
            return "ids[\(position)].id is not an 8-byte id written as 16 hexadecimal characters."
        case .malformedWindow(let position):
            return "ids[\(position)] has validUntil not after validFrom, or a negative time."
        case .windowTooLong(let position, let limit):
            return "ids[\(position)] is valid for longer than \(limit) seconds, which no rotation produces."
        case .tooOld(let position, let days):
            return "ids[\(position)] ended more than \(days) days ago; only ids from the retention period are accepted."
        case .inFuture(let position):
            return "ids[\(position)] starts in the future; check the device's clock."
        }
    }
}

/// The rules a history must pass before anything is stored.
public struct HistoryRules: Sendable {
    public let maxIDs: Int
    public let retentionSeconds: Int64
    public let retentionDays: Int
    public let clockSkewSeconds: Int64
    public let maxWindowSeconds: Int64

    public init(maxIDs: Int, retentionDays: Int, clockSkewSeconds: Int64, maxWindowSeconds: Int64) {
        self.maxIDs = maxIDs
        self.retentionSeconds = Int64(retentionDays) * UnixSeconds.secondsPerDay
        self.retentionDays = retentionDays
        self.clockSkewSeconds = clockSkewSeconds
        self.maxWindowSeconds = maxWindowSeconds
    }

    /// The entries as the store keeps them, or the first problem found.
    public func validate(_ history: SubmittedHistory, now: UnixSeconds) throws(HistoryRejection) -> [PositiveListEntry] {
        guard !history.ids.isEmpty else { throw .empty }
        guard history.ids.count <= maxIDs else { throw .tooManyIDs(count: history.ids.count, limit: maxIDs) }
        let oldestAllowedEnd = now - retentionSeconds
        let latestAllowedStart = now + clockSkewSeconds
        var entries: [PositiveListEntry] = []
        entries.reserveCapacity(history.ids.count)
        for (position, submitted) in history.ids.enumerated() {
            guard let id = try? UserID(hex: submitted.id) else { throw .invalidID(position: position) }
            // The published format stores times as unsigned 32-bit seconds.
            guard submitted.validFrom >= 0, submitted.validUntil > submitted.validFrom,
                  submitted.validUntil <= Int64(UInt32.max)
            else { throw .malformedWindow(position: position) }
            guard submitted.validUntil - submitted.validFrom <= maxWindowSeconds else {
                throw .windowTooLong(position: position, limitSeconds: maxWindowSeconds)
            }
            guard submitted.validUntil > oldestAllowedEnd else { throw .tooOld(position: position, retentionDays: retentionDays) }
            guard submitted.validFrom <= latestAllowedStart else { throw .inFuture(position: position) }
            entries.append(PositiveListEntry(id: id, validFrom: submitted.validFrom, validUntil: submitted.validUntil))
        }
        return entries
    }
}
