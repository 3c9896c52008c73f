/// The validity window of one userId: [start, end) in Unix seconds.
public struct IDWindow: Hashable, Comparable, Sendable, Codable {
    public let start: UnixSeconds
    public let end: UnixSeconds

    public init(start: UnixSeconds, end: UnixSeconds) {
        precondition(end > start, "an id window must not be empty")
        self.start = start
        self.end = end
    }

    public func contains(_ time: UnixSeconds) -> Bool { time >= start && time < end }

    public static func < (lhs: IDWindow, rhs: IDWindow) -> Bool { lhs.start < rhs.start }
}

public enum RotationScheduleError: Error, Equatable, Sendable, CustomStringConvertible {
    case intervalOutOfRange(seconds: Int64)
    case jitterTooLarge(jitterSeconds: Int64, intervalSeconds: Int64)

    public var description: String {
        switch self {
        case .intervalOutOfRange(let seconds):
            return "the rotation interval must be between 5 seconds and 24 hours, got \(seconds) s"
        case .jitterTooLarge(let jitter, let interval):
            return "the rotation jitter (\(jitter) s) must be less than half the rotation interval (\(interval) s)"
        }
    }
}

/// When userIds change.
///
/// Windows follow wall-clock boundaries (multiples of `interval` since the Unix epoch, in UTC),
/// so a 15-minute schedule rotates at :00, :15, :30 and :45. With jitter, each rotation happens
/// a fresh random number of seconds in [0, jitter) after its boundary: nodes then do not all
/// reconnect in the same second, and because the delay is drawn anew every time it is not a
/// fixed phase that would let an observer link one node's successive ids.
public struct RotationSchedule: Hashable, Sendable {
    public static let defaultInterval: Int64 = 15 * 60

    public let interval: Int64
    public let jitter: Int64

    public init(intervalSeconds: Int64 = RotationSchedule.defaultInterval, jitterSeconds: Int64 = 0) throws(RotationScheduleError) {
        guard (5...86_400).contains(intervalSeconds) else { throw .intervalOutOfRange(seconds: intervalSeconds) }
        guard jitterSeconds >= 0, jitterSeconds * 2 < intervalSeconds else {
            throw .jitterTooLarge(jitterSeconds: jitterSeconds, intervalSeconds: intervalSeconds)
        }
        interval = intervalSeconds
        jitter = jitterSeconds
    }

    /// The window a node uses at `now` when its previous window (if any) has ended.
    ///
    /// - A window that follows on from the previous one starts exactly where it ended, so
    ///   validity windows never overlap and leave no gap while the node runs.
    /// - After a pause of a whole interval or more, the window starts at the boundary before `now`.
    /// - Every window lasts more than half an interval and ends after `now`.
    public func window<Generator: RandomNumberGenerator>(
        after previous: IDWindow?, at now: UnixSeconds, using generator: inout Generator
    ) -> IDWindow {
        let start: UnixSeconds
        if let previous, now - previous.end < interval {
            start = previous.end
        } else {
            start = boundary(atOrBefore: now)
        }
        let delay = jitter > 0 ? Int64.random(in: 0..<jitter, using: &generator) : 0
        var end = boundary(atOrBefore: start) + interval + delay
        while end <= max(now, start) { end += interval }
        return IDWindow(start: start, end: end)
    }

    public func window(after previous: IDWindow?, at now: UnixSeconds) -> IDWindow {
        var generator = SystemRandomNumberGenerator()
        return window(after: previous, at: now, using: &generator)
    }

    func boundary(atOrBefore time: UnixSeconds) -> UnixSeconds {
        // Floor division: correct for times before 1970 too.
        let quotient = time / interval
        let floored = (time % interval != 0 && time < 0) ? quotient - 1 : quotient
        return floored * interval
    }
}
