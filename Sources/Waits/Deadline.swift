/// A moment on the clock the caller injects (the host stack's `HostClock`, the server's
/// `WallClock`, a test's manual clock), as the one thing the kit needs of that clock: a sleep until
/// the moment, which throws when its task is cancelled. The kit keeps no clock of its own.
public struct Deadline: Sendable {
    fileprivate let sleepUntilDue: @Sendable () async throws -> Void

    /// `sleepUntilDue` returns once the moment has come (at once if it has), and throws when its
    /// task is cancelled.
    public init(sleepingUntilDue sleepUntilDue: @escaping @Sendable () async throws -> Void) {
        self.sleepUntilDue = sleepUntilDue
    }

    /// `instant` on one of the standard library's clocks.
    public init<C: Clock>(_ instant: C.Instant, on clock: C) {
        self.init { try await clock.sleep(until: instant, tolerance: nil) }
    }
}

/// `operation`'s result, or nil when `deadline` comes first (nil: no deadline), in which case
/// `operation`'s task is cancelled and awaited before this returns. `operation` must end promptly
/// when cancelled, as the kit's waits do.
public func withDeadline<T: Sendable>(
    _ deadline: Deadline?, _ operation: @escaping @Sendable () async -> T
) async -> T? {
    guard let deadline else { return await operation() }
    return await withTaskGroup(of: RaceEnd<T>.self) { group in
        group.addTask { .finished(await operation()) }
        group.addTask {
            do { try await deadline.sleepUntilDue() } catch { return .deadlineCancelled }
            return .deadlinePassed
        }
        defer { group.cancelAll() }
        // The deadline's sleep is cancelled only with the caller; `operation`, cancelled with it,
        // still answers.
        while let end = await group.next() {
            switch end {
            case .finished(let result): return result
            case .deadlinePassed: return nil
            case .deadlineCancelled: continue
            }
        }
        return nil
    }
}

/// How one of `withDeadline`'s two tasks ended.
private enum RaceEnd<T: Sendable>: Sendable {
    case finished(T)
    case deadlinePassed
    case deadlineCancelled
}
