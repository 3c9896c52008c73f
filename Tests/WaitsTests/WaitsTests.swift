import Synchronization
import Testing
import TestTiers
import Waits

/// A deadline at `tick` on a manual timeline: time moves only when the test advances it.
private func deadline(_ tick: Int, on timeline: ManualTimeline<Int>) -> Deadline {
    Deadline { try await timeline.sleep(until: tick) }
}

/// What a test's tasks did, in the order they did it.
private final class Journal: Sendable {
    private let entries = Mutex<[Int]>([])

    func write(_ entry: Int) { entries.withLock { $0.append(entry) } }

    var all: [Int] { entries.withLock { $0 } }
}

@Suite(.tags(.unit), .timeLimit(.minutes(1)))
struct EventCountTests {
    @Test func anEventBeforeTheWaitIsNotMissed() async {
        let events = EventCount()
        let seen = events.count
        events.announce()
        #expect(await events.wait(past: seen))
        #expect(events.count == seen + 1)
        #expect(events.waiterCount == 0)
    }

    @Test func oneAnnouncementWakesEveryWaiter() async {
        let events = EventCount()
        let waiters = (0..<8).map { _ in Task { await events.wait(past: 0) } }
        #expect(await eventually { events.waiterCount == 8 })
        events.announce()
        for waiter in waiters { #expect(await waiter.value) }
        #expect(events.waiterCount == 0)
    }

    @Test func aCancelledWaiterLeavesAndOthersStillWait() async {
        let events = EventCount()
        let cancelled = Task { await events.wait(past: 0) }
        let waiting = Task { await events.wait(past: 0) }
        // Both parked, so that the cancellation handler, not the check before parking, ends the first.
        #expect(await eventually { events.waiterCount == 2 })
        cancelled.cancel()
        #expect(await cancelled.value == false)
        #expect(events.waiterCount == 1)
        events.announce()
        #expect(await waiting.value)
    }

    @Test func aTaskCancelledBeforeWaitingDoesNotPark() async {
        let events = EventCount()
        let task = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            return await events.wait(past: 0)
        }
        #expect(await task.value == false)
        #expect(events.waiterCount == 0)
    }

    @Test func aTaskCancelledAfterTheEventStillSeesIt() async {
        let events = EventCount()
        events.announce()
        let task = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            return await events.wait(past: 0)
        }
        #expect(await task.value)
    }

    @Test func theDeadlineEndsTheWaitExactlyWhenReached() async {
        let timeline = ManualTimeline(startingAt: 0)
        let events = EventCount()
        let waiter = Task { await events.wait(past: 0, until: deadline(10, on: timeline)) }
        #expect(await eventually { events.waiterCount == 1 && timeline.pendingWakes == [10] })
        timeline.advance { _ in 9 }
        // One tick short: the deadline's sleeper is still there, and so is the waiter.
        #expect(timeline.pendingWakes == [10])
        #expect(events.waiterCount == 1)
        timeline.advance { _ in 10 }
        #expect(await waiter.value == false)
        #expect(events.waiterCount == 0)
    }

    @Test func anEventBeforeTheDeadlineEndsTheWaitAndItsTimer() async {
        let timeline = ManualTimeline(startingAt: 0)
        let events = EventCount()
        let waiter = Task { await events.wait(past: 0, until: deadline(10, on: timeline)) }
        #expect(await eventually { events.waiterCount == 1 && timeline.pendingWakes == [10] })
        timeline.advance { _ in 9 }
        events.announce()
        #expect(await waiter.value)
        // The deadline's sleeper was cancelled with the wait, not left on the clock.
        #expect(timeline.pendingWakes.isEmpty)
    }
}

@Suite(.tags(.unit), .timeLimit(.minutes(1)))
struct OnceSignalTests {
    @Test func aWaiterAfterTheValueGetsItAtOnce() async {
        let signal = OnceSignal<String>()
        #expect(signal.fire("stuck"))
        #expect(await signal.wait() == "stuck")
        #expect(signal.value == "stuck")
    }

