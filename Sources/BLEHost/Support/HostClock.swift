import Waits

/// The host stack's monotonic time: every timeout it keeps (HCI commands, connection attempts,
/// ATT transactions, L2CAP reassembly) reads and waits on this clock. Replaceable in tests, where a
/// manual clock advances by hand, the way swift-nio's embedded event loop does: a timeout sequence
/// then runs in no time and cannot race the machine's load.
///
/// Instants are on the continuous clock's scale, so the rest of the stack keeps one instant type.
public protocol HostClock: Sendable {
    var now: ContinuousClock.Instant { get }
    /// Suspends until the clock reads at least `deadline`, or throws `CancellationError`.
    func sleep(until deadline: ContinuousClock.Instant) async throws
}

extension HostClock {
    /// Suspends for `duration` on this clock, or throws `CancellationError`.
    public func sleep(for duration: Duration) async throws {
        try await sleep(until: now.advanced(by: duration))
    }

    /// `deadline` on this clock, for the waits of the kit (`Waits`).
    package func deadline(_ deadline: ContinuousClock.Instant) -> Deadline {
        Deadline { try await sleep(until: deadline) }
    }

    /// Starts a task that calls `action` once `delay` has passed on this clock. The deadline is
    /// read now, not when the task first runs, so that a manual clock advanced in between still
    /// fires it. Cancel the task to disarm the timer.
    package func timer(after delay: Duration, _ action: @escaping @Sendable () async -> Void) -> Task<Void, Never> {
        let deadline = now.advanced(by: delay)
        return Task {
            guard (try? await sleep(until: deadline)) != nil else { return }
            await action()
        }
    }
}

public struct SystemHostClock: HostClock {
    public init() {}

    public var now: ContinuousClock.Instant { .now }

    public func sleep(until deadline: ContinuousClock.Instant) async throws {
        try await Task.sleep(until: deadline, clock: .continuous)
    }
}
