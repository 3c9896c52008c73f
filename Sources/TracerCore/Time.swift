import Foundation

/// Seconds since 1970-01-01T00:00:00Z. All stored times are UTC Unix seconds, so daylight-saving
/// changes and time-zone settings never move a window or an encounter.
public typealias UnixSeconds = Int64

/// The wall clock, replaceable in tests.
public protocol WallClock: Sendable {
    func now() -> UnixSeconds
    /// Suspends until the wall clock reads at least `time`, or throws `CancellationError`.
    func sleep(until time: UnixSeconds) async throws
}

public struct SystemWallClock: WallClock {
    public init() {}

    public func now() -> UnixSeconds {
        UnixSeconds(Date().timeIntervalSince1970.rounded(.down))
    }

    public func sleep(until time: UnixSeconds) async throws {
        // Re-read after every wake: a step or a resume may leave the clock short of the time,
        // or carry it past.
        while true {
            let remaining = Double(time) - Date().timeIntervalSince1970
            if remaining <= 0 { return }
            if try await WallClockAlarm.wait(until: time) == nil {
                // Without the kernel's timer, short steps on the monotonic clock: a single long
                // sleep would miss a step or a suspend.
                try await Task.sleep(for: .milliseconds(Int(min(remaining, 5) * 1000) + 1))
            }
        }
    }
}

extension UnixSeconds {
    public static let secondsPerDay: UnixSeconds = 86_400
}
