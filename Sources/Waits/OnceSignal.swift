import Synchronization

/// A value that arrives at most once, which any number of tasks can wait for: the loss of a
/// controller, the reason one is stuck, the reading a round of sampling brings, the answer to one
/// HCI command. A waiter whose task is cancelled returns nil at once, so one that stops watching
/// never leaves a continuation behind; one that must not stop waits through cancellation.
///
/// Its own lock rather than its owner's actor: a cancellation handler runs synchronously on any
/// thread and could reach an actor only through a new task, after the waiter was parked or not.
public final class OnceSignal<Value: Sendable>: Sendable {
    private struct State {
        var value: Value?
        var waiters = ParkedTasks<Value?>()
    }

    private let state = Mutex(State())

    public init() {}

    /// The value, once fired.
    public var value: Value? { state.withLock { $0.value } }

    /// Tasks waiting now: a test's sign that a waiter is parked, instead of a sleep.
    public var waiterCount: Int { state.withLock { $0.waiters.count } }

    /// Delivers `value` to every waiter, present and future; false (and ignored) after the first.
    @discardableResult
    public func fire(_ value: Value) -> Bool {
        let woken = state.withLock { state -> [CheckedContinuation<Value?, Never>]? in
            guard state.value == nil else { return nil }
            state.value = value
            return state.waiters.removeAll()
        }
        guard let woken else { return false }
        for waiter in woken { waiter.resume(returning: value) }
        return true
    }

    /// The value once it arrives, or nil when the calling task is cancelled first.
    public func wait() async -> Value? {
        let number = newParkingNumber()
        return await park(ifCancelled: nil) { continuation in
            state.withLock { state -> Value?? in
                if let value = state.value { return .some(value) }
                if Task.isCancelled { return .some(nil) }
                state.waiters.park(number, continuation)
                return .none
            }
        } withdraw: {
            state.withLock { $0.waiters.remove(number) }
        }
    }

    /// The value once it arrives, even if the calling task is cancelled meanwhile: for a waiter
    /// that must see the end it waits for, such as an HCI command's answer (left unread, it would
    /// be handed to the next command with that opcode). Whoever fires the signal must do so in
    /// bounded time (a timeout, the transport's end): a cancellation does not end this wait.
    public func waitThroughCancellation() async -> Value {
        let number = newParkingNumber()
        let value = await parkThroughCancellation { (continuation: CheckedContinuation<Value?, Never>) in
            state.withLock { state -> Value?? in
                if let value = state.value { return .some(value) }
                state.waiters.park(number, continuation)
                return .none
            }
        }
        // Parked here, a waiter is resumed by `fire` alone, which always brings the value.
        guard let value else { preconditionFailure("a wait through cancellation was resumed without the value") }
        return value
    }
}
