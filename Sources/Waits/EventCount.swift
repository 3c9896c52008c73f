import Synchronization

/// A count of events a task can wait past: a state changed, a publication landed. A waiter reads
/// `count` while it checks its condition, then waits past that count, so that an event announced
/// between the check and the wait is never missed (the kernel's and Go's "event count").
public final class EventCount: Sendable {
    private struct State {
        var count: UInt64 = 0
        var waiters = ParkedTasks<Bool>()
    }

    private let state = Mutex(State())

    public init() {}

    /// The events announced so far.
    public var count: UInt64 { state.withLock { $0.count } }

    /// Tasks waiting now: a test's sign that a waiter is parked, instead of a sleep.
    public var waiterCount: Int { state.withLock { $0.waiters.count } }

    /// Counts an event and wakes every waiter.
    public func announce() {
        let woken = state.withLock { state in
            state.count &+= 1
            return state.waiters.removeAll()
        }
        for waiter in woken { waiter.resume(returning: true) }
    }

    /// True once the count differs from `seen` (at once if it already does); false when the task is
    /// cancelled first.
    @discardableResult
    public func wait(past seen: UInt64) async -> Bool {
        let number = newParkingNumber()
        return await park(ifCancelled: false) { continuation in
            state.withLock { state -> Bool? in
                if state.count != seen { return true }
                if Task.isCancelled { return false }
                state.waiters.park(number, continuation)
                return nil
            }
        } withdraw: {
            state.withLock { $0.waiters.remove(number) }
        }
    }

    /// `wait(past:)`, ended at `deadline` (nil: none): true when the count moved first, false at the
    /// deadline or when the task is cancelled.
    @discardableResult
    public func wait(past seen: UInt64, until deadline: Deadline?) async -> Bool {
        await withDeadline(deadline) { await self.wait(past: seen) } ?? false
    }
}
