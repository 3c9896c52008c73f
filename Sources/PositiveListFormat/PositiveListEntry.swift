import TracerCore

/// One published id and the window in which its owner broadcast it.
public struct PositiveListEntry: Hashable, Sendable {
    public let id: UserID
    public let validFrom: UnixSeconds
    public let validUntil: UnixSeconds

    public init(id: UserID, validFrom: UnixSeconds, validUntil: UnixSeconds) {
        self.id = id
        self.validFrom = validFrom
        self.validUntil = validUntil
    }
}

/// The smallest interval covering a set of validity windows.
public struct PublishedTimeRange: Hashable, Sendable {
    public let start: UnixSeconds
    public let end: UnixSeconds

    public init(start: UnixSeconds, end: UnixSeconds) {
        self.start = start
        self.end = end
    }

    public init?<Entries: Sequence>(covering entries: Entries) where Entries.Element == PositiveListEntry {
        var start = UnixSeconds.max
        var end = UnixSeconds.min
        for entry in entries {
            start = min(start, entry.validFrom)
            end = max(end, entry.validUntil)
        }
        guard start <= end else { return nil }
        self.init(start: start, end: end)
    }
}
