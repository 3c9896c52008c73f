import Foundation
import Testing
import TestTiers
import TracerCore

/// The real wall clock's wait (a timerfd on CLOCK_REALTIME). Steps of the clock itself are tried
/// in the kernel bed (`KernelBedClockSteps`): setting this machine's clock would disturb every
/// other process on it.
@Suite(.tags(.unit)) struct SystemWallClockTests {
    @Test(.timeLimit(.minutes(1))) func sleepsUntilTheWallClockReadsTheTime() async throws {
        let clock = SystemWallClock()
        let wake = clock.now() + 2
        let started = ContinuousClock.now
        try await clock.sleep(until: wake)
        #expect(Date().timeIntervalSince1970 >= Double(wake))
        // At least the second or so left in the current one, and not a whole timer period late.
        #expect(started.duration(to: .now) > .milliseconds(900))
        #expect(started.duration(to: .now) < .seconds(3))
    }

    @Test(.timeLimit(.minutes(1))) func aTimeAlreadyPastReturnsAtOnce() async throws {
        let started = ContinuousClock.now
        try await SystemWallClock().sleep(until: SystemWallClock().now() - 3_600)
        #expect(started.duration(to: .now) < .milliseconds(100))
    }

    @Test(.timeLimit(.minutes(1))) func cancellingAnHoursSleepEndsItAtOnce() async throws {
        let clock = SystemWallClock()
        let sleeper = Task { try await clock.sleep(until: clock.now() + 3_600) }
        try await Task.sleep(for: .milliseconds(200))
        let cancelled = ContinuousClock.now
        sleeper.cancel()
        await #expect(throws: CancellationError.self) { try await sleeper.value }
        #expect(cancelled.duration(to: .now) < .milliseconds(500))
    }

    @Test(.timeLimit(.minutes(1))) func aTaskCancelledBeforeItSleepsDoesNotSleep() async throws {
        let clock = SystemWallClock()
        let sleeper = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            try await clock.sleep(until: clock.now() + 3_600)
        }
        await #expect(throws: CancellationError.self) { try await sleeper.value }
    }

    /// Many waits at once, each on its own timer and thread, all end on time.
    @Test(.timeLimit(.minutes(1))) func concurrentSleepsAllWake() async throws {
        let clock = SystemWallClock()
        let wake = clock.now() + 1
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<32 { group.addTask { try await clock.sleep(until: wake) } }
            try await group.waitForAll()
        }
        #expect(clock.now() >= wake)
    }
}
