/// How often and how patiently a failed request is tried again: exponential backoff with full
/// jitter, so that many nodes failing together do not come back together.
public struct RetryPolicy: Sendable, Equatable {
    /// Attempts in total, including the first; at least 1.
    public var maxAttempts: Int
    public var initialDelay: Duration
    public var maxDelay: Duration

    public init(maxAttempts: Int = 4, initialDelay: Duration = .milliseconds(500), maxDelay: Duration = .seconds(8)) {
        self.maxAttempts = max(1, maxAttempts)
        self.initialDelay = initialDelay
        self.maxDelay = maxDelay
    }

    /// The longest wait before attempt `failedAttempts + 1`: initialDelay doubled per failed
    /// attempt after the first, capped at maxDelay.
    public func delayCeiling(afterFailedAttempts failedAttempts: Int) -> Duration {
        var ceiling = initialDelay
        for _ in 1..<max(1, failedAttempts) {
            if ceiling >= maxDelay { break }
            ceiling *= 2
        }
        return min(ceiling, maxDelay)
    }

    /// A uniformly random wait in 0...delayCeiling ("full jitter").
    public func delay(afterFailedAttempts failedAttempts: Int, using generator: inout some RandomNumberGenerator) -> Duration {
        let ceilingNanoseconds = delayCeiling(afterFailedAttempts: failedAttempts).wholeNanoseconds
        guard ceilingNanoseconds > 0 else { return .zero }
        return .nanoseconds(Int64.random(in: 0...ceilingNanoseconds, using: &generator))
    }
}

extension Duration {
    /// Saturates instead of trapping for durations beyond Int64 nanoseconds (~292 years).
    var wholeNanoseconds: Int64 {
        let (seconds, attoseconds) = components
        let (scaled, overflow) = seconds.multipliedReportingOverflow(by: 1_000_000_000)
        if overflow { return seconds < 0 ? .min : .max }
        let (total, overflowAgain) = scaled.addingReportingOverflow(attoseconds / 1_000_000_000)
        return overflowAgain ? (seconds < 0 ? .min : .max) : total
    }

    var wholeMilliseconds: Int64 { wholeNanoseconds / 1_000_000 }
}
