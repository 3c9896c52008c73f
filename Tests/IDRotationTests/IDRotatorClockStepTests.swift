import IDRotation
import Testing
import TestTiers
import TracerCore

/// The rotator's run loop when the wall clock is stepped (NTP, `date -s`) or jumps at a resume
/// from suspend: it rotates at once to the window of the new time, never returns to an id it
/// used, and its own-id history stays in order. The real clock's wait is `SystemWallClock`
/// (a timerfd that ends on a step); the kernel bed steps a real clock under a real node.
@Suite(.tags(.unit)) struct IDRotatorClockStepTests {
    let start: UnixSeconds = 1_795_324_033  // 05:07:13 UTC, inside [05:00, 05:15)
    let schedule = try! RotationSchedule()

    /// Every id once, and each window after the one before it.
    func expectInOrder(_ ids: [OwnID], sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(Set(ids.map(\.id)).count == ids.count, "an id was recorded twice: \(ids)", sourceLocation: sourceLocation)
        #expect(zip(ids, ids.dropFirst()).allSatisfy { $0.window.end <= $1.window.start },
                "windows overlap or go back: \(ids.map(\.window))", sourceLocation: sourceLocation)
    }

    /// Runs `rotator`, its rotations in order on the stream.
    func run(_ rotator: IDRotator) -> (AsyncStream<Rotation>, Task<Void, any Error>) {
        let (stream, continuation) = AsyncStream.makeStream(of: Rotation.self)
        let task = Task {
            defer { continuation.finish() }
            try await rotator.run { continuation.yield($0) }
        }
        return (stream, task)
    }

    @Test(.timeLimit(.minutes(1))) func aForwardStepOfMinutesRotatesAtOnceToTheNewTimesWindow() async throws {
        let clock = SteppedClock(start)
        let history = MemoryHistory()
        let (stream, task) = run(IDRotator(schedule: schedule, history: history, clock: clock))
        defer { task.cancel() }
        var rotations = stream.makeAsyncIterator()
        let first = try #require(await rotations.next()).current
        try await clock.waitForSleeps(1)

        clock.set(start + 33 * 60)  // 05:40:13: the 05:15 window was never reached
        let second = try #require(await rotations.next())
        #expect(second.previous == first)
        #expect(second.current.window == IDWindow(start: 1_795_325_400, end: 1_795_326_300))  // [05:30, 05:45)
        #expect(second.current.window.contains(clock.now()))
        #expect(history.all == [first, second.current])
    }

    @Test(.timeLimit(.minutes(1))) func aForwardStepOfHoursAcrossMidnightUsesTheNewDaysKey() async throws {
        let clock = SteppedClock(start)
        let history = MemoryHistory()
        let (stream, task) = run(IDRotator(schedule: schedule, history: history, clock: clock))
        defer { task.cancel() }
        var rotations = stream.makeAsyncIterator()
        let first = try #require(await rotations.next()).current
        try await clock.waitForSleeps(1)

        clock.set(start + 20 * 3_600)  // 01:07:13 the next day
        let second = try #require(await rotations.next()).current
        #expect(second.window.contains(clock.now()))
        #expect(second.id != first.id)
        #expect(history.dailyKeys.map(\.day) == [UTCDay(containing: start), UTCDay(containing: clock.now())])
    }

    /// A suspend stops the monotonic clock while the wall clock runs on: to the rotator the resume
    /// is a step forward. Nothing is recorded for the windows slept through.
    @Test(.timeLimit(.minutes(1))) func aResumeAfterAnHoursSuspendRotatesToTheWindowOfTheResume() async throws {
        let clock = SteppedClock(start)
        let history = MemoryHistory()
        let (stream, task) = run(IDRotator(schedule: schedule, history: history, clock: clock))
        defer { task.cancel() }
        var rotations = stream.makeAsyncIterator()
        let first = try #require(await rotations.next()).current
        try await clock.waitForSleeps(1)

        clock.advance(3_600)
        let resumed = try #require(await rotations.next()).current
        #expect(resumed.window == IDWindow(start: first.window.start + 3_600, end: first.window.end + 3_600))
        #expect(history.all == [first, resumed])
    }

    @Test(.timeLimit(.minutes(1))) func aBackwardStepAcrossABoundaryNeverReturnsToAPastID() async throws {
        let clock = SteppedClock(start)
        let history = MemoryHistory()
        let rotator = IDRotator(schedule: schedule, history: history, clock: clock)
        let (stream, task) = run(rotator)
        defer { task.cancel() }
        var rotations = stream.makeAsyncIterator()
        let first = try #require(await rotations.next()).current
        try await clock.waitForSleeps(1)
        clock.set(first.window.end + 2)
        let second = try #require(await rotations.next()).current
        try await clock.waitForSleeps(2)

        // NTP steps back 72 s, into the first window: the node keeps the second id.
        clock.set(first.window.end - 70)
        #expect(try await rotator.currentID() == second)
        // Two hours back (a clock that ran ahead): still the second id, no key for that time.
        clock.set(start - 2 * 3_600)
        #expect(try await rotator.currentID() == second)
        #expect(history.all == [first, second])

        // Once the clock passes the second window's end again, the next window follows it.
        clock.set(second.window.end)
        let third = try #require(await rotations.next())
        #expect(third.previous == second)
        #expect(third.current.window.start == second.window.end)
        expectInOrder(history.all)
    }

    /// Steps every way, many times: the history only ever grows in window order, every id once,
    /// and the id in use always has a window that has not ended.
    @Test(.timeLimit(.minutes(1))) func aClockSteppedEveryWayKeepsTheHistoryInOrder() async throws {
        let clock = SteppedClock(start)
        let history = MemoryHistory()
        let rotator = IDRotator(schedule: schedule, history: history, clock: clock)
        let steps: [Int64] = [+40, +900, -1_200, +3_600, -30, -7_200, +86_400, +5, -86_400, +200_000, -60]
        var time = start
        for step in steps {
            time += step
            clock.set(time)
            let current = try await rotator.currentID()
            #expect(clock.now() < current.window.end, "an ended window's id at \(clock.now()): \(current.window)")
        }
        expectInOrder(history.all)
    }

    /// At a window's end the handler hears of the ended id before the next one is recorded, so the
    /// radio can go quiet while a slow store records it.
    @Test(.timeLimit(.minutes(1))) func theWindowsEndIsAnnouncedBeforeTheNextIDIsRecorded() async throws {
        let clock = SteppedClock(start)
        let history = MemoryHistory()
        let rotator = IDRotator(schedule: schedule, history: history, clock: clock)
        let (ends, endsContinuation) = AsyncStream.makeStream(of: (ended: OwnID, recorded: Int).self)
        let (stream, continuation) = AsyncStream.makeStream(of: Rotation.self)
        let task = Task {
            try await rotator.run(
                onWindowEnd: { endsContinuation.yield(($0, history.all.count)) },
                onRotation: { continuation.yield($0) })
        }
        defer { task.cancel() }
        var rotations = stream.makeAsyncIterator()
        var windowEnds = ends.makeAsyncIterator()
        let first = try #require(await rotations.next()).current
        try await clock.waitForSleeps(1)
        clock.set(first.window.end)
        let end = try #require(await windowEnds.next())
        #expect(end.ended == first)
        #expect(end.recorded == 1, "the next id was recorded before the window's end was announced")
        #expect(try #require(await rotations.next()).previous == first)
    }

    /// The clock steps back between the wake at the window's end and the recording of the next
    /// id: the radio went quiet for the ended id, which is valid again, so it comes back on the air
    /// rather than leave the node dark until the clock catches up.
    @Test(.timeLimit(.minutes(1))) func aStepBackRightAfterTheWindowsEndBringsTheSameIDBack() async throws {
        let clock = SteppedClock(start)
        let history = MemoryHistory()
        let rotator = IDRotator(schedule: schedule, history: history, clock: clock)
        let (stream, continuation) = AsyncStream.makeStream(of: Rotation.self)
        let task = Task {
            try await rotator.run(
                onWindowEnd: { ended in clock.set(ended.window.end - 30) },
                onRotation: { continuation.yield($0) })
        }
        defer { task.cancel() }
        var rotations = stream.makeAsyncIterator()
        let first = try #require(await rotations.next()).current
        try await clock.waitForSleeps(1)
        clock.set(first.window.end)
        let back = try #require(await rotations.next())
        #expect(back.previous == first && back.current == first)
        #expect(history.all == [first])
    }
}
