import Synchronization

/// The time of a manual clock and the tasks sleeping on it, for the tests' manual clocks (the host
/// clock's `ContinuousClock.Instant`, the server's Unix seconds): time moves only when a test
/// advances it, and an advance wakes every sleeper whose time has come, earliest first.
public final class ManualTimeline<Time: Comparable & Sendable>: Sendable {
    private struct Sleeper {
        let wake: Time
        let continuation: CheckedContinuation<Void, any Error>
    }

    private struct State {
        var now: Time
        var sleepers: [Int: Sleeper] = [:]
        var nextSleeper = 0
    }

    private let state: Mutex<State>

    private enum Decision { case wait, due, cancelled }

    public init(startingAt start: Time) { state = Mutex(State(now: start)) }

    public var now: Time { state.withLock { $0.now } }

    /// The wake times of the sleepers still waiting, earliest first.
    public var pendingWakes: [Time] { state.withLock { $0.sleepers.values.map(\.wake).sorted() } }

    /// Sets the time to `move(now)` and wakes the sleepers it reaches.
    public func advance(_ move: (Time) -> Time) {
        let due = state.withLock { state -> [Sleeper] in
            state.now = move(state.now)
            let now = state.now
            let due = state.sleepers.filter { $0.value.wake <= now }
            for id in due.keys { state.sleepers[id] = nil }
            return due.values.sorted { $0.wake < $1.wake }
        }
        for sleeper in due { sleeper.continuation.resume() }
    }

    public func sleep(until wake: Time) async throws {
        let id = state.withLock { state -> Int in
            state.nextSleeper += 1
            return state.nextSleeper
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                // Under the lock, so that a cancellation is seen either here or by the handler below.
                let decision = state.withLock { state -> Decision in
                    if Task.isCancelled { return .cancelled }
                    if state.now >= wake { return .due }
                    state.sleepers[id] = Sleeper(wake: wake, continuation: continuation)
                    return .wait
                }
                switch decision {
                case .wait: break
                case .due: continuation.resume()
                case .cancelled: continuation.resume(throwing: CancellationError())
                }
            }
        } onCancel: {
            let sleeper = state.withLock { $0.sleepers.removeValue(forKey: id) }
            sleeper?.continuation.resume(throwing: CancellationError())
        }
    }
}
