import Synchronization

/// A value that arrives at most once, which any number of tasks can wait for: the loss of the
/// controller, the reason a controller is stuck. A waiter whose task is cancelled returns nil at
/// once, so a supervisor that stops watching never leaves a continuation behind.
///
/// Its own lock rather than its owner's actor: a cancellation handler runs synchronously on an
/// arbitrary thread and could only reach an actor through a new task, after the waiter was
/// registered or not; under the lock, registration and cancellation are ordered.
package final class OnceSignal<Value: Sendable>: Sendable {
    private struct State {
        var value: Value?
        var waiters: [Int: CheckedContinuation<Value?, Never>] = [:]
        var nextWaiter = 0
    }

    private let state = Mutex(State())

    package init() {}

    package var value: Value? { state.withLock { $0.value } }

    /// How many tasks are waiting: a test seam, so that a test awaits registration instead of sleeping.
    var waiterCount: Int { state.withLock { $0.waiters.count } }

    /// Delivers `value` to every waiter, present and future; later calls are ignored.
    package func fire(_ value: Value) {
        let waiters = state.withLock { state -> [CheckedContinuation<Value?, Never>] in
            guard state.value == nil else { return [] }
            state.value = value
            defer { state.waiters = [:] }
            return Array(state.waiters.values)
        }
        for waiter in waiters { waiter.resume(returning: value) }
    }

    /// The value once it arrives, or nil when the calling task is cancelled first.
    package func wait() async -> Value? {
        let waiter = state.withLock { state -> Int in
            state.nextWaiter += 1
            return state.nextWaiter
        }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let immediate: Value?? = state.withLock { state in
                    if let value = state.value { return .some(value) }
                    // Checked under the lock: a cancellation handler that ran before this point found
                    // no waiter to resume, so the waiter must not be registered.
                    if Task.isCancelled { return .some(nil) }
                    state.waiters[waiter] = continuation
                    return .none
                }
                if let immediate { continuation.resume(returning: immediate) }
            }
        } onCancel: {
            state.withLock { $0.waiters.removeValue(forKey: waiter) }?.resume(returning: nil)
        }
    }
}
