import Synchronization

/// When a node scans: bursts of `onTime`, then a pause of about `offTime` (jittered by ±25 %), on
/// one timeline that outlives controller sessions.
///
/// A session that starts after a controller reset goes on with the burst under way, or waits for
/// the next one, instead of starting a burst of its own. Otherwise every reset bought a fresh
/// burst: in a 20-node crowd on RootCanal, with a reset every few seconds, nodes scanned and
/// initiated almost all the time, which made more lost races and so more resets (1,256 in ten
/// minutes, 17 % of the run off the air). The jitter keeps nodes that started together from
/// scanning in step, where their connect requests collide most.
public final class ScanSchedule: Sendable {
    public enum Phase: Equatable, Sendable {
        /// Scan until this instant (a burst may run past it while candidates wait).
        case burst(until: ContinuousClock.Instant)
        /// Do not scan before this instant.
        case pause(until: ContinuousClock.Instant)
    }

    private struct State {
        var burstEnd: ContinuousClock.Instant?
        var nextBurst: ContinuousClock.Instant
    }

    public let onTime: Duration
    public let offTime: Duration
    private let state: Mutex<State>

    /// The first burst begins at `start`.
    public init(onTime: Duration, offTime: Duration, start: ContinuousClock.Instant = .now) {
        self.onTime = onTime
        self.offTime = offTime
        state = Mutex(State(burstEnd: nil, nextBurst: start))
    }

    /// What to do at `now`: go on with the burst under way, begin the one that is due, or wait.
    public func phase(at now: ContinuousClock.Instant) -> Phase {
        state.withLock { state in
            if let end = state.burstEnd { return .burst(until: end) }
            guard now >= state.nextBurst else { return .pause(until: state.nextBurst) }
            let end = now + onTime
            state.burstEnd = end
            return .burst(until: end)
        }
    }

    /// The burst under way has ended (its time, and any extension, is over): the pause begins.
    public func burstEnded(at now: ContinuousClock.Instant, jitter: Double = .random(in: 0.75...1.25)) {
        state.withLock { state in
            state.burstEnd = nil
            state.nextBurst = now + offTime * jitter
        }
    }
}
