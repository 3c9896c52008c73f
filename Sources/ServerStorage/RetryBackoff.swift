/// The waits between attempts after failures in a row: `first`, then twice as long each time, at
/// most `longest`. Bounded so that the server comes back within `longest` of its cause going,
/// however long the outage; the first is short because most outages (a restart) are.
public struct RetryBackoff: Sendable {
    public let first: Duration
    public let longest: Duration
    private var upcoming: Duration

    public init(first: Duration = .seconds(1), longest: Duration = .seconds(60)) {
        self.first = first
        self.longest = max(longest, first)
        upcoming = first
    }

    /// The wait before the next attempt, after one more failure.
    public mutating func next() -> Duration {
        let wait = upcoming
        upcoming = min(upcoming * 2, longest)
        return wait
    }

    /// After a success: the next failure waits `first` again.
    public mutating func reset() { upcoming = first }
}
