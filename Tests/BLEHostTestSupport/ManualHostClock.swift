import BLEHost
import TestTiers

/// A `HostClock` that moves only when the test advances it, as swift-nio's embedded event loop
/// does: a timeout sequence runs in no time and exactly, whatever else loads the machine.
package final class ManualHostClock: HostClock {
    private let timeline: ManualTimeline<ContinuousClock.Instant>
    /// Where the clock started, so that tests can speak of offsets from it.
    package let start: ContinuousClock.Instant

    package init(start: ContinuousClock.Instant = .now) {
        self.start = start
        timeline = ManualTimeline(startingAt: start)
    }

    package var now: ContinuousClock.Instant { timeline.now }

    /// How far the clock has been advanced.
    package var elapsed: Duration { start.duration(to: now) }

    /// The deadlines of the sleepers still waiting, as offsets from `start`, earliest first.
    package var pendingDeadlines: [Duration] { timeline.pendingWakes.map { start.duration(to: $0) } }

    package func sleep(until deadline: ContinuousClock.Instant) async throws { try await timeline.sleep(until: deadline) }

    /// Moves the clock forward and wakes every sleeper whose deadline has come, earliest first.
    package func advance(by duration: Duration) { timeline.advance { $0.advanced(by: duration) } }
}