    @Test func everyWaiterGetsTheFirstValueOnly() async {
        let signal = OnceSignal<Int>()
        let waiters = (0..<8).map { _ in Task { await signal.wait() } }
        // All parked before the value arrives: a late one would get it at once, untested.
        #expect(await eventually { signal.waiterCount == 8 })
        #expect(signal.fire(1))
        #expect(!signal.fire(2))
        for waiter in waiters { #expect(await waiter.value == 1) }
        #expect(signal.value == 1)
        #expect(signal.waiterCount == 0)
    }

    @Test func aCancelledWaiterReturnsNilAndOthersStillWait() async {
        let signal = OnceSignal<Int>()
        let cancelled = Task { await signal.wait() }
        let waiting = Task { await signal.wait() }
        #expect(await eventually { signal.waiterCount == 2 })
        cancelled.cancel()
        #expect(await cancelled.value == nil)
        #expect(signal.waiterCount == 1)
        signal.fire(7)
        #expect(await waiting.value == 7)
    }

    @Test func aTaskCancelledBeforeWaitingDoesNotWait() async {
        let signal = OnceSignal<Int>()
        let task = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            return await signal.wait()
        }
        #expect(await task.value == nil)
        #expect(signal.waiterCount == 0)
    }

    @Test func aTaskCancelledAfterTheValueStillGetsIt() async {
        let signal = OnceSignal<Int>()
        signal.fire(3)
        let task = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            return await signal.wait()
        }
        #expect(await task.value == 3)
    }

    @Test func theDeadlineEndsTheWaitWhenReachedOnly() async {
        let timeline = ManualTimeline(startingAt: 0)
        let signal = OnceSignal<Int>()
        let late = Task { await withDeadline(deadline(5, on: timeline)) { await signal.wait() } }
        let inTime = Task { await withDeadline(deadline(20, on: timeline)) { await signal.wait() } }
        #expect(await eventually { signal.waiterCount == 2 && timeline.pendingWakes == [5, 20] })
        timeline.advance { _ in 5 }
        #expect(await late.value == nil)
        signal.fire(4)
        #expect(await inTime.value == .some(4))
        #expect(timeline.pendingWakes.isEmpty)
    }
}

/// `OnceSignal.waitThroughCancellation`: the waits of the host stack whose owner must see the end
/// (an HCI command's answer or timeout, a link's end), which a cancelled caller must not cut short.
@Suite(.tags(.unit), .timeLimit(.minutes(1)))
struct OnceSignalThroughCancellationTests {
    @Test func aCancelledWaiterStaysUntilTheValue() async {
        let signal = OnceSignal<Int>()
        let waiter = Task { await signal.waitThroughCancellation() }
        #expect(await eventually { signal.waiterCount == 1 })
        waiter.cancel()
        // Parked through the cancellation: nothing took it out, and nothing resumed it.
        await Task.yield()
        #expect(signal.waiterCount == 1)
        signal.fire(9)
        #expect(await waiter.value == 9)
        #expect(signal.waiterCount == 0)
    }

    @Test func aTaskCancelledBeforeWaitingStillWaits() async {
        let signal = OnceSignal<Int>()
        let waiter = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            return await signal.waitThroughCancellation()
        }
        #expect(await eventually { signal.waiterCount == 1 })
        signal.fire(2)
        #expect(await waiter.value == 2)
    }

    @Test func aWaiterAfterTheValueGetsItAtOnce() async {
        let signal = OnceSignal<String>()
        signal.fire("answered")
        let waiter = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            return await signal.waitThroughCancellation()
        }
        #expect(await waiter.value == "answered")
        #expect(signal.waiterCount == 0)
    }

    /// The host stack's pattern: the owner's timer on the injected clock fires the signal with the
    /// timeout, so the wait ends exactly at the deadline, cancelled or not, and not a tick before.
    @Test func theOwnersTimeoutEndsACancelledWaitAtTheDeadlineOnly() async {
        let timeline = ManualTimeline(startingAt: 0)
        let answer = OnceSignal<String>()
        let timeout = Task {
            guard (try? await timeline.sleep(until: 10)) != nil else { return }
            answer.fire("timed out")
        }
        let waiter = Task { await answer.waitThroughCancellation() }
        #expect(await eventually { answer.waiterCount == 1 && timeline.pendingWakes == [10] })
        waiter.cancel()
        timeline.advance { _ in 9 }
        await Task.yield()
        #expect(answer.waiterCount == 1)
        #expect(answer.value == nil)
        timeline.advance { _ in 10 }
        #expect(await waiter.value == "timed out")
        await timeout.value
        #expect(timeline.pendingWakes.isEmpty)
    }

    @Test func waitersOfBothKindsGetTheOneValue() async {
        let signal = OnceSignal<Int>()
        let through = Task { await signal.waitThroughCancellation() }
        let plain = Task { await signal.wait() }
        #expect(await eventually { signal.waiterCount == 2 })
        #expect(signal.fire(5))
        #expect(await through.value == 5)
        #expect(await plain.value == 5)
    }
}

