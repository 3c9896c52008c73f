import Foundation

// The one poll helper of the tests, for waits on something outside the test's control: a port a
// child process opens, a file it writes, a line it logs, an actor's state after a task it started.
// A timing check belongs on a manual clock instead (ManualHostClock, the wall clocks tests move by
// hand); a poll only bounds how long a failure takes to show. Limits are generous because a
// passing test never reaches them, while a short one (2 s) failed passing tests on 2 cores shared
// with builds.

/// Polls until `condition` holds or `timeout` passes; returns whether it held. Runs on the caller's
/// actor, so that an actor's own state can be the condition.
public func eventually(
    isolation: isolated (any Actor)? = #isolation,
    timeout: Duration = .seconds(10), every interval: Duration = .milliseconds(5), _ condition: () async throws -> Bool
) async rethrows -> Bool {
    let deadline = ContinuousClock.now + timeout
    while ContinuousClock.now < deadline {
        if try await condition() { return true }
        try? await Task.sleep(for: interval)
    }
    return try await condition()
}

/// `eventually` for synchronous harness code (process runners, Foundation `Process` waits), which
/// blocks its thread between checks instead of suspending.
public func eventuallyBlocking(
    timeout: Duration = .seconds(10), every interval: Duration = .milliseconds(5), _ condition: () throws -> Bool
) rethrows -> Bool {
    let deadline = ContinuousClock.now + timeout
    while ContinuousClock.now < deadline {
        if try condition() { return true }
        Thread.sleep(forTimeInterval: Double(interval.components.seconds) + Double(interval.components.attoseconds) / 1e18)
    }
    return try condition()
}
