import Synchronization
import BLEHost

/// A `HostClock` that moves only when the test advances it, as swift-nio's embedded event loop
/// does: a timeout sequence runs in no time and exactly, whatever else loads the machine.
package final class ManualHostClock: HostClock {
    private struct Sleeper {
        let deadline: ContinuousClock.Instant
        let continuation: CheckedContinuation<Void, any Error>
    }

    private struct State {
        package var now: ContinuousClock.Instant
        var sleepers: [Int: Sleeper] = [:]
        var nextSleeper = 0
    }

    private let state: Mutex<State>
    /// Where the clock started, so that tests can speak of offsets from it.
    package let start: ContinuousClock.Instant

    package init(start: ContinuousClock.Instant = .now) {
        self.start = start
        state = Mutex(State(now: start))
    }

    package var now: ContinuousClock.Instant { state.withLock { $0.now } }

    /// How far the clock has been advanced.
    package var elapsed: Duration { start.duration(to: now) }

    /// The deadlines of the sleepers still waiting, as offsets from `start`, earliest first.
    package var pendingDeadlines: [Duration] {
        state.withLock { state in state.sleepers.values.map { start.duration(to: $0.deadline) }.sorted() }
    }

    package func sleep(until deadline: ContinuousClock.Instant) async throws {
        let id = state.withLock { state -> Int in
            state.nextSleeper += 1
            return state.nextSleeper
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                // Under the lock, so that a cancellation is seen either here or by the handler below.
                enum Decision { case wait, due, cancelled }
                let decision = state.withLock { state -> Decision in
                    if Task.isCancelled { return .cancelled }
                    if state.now >= deadline { return .due }
                    state.sleepers[id] = Sleeper(deadline: deadline, continuation: continuation)
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

    /// Moves the clock forward and wakes every sleeper whose deadline has come, earliest first.
    package func advance(by duration: Duration) {
        let due = state.withLock { state -> [Sleeper] in
            state.now = state.now.advanced(by: duration)
            let now = state.now
            let due = state.sleepers.filter { $0.value.deadline <= now }
            for id in due.keys { state.sleepers[id] = nil }
            return due.values.sorted { $0.deadline < $1.deadline }
        }
        for sleeper in due { sleeper.continuation.resume() }
    }
}
