import Testing
@testable import GATTExchange

@Suite struct ScanScheduleTests {
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
}
