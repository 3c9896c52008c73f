/// What the radio does compared with what the node asked of it: whether advertising and scanning
/// are off although wanted, since when and why. `tracer status` and `tracer doctor` show it, so a
/// node that cannot be heard or cannot hear says so instead of looking healthy.
public struct RadioCondition: Sendable, Equatable, Codable {
    /// A role the node wants on but the controller does not perform.
    public struct Outage: Sendable, Equatable, Codable {
        /// When the role was first found off (wall clock, Unix seconds).
        public var since: Int64
        /// The last reason, in words (for example the controller's refusal).
        public var reason: String

        public init(since: Int64, reason: String) {
            self.since = since
            self.reason = reason
        }
    }

    public var advertising: Outage?
    public var scanning: Outage?

    public init() {}

    /// True when the node cannot be heard or cannot hear right now.
    public var isDegraded: Bool { advertising != nil || scanning != nil }
}

/// Keeps one outage per role: its start survives repeated failures, and a success ends it.
struct OutageRecord {
    private(set) var outage: RadioCondition.Outage?

    /// Returns true when this starts a new outage.
    mutating func failed(_ reason: String, at now: Int64) -> Bool {
        if outage != nil {
            outage?.reason = reason
            return false
        }
        outage = RadioCondition.Outage(since: now, reason: reason)
        return true
    }

    /// Returns the outage that ended, if one did.
    mutating func recovered() -> RadioCondition.Outage? {
        defer { outage = nil }
        return outage
    }
}
