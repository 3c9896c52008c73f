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
        // Sleep in short steps: the wall clock can jump (NTP, suspend), and a single long sleep
        // on the monotonic clock would then miss the rotation.
        while true {
            let remaining = Double(time) - Date().timeIntervalSince1970
            if remaining <= 0 { return }
            try await Task.sleep(for: .milliseconds(Int(min(remaining, 5) * 1000) + 1))
        }
    }
}

extension UnixSeconds {
    public static let secondsPerDay: UnixSeconds = 86_400
}
