import BLEHost
import Synchronization

/// The events `ProximityExchange`'s loops wait for, in place of polling: each change of the
/// exchange's state that one loop may be waiting on (a candidate offered, an attempt ended, a
/// rotation over, the scanner listening) is announced here, and a loop waits for the next
/// announcement or for a deadline on the host's clock, whichever comes first.
///
/// An event count: a waiter reads `generation` while it checks its condition (on the actor), then
/// waits for a later generation, so that an announcement made between the check and the wait is
/// never missed.
final class StateChanges: Sendable {
    private struct State {
        var generation: UInt64 = 0
        var waiters: [Int: CheckedContinuation<Void, Never>] = [:]
        var nextWaiter = 0
    }

    private let state = Mutex(State())

    /// The number of announcements so far.
    var generation: UInt64 { state.withLock { $0.generation } }

    /// Wakes every waiter.
    func announce() {
        let woken = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.generation &+= 1
            defer { state.waiters = [:] }
            return Array(state.waiters.values)
        }
        for continuation in woken { continuation.resume() }
    }

    /// Returns once an announcement later than `generation` is made, `deadline` passes on `clock`
    /// (nil: no deadline), or the task is cancelled.
    func wait(after generation: UInt64, until deadline: ContinuousClock.Instant? = nil, on clock: any HostClock) async {
        guard let deadline else {
            await nextAnnouncement(after: generation)
            return
        }
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await self.nextAnnouncement(after: generation) }
            group.addTask { try? await clock.sleep(until: deadline) }
            await group.next()
            group.cancelAll()
        }
    }

    private func nextAnnouncement(after generation: UInt64) async {
        let id = state.withLock { state -> Int in
            state.nextWaiter += 1
            return state.nextWaiter
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                // Under the lock, so that an announcement or a cancellation is seen either here or
                // by `announce` and the handler below.
                let resumeNow = state.withLock { state -> Bool in
                    if Task.isCancelled || state.generation != generation { return true }
                    state.waiters[id] = continuation
                    return false
                }
                if resumeNow { continuation.resume() }
            }
        } onCancel: {
            let waiter = state.withLock { $0.waiters.removeValue(forKey: id) }
            waiter?.resume()
        }
    }
}
