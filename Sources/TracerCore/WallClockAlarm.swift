import CLinuxTime
import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// One wait for a wall-clock time, on a Linux timerfd armed with `TFD_TIMER_CANCEL_ON_SET`.
///
/// A sleep on the monotonic clock cannot tell when the wall clock reaches a time: an NTP step or
/// `date -s` moves the wall clock and not the sleep, and during a suspend the monotonic clock
/// stops while the wall clock runs on. The kernel's absolute `CLOCK_REALTIME` timer ends at the
/// wall-clock time itself, also when a resume or a step carries the clock past it, and with
/// `TFD_TIMER_CANCEL_ON_SET` it ends at once when the clock is set, so the caller re-reads it.
enum WallClockAlarm {
    enum Outcome: Equatable {
        /// The clock read at least the time.
        case reached
        /// The clock was set (stepped, either way) before it reached the time.
        case clockWasSet
    }

    /// Waits until the wall clock reaches `time` or is set; nil when the kernel refuses the timer
    /// (a seccomp filter without the timer calls), so the caller waits another way.
    static func wait(until time: UnixSeconds) async throws -> Outcome? {
        let timer = Timer()
        guard timer.arm(at: time) else {
            timer.close()
            return nil
        }
        let outcome = await withTaskCancellationHandler {
            // Not a kit wait: it carries a blocking read's result back from its thread (and TracerCore links no Waits).
            await withCheckedContinuation { (continuation: CheckedContinuation<Outcome?, Never>) in
                // The read blocks a thread of its own, not one of the concurrency pool's few.
                Thread.detachNewThread { continuation.resume(returning: timer.waitForExpiry()) }
            }
        } onCancel: {
            timer.cancel()
        }
        timer.close()
        if timer.wasCancelled { throw CancellationError() }
        return outcome
    }

    /// The timerfd, shared by the waiting thread and the cancellation handler.
    private final class Timer: Sendable {
        private struct State {
            var descriptor: Int32
            var cancelled = false
        }
        private let state: Mutex<State>

        init() {
            state = Mutex(State(descriptor: timerfd_create(CLOCK_REALTIME, tracer_tfd_cloexec)))
        }

        var wasCancelled: Bool { state.withLock { $0.cancelled } }

        func arm(at time: UnixSeconds) -> Bool {
            state.withLock { state in
                guard state.descriptor >= 0 else { return false }
                return Self.set(state.descriptor, to: time)
            }
        }

        /// Ends the wait at once: the timer set to a time long past expires immediately.
        func cancel() {
            state.withLock { state in
                state.cancelled = true
                if state.descriptor >= 0 { _ = Self.set(state.descriptor, to: 1) }
            }
        }

        func close() {
            state.withLock { state in
                if state.descriptor >= 0 { _ = Glibc.close(state.descriptor) }
                state.descriptor = -1
            }
        }

        /// Blocks until the timer expires (`reached`) or the clock is set (`clockWasSet`); nil
        /// on any other failure of the read.
        func waitForExpiry() -> Outcome? {
            // The descriptor stays open until `close()`, which runs only after this returned.
            let descriptor = state.withLock { $0.descriptor }
            var expirations: UInt64 = 0
            while true {
                let count = read(descriptor, &expirations, MemoryLayout<UInt64>.size)
                if count == MemoryLayout<UInt64>.size { return .reached }
                switch errno {
                case EINTR: continue
                case ECANCELED: return .clockWasSet
                default: return nil
                }
            }
        }

        private static func set(_ descriptor: Int32, to time: UnixSeconds) -> Bool {
            var setting = itimerspec(
                it_interval: timespec(tv_sec: 0, tv_nsec: 0),
                it_value: timespec(tv_sec: Int(time), tv_nsec: 0))
            return timerfd_settime(descriptor, tracer_tfd_timer_abstime | tracer_tfd_timer_cancel_on_set, &setting, nil) == 0
        }
    }
}
