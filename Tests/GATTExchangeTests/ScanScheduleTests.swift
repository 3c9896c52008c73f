import Testing
import TestTiers
@testable import GATTExchange

@Suite(.tags(.unit)) struct ScanScheduleTests {
    let start = ContinuousClock.now

    @Test func theFirstBurstBeginsAtTheStartAndANewSessionGoesOnWithIt() {
        let schedule = ScanSchedule(onTime: .seconds(10), offTime: .seconds(50), start: start)
        #expect(schedule.phase(at: start) == .burst(until: start + .seconds(10)))
        // A session that starts 4 s later, after a reset, is not given a fresh 10 s.
        #expect(schedule.phase(at: start + .seconds(4)) == .burst(until: start + .seconds(10)))
    }

    @Test func afterABurstTheNextWaitsForThePause() {
        let schedule = ScanSchedule(onTime: .seconds(10), offTime: .seconds(50), start: start)
        _ = schedule.phase(at: start)
        let ended = start + .seconds(12)  // the burst ran 2 s over while candidates waited
        schedule.burstEnded(at: ended, jitter: 1)
        #expect(schedule.phase(at: ended + .seconds(49)) == .pause(until: ended + .seconds(50)))
        #expect(schedule.phase(at: ended + .seconds(50)) == .burst(until: ended + .seconds(60)))
    }

    /// A burst that rested its scanner until a candidate's turn brings the next one forward to
    /// that turn, never later than the pause would have.
    @Test func aTurnBringsTheNextBurstForward() {
        let schedule = ScanSchedule(onTime: .milliseconds(270), offTime: .seconds(16), start: start)
        _ = schedule.phase(at: start)
        schedule.burstEnded(at: start + .seconds(1), jitter: 1, returnAt: start + .seconds(4))
        #expect(schedule.phase(at: start + .seconds(2)) == .pause(until: start + .seconds(4)))
        #expect(schedule.phase(at: start + .seconds(4)) == .burst(until: start + .seconds(4) + .milliseconds(270)))
        schedule.burstEnded(at: start + .seconds(5), jitter: 1, returnAt: start + .seconds(60))
        #expect(schedule.phase(at: start + .seconds(6)) == .pause(until: start + .seconds(21)), "a turn after the pause changes nothing")
    }

    @Test func thePauseIsJitteredWithinAQuarter() {
        var pauses: Set<Duration> = []
        for _ in 0..<50 {
            let schedule = ScanSchedule(onTime: .seconds(10), offTime: .seconds(40), start: start)
            schedule.burstEnded(at: start)
            guard case .pause(let until) = schedule.phase(at: start) else {
                Issue.record("no pause after a burst")
                return
            }
            let pause = start.duration(to: until)
            #expect(pause >= .seconds(30) && pause <= .seconds(50))
            pauses.insert(pause)
        }
        #expect(pauses.count > 1, "the pause is never jittered")
    }

    @Test func withoutAPauseBurstsFollowEachOther() {
        let schedule = ScanSchedule(onTime: .seconds(10), offTime: .zero, start: start)
        _ = schedule.phase(at: start)
        schedule.burstEnded(at: start + .seconds(10))
        #expect(schedule.phase(at: start + .seconds(10)) == .burst(until: start + .seconds(20)))
    }

    @Test func aResetGivesBackTheTimeItTookFromTheBurst() {
        let schedule = ScanSchedule(onTime: .seconds(10), offTime: .seconds(50), start: start)
        _ = schedule.phase(at: start)
        schedule.interrupted(at: start + .seconds(3))
        // 7 s were left when the session ended; the next one, 2 s later, gets them.
        #expect(schedule.phase(at: start + .seconds(5)) == .burst(until: start + .seconds(12)))
        // Later calls in the same session see the same end.
        #expect(schedule.phase(at: start + .seconds(6)) == .burst(until: start + .seconds(12)))
    }

    @Test func aBurstResumedAfterItsTimeStillListensTheMinimum() {
        let schedule = ScanSchedule(onTime: .seconds(10), offTime: .seconds(50), resumeMinimum: .seconds(3), start: start)
        _ = schedule.phase(at: start)
        // Interrupted while candidates kept the burst going past its time.
        schedule.interrupted(at: start + .seconds(11))
        #expect(schedule.phase(at: start + .seconds(12)) == .burst(until: start + .seconds(15)))
    }

    @Test func theTimeGivenBackToOneBurstIsAtMostItsOnTime() {
        let schedule = ScanSchedule(onTime: .seconds(10), offTime: .seconds(50), resumeMinimum: .seconds(3), start: start)
        _ = schedule.phase(at: start)
        schedule.interrupted(at: start + .seconds(1))
        #expect(schedule.phase(at: start + .seconds(9)) == .burst(until: start + .seconds(18)))
        schedule.interrupted(at: start + .seconds(18))
        // 3 s would be due, but only 2 s of the 10 are left to give.
        #expect(schedule.phase(at: start + .seconds(20)) == .burst(until: start + .seconds(20)))
        // The next burst has its own allowance.
        schedule.burstEnded(at: start + .seconds(20), jitter: 1)
        _ = schedule.phase(at: start + .seconds(70))
        schedule.interrupted(at: start + .seconds(71))
        #expect(schedule.phase(at: start + .seconds(72)) == .burst(until: start + .seconds(81)))
    }

    @Test func anInterruptionDuringThePauseChangesNothing() {
        let schedule = ScanSchedule(onTime: .seconds(10), offTime: .seconds(50), start: start)
        _ = schedule.phase(at: start)
        schedule.burstEnded(at: start + .seconds(10), jitter: 1)
        schedule.interrupted(at: start + .seconds(20))
        #expect(schedule.phase(at: start + .seconds(30)) == .pause(until: start + .seconds(60)))
        #expect(schedule.phase(at: start + .seconds(60)) == .burst(until: start + .seconds(70)))
    }

    @Test func aPauseThatWouldSkipTheNextIDWindowEndsWithinIt() {
        let schedule = ScanSchedule(onTime: .seconds(10), offTime: .seconds(50), start: start)
        _ = schedule.phase(at: start)
        // The window ends 5 s from now and the next lasts 60 s: a burst may begin in its first 48 s.
        let room = (start + .seconds(5))...(start + .seconds(53))
        schedule.burstEnded(at: start, jitter: 1.25, nextWindowStarts: room, placement: 0.5)
        #expect(schedule.phase(at: start + .seconds(28)) == .pause(until: start + .seconds(29)))
        #expect(schedule.phase(at: start + .seconds(29)) == .burst(until: start + .seconds(39)))
    }

    @Test func aPauseThatEndsInTimeIsLeftAsDrawn() {
        let schedule = ScanSchedule(onTime: .seconds(10), offTime: .seconds(50), start: start)
        _ = schedule.phase(at: start)
        // The pause ends 50 s from now, within the next window's 48 s of room.
        schedule.burstEnded(at: start, jitter: 1, nextWindowStarts: (start + .seconds(30))...(start + .seconds(78)), placement: 0)
        #expect(schedule.phase(at: start + .seconds(49)) == .pause(until: start + .seconds(50)))
        // A 15-minute window.
        _ = schedule.phase(at: start + .seconds(50))
        schedule.burstEnded(at: start + .seconds(60), jitter: 1.25, nextWindowStarts: (start + .seconds(900))...(start + .seconds(1788)), placement: 0)
        #expect(schedule.phase(at: start + .seconds(60)) == .pause(until: start + .milliseconds(122_500)))
    }

    @Test func theFirstBurstBeginsWithinOneCycleAndAtOnceWithoutAPause() {
        #expect(ScanSchedule.firstBurstDelay(onTime: .seconds(10), offTime: .seconds(50), draw: 0) == .zero)
        #expect(ScanSchedule.firstBurstDelay(onTime: .seconds(10), offTime: .seconds(50), draw: 0.5) == .seconds(30))
        #expect(ScanSchedule.firstBurstDelay(onTime: .seconds(10), offTime: .seconds(50), draw: 1) == .seconds(60))
        #expect(ScanSchedule.firstBurstDelay(onTime: .seconds(10), offTime: .zero, draw: 0.7) == .zero)
        let delays = Set((0..<20).map { _ in ScanSchedule.firstBurstDelay(onTime: .seconds(10), offTime: .seconds(50)) })
        #expect(delays.count > 1 && delays.allSatisfy { $0 >= .zero && $0 <= .seconds(60) })
    }
}