@Suite(.tags(.unit), .timeLimit(.minutes(1)))
struct DeadlineTests {
    @Test func noDeadlineRunsTheOperationAlone() async {
        #expect(await withDeadline(nil) { 42 } == 42)
    }

    @Test func aDeadlineAlreadyPassedEndsTheWaitAtOnce() async {
        // The deadline has passed before the wait starts: the wait ends at once, as a timeout.
        let timeline = ManualTimeline(startingAt: 10)
        let events = EventCount()
        #expect(await events.wait(past: 0, until: deadline(10, on: timeline)) == false)
        #expect(events.waiterCount == 0)
    }

    @Test func cancellingTheCallerEndsTheWaitWithoutTheDeadline() async {
        let timeline = ManualTimeline(startingAt: 0)
        let events = EventCount()
        let waiter = Task { await withDeadline(deadline(10, on: timeline)) { await events.wait(past: 0) } }
        #expect(await eventually { events.waiterCount == 1 && timeline.pendingWakes == [10] })
        waiter.cancel()
        // The operation's own answer to the cancellation, not nil: the deadline did not pass.
        #expect(await waiter.value == .some(false))
        #expect(events.waiterCount == 0)
        #expect(timeline.pendingWakes.isEmpty)
    }
}

@Suite(.tags(.unit), .timeLimit(.minutes(1)))
struct FIFOLockTests {
    @Test func theFirstTicketHoldsTheTurnAtOnce() async throws {
        let lock = FIFOLock()
        let ticket = lock.submit()
        #expect(lock.isRunning(ticket))
        try await lock.awaitTurn(ticket)
        let second = lock.submit()
        #expect(!lock.isRunning(second))
        #expect(lock.waitingCount == 1)
        lock.finish(ticket)
        #expect(lock.isRunning(second))
        #expect(lock.waitingCount == 0)
    }

    @Test func turnsFollowSubmissionNotTaskStart() async {
        let lock = FIFOLock()
        let holder = lock.submit()
        let tickets = (0..<10).map { _ in lock.submit() }
        let order = Journal()
        // Tasks start in reverse order; the tickets, taken in order, decide.
        let tasks = tickets.indices.reversed().map { index in
            Task {
                try await lock.awaitTurn(tickets[index])
                order.write(index)
                lock.finish(tickets[index])
            }
        }
        lock.finish(holder)
        for task in tasks { _ = await task.result }
        #expect(order.all == Array(0..<10))
    }

    @Test func anUrgentTicketGoesBeforeWaitingOnesButNotTheHolder() {
        let lock = FIFOLock()
        let holder = lock.submit()
        let plain = lock.submit()
        let firstUrgent = lock.submit(urgent: true)
        let secondUrgent = lock.submit(urgent: true)
        #expect(lock.isRunning(holder))
        var turns: [FIFOLock.Ticket] = []
        var current = holder
        for _ in 0..<3 {
            lock.finish(current)
            guard let next = [plain, firstUrgent, secondUrgent].first(where: lock.isRunning) else { break }
            turns.append(next)
            current = next
        }
        #expect(turns == [firstUrgent, secondUrgent, plain])
    }

