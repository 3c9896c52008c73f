import IDRotation
import Synchronization
import Testing

@Suite struct IDRotatorTests {
    let start: UnixSeconds = 1_795_324_033  // 05:07:13, inside [05:00, 05:15)
    let schedule = try! RotationSchedule()

    @Test func firstIDIsRecordedAndKeptUntilItsWindowEnds() async throws {
        let clock = ManualClock(start)
        let history = MemoryHistory()
        let rotator = IDRotator(schedule: schedule, history: history, clock: clock)
        let first = try await rotator.currentID()
        #expect(history.all == [first])
        #expect(first.window == IDWindow(start: 1_795_323_600, end: 1_795_324_500))

        clock.set(first.window.end - 1)
        #expect(try await rotator.currentID() == first)
        #expect(try await rotator.rotateIfDue() == nil)

        clock.set(first.window.end)
        let rotation = try #require(try await rotator.rotateIfDue())
        #expect(rotation.previous == first)
        #expect(rotation.current.window.start == first.window.end)
        #expect(rotation.current.id != first.id)
        #expect(history.all.count == 2)
    }

    @Test func clockGoingBackwardsKeepsTheCurrentID() async throws {
        let clock = ManualClock(start)
        let history = MemoryHistory()
        let rotator = IDRotator(schedule: schedule, history: history, clock: clock)
        let first = try await rotator.currentID()
        clock.set(first.window.end + 2)
        let second = try #require(try await rotator.rotateIfDue()).current

        // NTP steps the clock back 5 s, behind the boundary the node has already passed.
        clock.set(first.window.end - 3)
        #expect(try await rotator.currentID() == second)
        #expect(try await rotator.rotateIfDue() == nil)
        // Far back (a dead RTC battery): still no return to an old id, no new id either.
        clock.set(start - 86_400)
        #expect(try await rotator.currentID() == second)
        #expect(history.all.count == 2)

        clock.set(second.window.end)
        let third = try #require(try await rotator.rotateIfDue()).current
        #expect(third.window.start == second.window.end)
    }

    @Test func restartResumesTheRecordedIDUntilItsWindowEnds() async throws {
        let clock = ManualClock(start)
        let history = MemoryHistory()
        let before = try await IDRotator(schedule: schedule, history: history, clock: clock).currentID()

        clock.advance(60)
        let restarted = IDRotator(schedule: schedule, history: history, clock: clock)
        let resumed = try #require(try await restarted.rotateIfDue())
        #expect(resumed.previous == nil)
        #expect(resumed.current == before)
        #expect(history.all.count == 1)
    }

    @Test func restartAfterTheWindowEndedStartsANewID() async throws {
        let clock = ManualClock(start)
        let history = MemoryHistory()
        let before = try await IDRotator(schedule: schedule, history: history, clock: clock).currentID()

        clock.set(before.window.end + 10)
        let rotation = try #require(try await IDRotator(schedule: schedule, history: history, clock: clock).rotateIfDue())
        #expect(rotation.previous == before)
        #expect(rotation.current.window.start == before.window.end)
        #expect(rotation.current.id != before.id)
    }

    @Test func runCallsTheHandlerForEveryRotationInOrder() async throws {
        let clock = ManualClock(start)
        let history = MemoryHistory()
        let rotator = IDRotator(schedule: try RotationSchedule(intervalSeconds: 20), history: history, clock: clock)
        let seen = Mutex<[Rotation]>([])
        let task = Task {
            try await rotator.run { rotation in
                let count = seen.withLock { $0.append(rotation); return $0.count }
                if count == 6 { withUnsafeCurrentTask { $0?.cancel() } }
            }
        }
        _ = await task.result
        let rotations = seen.withLock { $0 }
        #expect(rotations.count == 6)
        #expect(rotations.first?.previous == nil)
        for (earlier, later) in zip(rotations, rotations.dropFirst()) {
            #expect(later.previous == earlier.current)
            #expect(later.current.window.start == earlier.current.window.end)
        }
        #expect(Set(rotations.map(\.current.id)).count == 6)
        #expect(history.all == rotations.map(\.current))
    }

    @Test func anIDIsRecordedBeforeTheHandlerSeesIt() async throws {
        let clock = ManualClock(start)
        let history = MemoryHistory()
        let rotator = IDRotator(schedule: schedule, history: history, clock: clock)
        let recordedFirst = Mutex(false)
        let task = Task {
            try await rotator.run { rotation in
                recordedFirst.withLock { $0 = history.all.contains(rotation.current) }
                withUnsafeCurrentTask { $0?.cancel() }
            }
        }
        _ = await task.result
        #expect(recordedFirst.withLock { $0 })
    }
}
