import IDRotation
import Synchronization
import Testing
import TestTiers
import TracerCore

@Suite(.tags(.unit)) struct IDRotatorTests {
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
        // Far back (a dead RTC battery): still no return to an old id, no new id either, and
        // no key for the day the clock now shows.
        clock.set(start - 86_400)
        #expect(try await rotator.currentID() == second)
        #expect(history.all.count == 2)
        #expect(history.dailyKeys.map(\.day) == [UTCDay(containing: start)])

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

    // MARK: Daily keys

    @Test func idsDeriveFromTheDaysRecordedKey() async throws {
        let clock = ManualClock(start)
        let history = MemoryHistory()
        let rotator = IDRotator(schedule: schedule, history: history, clock: clock)
        var ids: [OwnID] = [try await rotator.currentID()]
        for _ in 0..<5 {
            clock.set(ids.last!.window.end)
            ids.append(try #require(try await rotator.rotateIfDue()).current)
        }
        let record = try #require(history.dailyKeys.first)
        #expect(history.dailyKeys.count == 1)
        #expect(record.day == UTCDay(containing: start) && record.intervalSeconds == 900)
        #expect(ids.map(\.id) == ids.map { derived($0, key: record.key) })
        #expect(Set(ids.map(\.id)).count == ids.count)
    }

    @Test func aRestartOnTheSameDayReusesTheDaysKeyAndDerivesTheSameIDs() async throws {
        let clock = ManualClock(start)
        let history = MemoryHistory()
        let before = try await IDRotator(schedule: schedule, history: history, clock: clock).currentID()
        let dayKey = try #require(history.dailyKeys.first).key

        // Restarted two windows later the same day; the new process would draw `other` if it
        // ignored the recorded key.
        let other = DailyKey.random()
        clock.set(before.window.end + 900 + 30)
        let restarted = IDRotator(schedule: schedule, history: history, clock: clock, makeKey: { other })
        let after = try #require(try await restarted.rotateIfDue()).current
        #expect(after.window.start == before.window.end + 900)
        #expect(history.dailyKeys.map(\.key) == [dayKey])
        #expect(after.id == derived(after, key: dayKey))
        #expect(after.id != derived(after, key: other))

        // A second restart inside that window resumes the id it recorded.
        clock.advance(60)
        let resumed = try #require(try await IDRotator(schedule: schedule, history: history, clock: clock, makeKey: { other }).rotateIfDue())
        #expect(resumed.current == after)
        #expect(history.dailyKeys.count == 1)
    }

    @Test func aNewDayDrawsANewKey() async throws {
        let lateEvening: UnixSeconds = 1_795_391_400  // 2026-11-22 23:50:00 UTC
        let clock = ManualClock(lateEvening)
        let history = MemoryHistory()
        let rotator = IDRotator(schedule: schedule, history: history, clock: clock)
        let beforeMidnight = try await rotator.currentID()
        clock.set(beforeMidnight.window.end)
        let afterMidnight = try #require(try await rotator.rotateIfDue()).current
        #expect(afterMidnight.window.start == UTCDay(number: 20_780).start)

        let keys = history.dailyKeys
        #expect(keys.map(\.day) == [UTCDay(number: 20_779), UTCDay(number: 20_780)])
        #expect(keys[0].key != keys[1].key)
        #expect(beforeMidnight.id == derived(beforeMidnight, key: keys[0].key))
        #expect(afterMidnight.id == derived(afterMidnight, key: keys[1].key))
    }

    /// With an interval that does not divide a day, the window whose slot begins before midnight
    /// ends after it and still uses the earlier day's key.
    @Test func aWindowCrossingMidnightUsesTheKeyOfTheDayItStartsIn() async throws {
        let seven = try RotationSchedule(intervalSeconds: 7)
        let slotBeforeMidnight: UnixSeconds = 256_472_228 * 7  // 2026-11-21 23:59:56 UTC
        let clock = ManualClock(slotBeforeMidnight + 1)
        let history = MemoryHistory()
        let rotator = IDRotator(schedule: seven, history: history, clock: clock)
        let crossing = try await rotator.currentID()
        #expect(crossing.window == IDWindow(start: slotBeforeMidnight, end: slotBeforeMidnight + 7))
        #expect(UTCDay(containing: crossing.window.end) == UTCDay(number: 20_779))
        clock.set(crossing.window.end)
        let next = try #require(try await rotator.rotateIfDue()).current

        let keys = history.dailyKeys
        #expect(keys.map(\.day) == [UTCDay(number: 20_778), UTCDay(number: 20_779)])
        #expect(crossing.id == derived(crossing, key: keys[0].key, interval: 7))
        #expect(next.id == derived(next, key: keys[1].key, interval: 7))
    }

    /// Another rotation interval on the same day draws its own key: one key never derives ids
    /// under two interval layouts.
    @Test func anotherIntervalOnTheSameDayHasItsOwnKey() async throws {
        let clock = ManualClock(start)
        let history = MemoryHistory()
        let first = try await IDRotator(schedule: schedule, history: history, clock: clock).currentID()
        clock.set(first.window.end)
        let tenMinutes = try RotationSchedule(intervalSeconds: 600)
        let second = try #require(try await IDRotator(schedule: tenMinutes, history: history, clock: clock).rotateIfDue()).current
        let keys = history.dailyKeys
        #expect(keys.map(\.intervalSeconds) == [900, 600])
        #expect(keys[0].key != keys[1].key)
        #expect(second.id == derived(second, key: keys[1].key, interval: 600))
    }

    /// The key must be recorded before an id derived from it is: if recording it fails, no id is
    /// recorded or handed out.
    @Test func noIDWhenTheKeyCannotBeRecorded() async throws {
        let history = KeylessHistory()
        let rotator = IDRotator(schedule: schedule, history: history, clock: ManualClock(start))
        await #expect(throws: KeylessHistory.DiskFull.self) { try await rotator.rotateIfDue() }
        #expect(history.all.isEmpty)
    }

    /// Issue 38: an id the store cannot record is never handed out, and the rotator does not pass
    /// off the ended window's id as current either: it throws (the exchange then goes off the air)
    /// until the store works again, then records and hands out the id of the window then current.
    @Test func anIDThatCannotBeRecordedIsNeverHandedOutAndRecoveryTakesTheCurrentWindow() async throws {
        let clock = ManualClock(start)
        let history = MemoryHistory()
        let rotator = IDRotator(schedule: schedule, history: history, clock: clock)
        let first = try await rotator.currentID()

        history.refusesWrites.withLock { $0 = true }
        clock.set(first.window.end + 30)
        await #expect(throws: StoreError.self) { try await rotator.currentID() }
        await #expect(throws: StoreError.self) { try await rotator.rotateIfDue() }
        #expect(history.all == [first])
        // The rotation loop ends with the error rather than waiting on with the old id.
        await #expect(throws: StoreError.self) { try await rotator.run { _ in } }

        // Dark for more than a whole window: the next id is for the window of now, not the one after `first`.
        clock.set(first.window.end + 900 + 10)
        history.refusesWrites.withLock { $0 = false }
        let next = try await rotator.currentID()
        #expect(next.window == IDWindow(start: first.window.end + 900, end: first.window.end + 1800))
        #expect(history.all == [first, next])
    }

    /// What a running node says of a store error (issue 38 review): nothing is kept for an id; a
    /// fix that replaces the database stops the node first; never "try again" (it retries itself).
    @Test func storeErrorsWhileRunningSayWhatTheNodeKeepsAndWhatToDo() {
        let path = "/var/lib/tracer/tracer.db"
        let errors: [StoreError] = [
            .noHomeDirectory, .cannotCreateDirectory(path: "/var/lib/tracer", reason: "EACCES"), .cannotCreateFile(path: path, reason: "EACCES"),
            .notATracerDatabase(path: path), .newerSchema(path: path, unknownMigrations: ["v9"]), .busy(path: path), .readOnly(path: path),
            .diskFull(path: path), .damaged(path: path, detail: "malformed"), .sqlite(path: path, detail: "I/O error"),
            .invalidRetention(encounterDays: 14, ownIDDays: 21), .readOnlyFileSystem(path: path),
        ]
        for error in errors {
            let ids = error.whileRunning(.ids), encounters = error.whileRunning(.encounters)
            #expect(!ids.contains("kept in memory"), "\(ids)")
            #expect(encounters.contains("Encounters are kept in memory"), "\(encounters)")
            #expect(!ids.lowercased().contains("try again") && !encounters.lowercased().contains("try again"), "\(ids)")
        }
        for error in [StoreError.damaged(path: path, detail: "malformed"), .notATracerDatabase(path: path), .readOnlyFileSystem(path: path)] {
            #expect(error.whileRunning(.ids).contains("stop the node first (`systemctl stop tracer`), then"), "\(error)")
        }
        // No retry mends a file system the kernel turned read-only: nothing promises the node
        // comes back by itself, and the encounters held in memory are said to go to the runtime
        // directory at its stop (`EncounterSpill`).
        let readOnly = StoreError.readOnlyFileSystem(path: path)
        #expect(!readOnly.whileRunning(.ids).contains("advertises again") && readOnly.whileRunning(.ids).contains("fsck"))
        #expect(readOnly.whileRunning(.encounters).hasSuffix("Encounters are kept in memory, then at a stop in its runtime directory."))
        #expect(readOnly.description.contains("fsck") && readOnly.description.contains(path))
        #expect(StoreError.diskFull(path: path) == .diskFull(path: path))
        #expect(StoreError.diskFull(path: path) != .busy(path: path))
    }

    private func derived(_ own: OwnID, key: DailyKey, interval: Int64 = 900) -> UserID {
        let derivation = try! IDDerivation(intervalSeconds: interval)
        return derivation.id(key: key, windowIndex: derivation.windowIndex(ofWindowStartingAt: own.window.start)!)
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
