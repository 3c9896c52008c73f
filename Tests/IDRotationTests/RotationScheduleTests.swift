import Foundation
import IDRotation
import Testing
import TestTiers
import TracerCore

@Suite(.tags(.unit)) struct RotationScheduleTests {
    let schedule = try! RotationSchedule()

    @Test func defaultIsFifteenMinutesAlignedToTheClock() {
        #expect(schedule.interval == 900)
        // 2026-11-22T05:07:13Z lies in [05:00, 05:15).
        let now: UnixSeconds = 1_795_324_033
        let window = schedule.window(after: nil, at: now)
        #expect(window == IDWindow(start: 1_795_323_600, end: 1_795_324_500))
        #expect(window.start % 900 == 0)
    }

    @Test func intervalEdges() {
        let boundary: UnixSeconds = 1_795_324_500
        #expect(schedule.window(after: nil, at: boundary).start == boundary)
        #expect(schedule.window(after: nil, at: boundary - 1).end == boundary)
        #expect(schedule.window(after: nil, at: boundary + 899).end == boundary + 900)
        #expect(schedule.window(after: nil, at: boundary).contains(boundary))
        #expect(!schedule.window(after: nil, at: boundary - 1).contains(boundary))
    }

    @Test func windowsFollowOnWithoutGapsOrOverlaps() {
        var window = schedule.window(after: nil, at: 1_795_324_033)
        for _ in 0..<200 {
            // Rotation happens a little late, as a busy node would.
            let next = schedule.window(after: window, at: window.end + 3)
            #expect(next.start == window.end)
            #expect(next.end - next.start == 900)
            window = next
        }
    }

    @Test func afterAPauseTheWindowRestartsAtTheBoundary() {
        let before = schedule.window(after: nil, at: 1_795_324_033)
        let later = schedule.window(after: before, at: before.end + 7_200 + 61)
        #expect(later.start == before.end + 7_200)
        #expect(later.start % 900 == 0)
        #expect(later.contains(before.end + 7_200 + 61))
    }

    @Test func jitterDelaysEachRotationByAFreshAmount() throws {
        let jittered = try RotationSchedule(intervalSeconds: 900, jitterSeconds: 120)
        var generator = SystemRandomNumberGenerator()
        var window = jittered.window(after: nil, at: 1_795_324_033, using: &generator)
        var delays = Set<Int64>()
        for _ in 0..<500 {
            let next = jittered.window(after: window, at: window.end, using: &generator)
            #expect(next.start == window.end)
            let delay = next.end % 900
            #expect((0..<120).contains(delay))
            #expect(next.end - next.start > 450)
            delays.insert(delay)
            window = next
        }
        // A fixed offset would be a fingerprint; fresh draws should give many distinct delays.
        #expect(delays.count > 50)
    }

    @Test func timesBeforeTheEpochFloorCorrectly() {
        let window = schedule.window(after: nil, at: -1)
        #expect(window == IDWindow(start: -900, end: 0))
    }

    @Test func windowsIgnoreLocalTimeAndDaylightSaving() {
        // Europe's clocks went forward at 2026-03-29T01:00Z; UTC windows do not notice.
        let transition: UnixSeconds = 1_774_746_000
        var window = schedule.window(after: nil, at: transition - 3_600)
        while window.end < transition + 3_600 {
            #expect(window.end - window.start == 900)
            #expect(window.start % 900 == 0)
            window = schedule.window(after: window, at: window.end)
        }
    }

    @Test func rejectsUnusableSettings() {
        #expect(throws: RotationScheduleError.intervalOutOfRange(seconds: 4)) { try RotationSchedule(intervalSeconds: 4) }
        #expect(throws: RotationScheduleError.intervalOutOfRange(seconds: 86_401)) {
            try RotationSchedule(intervalSeconds: 86_401)
        }
        #expect(throws: RotationScheduleError.jitterTooLarge(jitterSeconds: 450, intervalSeconds: 900)) {
            try RotationSchedule(intervalSeconds: 900, jitterSeconds: 450)
        }
        #expect(throws: RotationScheduleError.self) { try RotationSchedule(intervalSeconds: 900, jitterSeconds: -1) }
    }
}
