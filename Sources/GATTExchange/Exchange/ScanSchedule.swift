import Synchronization

/// When a node scans: bursts of `onTime`, then a pause of about `offTime` (jittered by ±25 %), on
/// one timeline that outlives controller sessions.
///
/// A session that starts after a controller reset goes on with the burst under way, or waits for
/// the next one, instead of starting a burst of its own. Otherwise every reset bought a fresh
/// burst: in a 20-node crowd on strict controllers, with a reset every few seconds, nodes scanned
/// and initiated almost all the time, which made more lost races and so more resets (1,256 in ten
/// minutes, 17 % of the run off the air). The jitter keeps nodes that started together from
/// scanning in step, where their connect requests collide most.
///
/// The time a reset takes out of a burst is given back, and a resumed burst listens for at least
/// `resumeMinimum`: a new session knows no candidates yet, and a burst whose time had run out
/// while candidates waited ended the moment it resumed, before it had heard anyone. In a 20-node
/// crowd on strict controllers that left a node silent as a central for the rest of its window after two
/// resets early in its burst, and the pairs only it was to initiate went unlogged.
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
        /// When the session scanning in the burst under way ended, if it did.
        var interruptedAt: ContinuousClock.Instant?
        /// Time given back to the burst under way so far: at most `onTime`, so that a controller
        /// reset every few seconds does not keep one burst going for ever.
        var givenBack: Duration = .zero
    }

    /// The pause's jitter: from this share of `offTime`...
    public static let shortestPause = 0.75
    /// ...to this one.
    public static let longestPause = 1.25

    public let onTime: Duration
    public let offTime: Duration
    /// The least a burst resumed after an interruption scans before it may end.
    public let resumeMinimum: Duration
    private let state: Mutex<State>

    /// The first burst begins at `start`.
    public init(onTime: Duration, offTime: Duration, resumeMinimum: Duration = .seconds(3),
                start: ContinuousClock.Instant = .now) {
        self.onTime = onTime
        self.offTime = offTime
        self.resumeMinimum = resumeMinimum
        state = Mutex(State(burstEnd: nil, nextBurst: start))
    }

    /// How long after its start a node begins its first burst: a random moment of one burst and
    /// pause, as a node that has run for a while would be at. Nodes switched on together (kiosks
    /// on one circuit, gateways after an update) otherwise all scanned and initiated in the same
    /// 10 s, and a crowd of 20 on strict controllers started 3 s before a window logged 80.5 % of its pairs
    /// in that window, against 98-100 % in the windows after. A node advertises from its start, so
    /// peers that scan meet it meanwhile. Without a pause there is no rhythm to join: no delay.
    public static func firstBurstDelay(onTime: Duration, offTime: Duration, draw: Double = .random(in: 0...1)) -> Duration {
        offTime > .zero ? (onTime + offTime) * draw : .zero
    }

    /// What to do at `now`: go on with the burst under way, begin the one that is due, or wait.
    public func phase(at now: ContinuousClock.Instant) -> Phase {
        state.withLock { state in
            if let end = state.burstEnd {
                guard let interruptedAt = state.interruptedAt else { return .burst(until: end) }
                state.interruptedAt = nil
                // The burst goes on for what it had left when interrupted, and for long enough to
                // hear the peers again, within what may still be given back.
                let left = max(interruptedAt.duration(to: end), .zero)
                let wanted = max(left, resumeMinimum)
                let extra = min(max(wanted - now.duration(to: end), .zero), onTime - state.givenBack)
                state.givenBack += extra
                let resumedEnd = end + extra
                state.burstEnd = resumedEnd
                return .burst(until: resumedEnd)
            }
            guard now >= state.nextBurst else { return .pause(until: state.nextBurst) }
            let end = now + onTime
            state.burstEnd = end
            state.givenBack = .zero
            return .burst(until: end)
        }
    }

    /// The session scanning in the burst under way stopped before the burst ended (the controller
    /// was lost or is being reset); the next session resumes the burst.
    public func interrupted(at now: ContinuousClock.Instant) {
        state.withLock { state in
            guard state.burstEnd != nil, state.interruptedAt == nil else { return }
            state.interruptedAt = now
        }
    }

    /// The burst under way has ended (its time, and any extension, is over): the pause begins.
    ///
    /// `nextWindowStarts` is when, in the next id window, a burst may begin and still run its time
    /// before that window's quiet end. A pause that would pass it by ends at a random moment of it
    /// instead (`placement`, 0 to 1): with windows little longer than a burst and its pause (a
    /// 60 s rotation against 10 s on and 37-63 s off), a node skipped a window now and then, and a
    /// pair of which both did was not logged in it. Each node draws its own moment, so the crowd
    /// is not brought into step with the rotation. Windows of minutes hold many bursts, and this
    /// never applies there.
    ///
    /// `returnAt`, if given, brings the next burst forward to that instant (a candidate's turn:
    /// `ExchangeConfiguration.scannerRestsUntilTurns`).
    public func burstEnded(
        at now: ContinuousClock.Instant, jitter: Double = .random(in: shortestPause...longestPause),
        nextWindowStarts: ClosedRange<ContinuousClock.Instant>? = nil, placement: Double = .random(in: 0...1),
        returnAt: ContinuousClock.Instant? = nil
    ) {
        state.withLock { state in
            state.burstEnd = nil
            state.interruptedAt = nil
            var next = now + offTime * jitter
            if let room = nextWindowStarts, offTime > .zero, next > room.upperBound {
                next = room.lowerBound + room.lowerBound.duration(to: room.upperBound) * placement
            }
            if let returnAt { next = min(next, max(returnAt, now)) }
            state.nextBurst = next
        }
    }
}
