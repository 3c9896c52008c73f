import Testing
import TestTiers
@testable import BLEHost

/// The one-shot signal behind `LEHost.waitUntilLost` and `ProximityExchange.waitUntilControllerIsStuck`.
@Suite(.tags(.unit), .timeLimit(.minutes(1)))
struct OnceSignalTests {
    @Test func aWaiterAfterTheValueGetsItAtOnce() async {
        let signal = OnceSignal<String>()
        signal.fire("stuck")
        #expect(await signal.wait() == "stuck")
        #expect(signal.value == "stuck")
    }

    @Test func everyWaiterGetsTheFirstValueOnly() async {
        let signal = OnceSignal<Int>()
        async let first = signal.wait()
        async let second = signal.wait()
        // Both registered before the value arrives: a late one would get it at once, untested.
        #expect(await eventually { signal.waiterCount == 2 })
        signal.fire(1)
        signal.fire(2)
        #expect(await first == 1)
        #expect(await second == 1)
        #expect(signal.value == 1)
    }

    @Test func aCancelledWaiterReturnsNilAndOthersStillWait() async {
        let signal = OnceSignal<Int>()
        let cancelled = Task { await signal.wait() }
        let waiting = Task { await signal.wait() }
        // Both registered, so that the cancellation handler, not the check before registering, ends the first.
        #expect(await eventually { signal.waiterCount == 2 })
        cancelled.cancel()
        #expect(await cancelled.value == nil)
        signal.fire(7)
        #expect(await waiting.value == 7)
    }

    @Test func aTaskCancelledBeforeWaitingDoesNotWait() async {
        let signal = OnceSignal<Int>()
        let task = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            return await signal.wait()
        }
        #expect(await task.value == nil)
    }
}
