import IDRotation
import Synchronization

/// Counts failed credential attempts per client address over a sliding minute; past the limit
/// the address is refused until its oldest failure leaves the window. Guessing a 59-bit code at
/// 10 tries a minute would take longer than the universe has existed.
final class FailedAttemptLimiter: Sendable {
    private let limit: Int
    private let windowSeconds: UnixSeconds = 60
    private let clock: any WallClock
    private let failures = Mutex<[String: [UnixSeconds]]>([:])
    /// Bounds memory when many addresses fail once: beyond this, stale addresses are dropped.
    private let pruneThreshold = 10_000

    init(limitPerMinute: Int, clock: any WallClock) {
        self.limit = limitPerMinute
        self.clock = clock
    }

    /// Seconds until `address` may try again, or nil when it may try now.
    func retryAfter(for address: String) -> Int? {
        let now = clock.now()
        return failures.withLock { failures in
            let recent = (failures[address] ?? []).filter { $0 > now - windowSeconds }
            failures[address] = recent.isEmpty ? nil : recent
            guard recent.count >= limit, let oldest = recent.first else { return nil }
            return Int(max(1, oldest + windowSeconds - now))
        }
    }

    func recordFailure(for address: String) {
        let now = clock.now()
        failures.withLock { failures in
            if failures.count > pruneThreshold {
                failures = failures.filter { $0.value.contains { $0 > now - windowSeconds } }
            }
            failures[address, default: []].append(now)
        }
    }
}