    @Test func onlyOneHolderAtATimeUnderContention() async throws {
        let lock = FIFOLock()
        let journal = Journal()
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<20 {
                group.addTask {
                    try await lock.withTurn {
                        journal.write(1)  // in
                        await Task.yield()
                        journal.write(-1)  // out
                    }
                }
            }
            try await group.waitForAll()
        }
        // Every holder left before the next came in.
        #expect(journal.all == Array(repeating: [1, -1], count: 20).flatMap { $0 })
        #expect(lock.waitingCount == 0)
    }

    @Test func aCancelledWaiterLeavesTheQueue() async throws {
        let lock = FIFOLock()
        let holder = lock.submit()
        let leaving = lock.submit()
        let staying = lock.submit()
        let leaver = Task { try await lock.awaitTurn(leaving) }
        let stayer = Task { try await lock.awaitTurn(staying) }
        #expect(lock.waitingCount == 2)
        // Both parked, so that the cancellation handler, not the check before parking, withdraws the first.
        #expect(await eventually { lock.parkedCount == 2 })
        leaver.cancel()
        await #expect(throws: CancellationError.self) { try await leaver.value }
        #expect(lock.waitingCount == 1)
        lock.finish(holder)
        try await stayer.value
        #expect(lock.isRunning(staying))
    }

    /// The exposure check's turns: a cancelled caller keeps its place and still runs in order.
    @Test func aWaiterThroughCancellationKeepsItsPlaceAndRunsInOrder() async throws {
        let lock = FIFOLock()
        let holder = lock.submit()
        let journal = Journal()
        let first = Task { await lock.withTurnThroughCancellation { journal.write(1) } }
        #expect(await eventually { lock.parkedCount == 1 })
        let second = Task { await lock.withTurnThroughCancellation { journal.write(2) } }
        #expect(await eventually { lock.parkedCount == 2 })
        first.cancel()
        await Task.yield()
        // Still parked: the cancellation took nothing out.
        #expect(lock.parkedCount == 2)
        #expect(journal.all.isEmpty)
        lock.finish(holder)
        await first.value
        await second.value
        #expect(journal.all == [1, 2])
        #expect(lock.waitingCount == 0)
        // The turn is free again.
        let next = lock.submit()
        #expect(lock.isRunning(next))
    }

    @Test func aTaskCancelledBeforeWaitingThroughCancellationStillGetsItsTurn() async {
        let lock = FIFOLock()
        let holder = lock.submit()
        let waiter = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            return await lock.withTurnThroughCancellation { 7 }
        }
        #expect(await eventually { lock.parkedCount == 1 })
        lock.finish(holder)
        #expect(await waiter.value == 7)
        #expect(lock.waitingCount == 0)
    }

    @Test func aTurnGivenToATaskCancelledBeforeItWaitedPassesOn() async throws {
        let lock = FIFOLock()
        let holder = lock.submit()
        let given = lock.submit()
        let next = lock.submit()
        lock.finish(holder)
        #expect(lock.isRunning(given))
        let cancelled = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            try await lock.awaitTurn(given)
        }
        await #expect(throws: CancellationError.self) { try await cancelled.value }
        #expect(lock.isRunning(next))
        try await lock.awaitTurn(next)
    }
}

/// `ResourcePool`: the PostgreSQL store's connection slots.
@Suite(.tags(.unit), .timeLimit(.minutes(1)))
struct ResourcePoolTests {
    @Test func idleResourcesAreLentAtOnceAndKeptWhenGivenBack() async {
        let pool = ResourcePool(["a", "b"])
        let first = await pool.take()
        let second = await pool.take()
        #expect(Set([first, second]) == ["a", "b"])
        #expect(pool.occupancy == (idle: 0, waiting: 0))
        pool.giveBack(first)
        #expect(pool.occupancy == (idle: 1, waiting: 0))
        #expect(await pool.take() == first)
    }

    @Test func waitersGetResourcesGivenBackInTheOrderTheyCame() async {
        let pool = ResourcePool([0])
        let held = await pool.take()
        let journal = Journal()
        var waiters: [Task<Void, Never>] = []
        for caller in 1...3 {
            waiters.append(Task {
                await pool.withResource { _ in journal.write(caller) }
            })
            // Parked before the next one comes, so that the order of arrival is known.
            #expect(await eventually { pool.waiterCount == caller })
        }
        pool.giveBack(held)
        for waiter in waiters { await waiter.value }
        #expect(journal.all == [1, 2, 3])
        #expect(pool.occupancy == (idle: 1, waiting: 0))
    }

    @Test func aCancelledWaiterStillGetsItsResource() async {
        let pool = ResourcePool(["only"])
        let held = await pool.take()
        let waiter = Task { await pool.take() }
        #expect(await eventually { pool.waiterCount == 1 })
        waiter.cancel()
        await Task.yield()
        #expect(pool.waiterCount == 1)
        pool.giveBack(held)
        #expect(await waiter.value == "only")
        #expect(pool.occupancy == (idle: 0, waiting: 0))
    }

    @Test func neverMoreHoldersThanResourcesUnderContention() async {
        let pool = ResourcePool([1, 2, 3])
        let journal = Journal()
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<40 {
                group.addTask {
                    await pool.withResource { _ in
                        journal.write(1)  // in
                        await Task.yield()
                        journal.write(-1)  // out
                    }
                }
            }
        }
        let holders = journal.all.reduce(into: [0]) { $0.append($0.last! + $1) }
        #expect((1...3).contains(holders.max() ?? 0), "\(holders.max() ?? 0) holders at once")
        #expect(holders.last == 0)
        #expect(pool.occupancy == (idle: 3, waiting: 0))
    }
}
