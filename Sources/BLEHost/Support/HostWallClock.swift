import Foundation

/// Wall time in Unix seconds, for what the host reports about itself (since when a role was off).
/// Replaceable in tests. Timeouts never use it: they run on the monotonic clock, which NTP and
/// suspend cannot move.
public protocol HostWallClock: Sendable {
    func unixSeconds() -> Int64
}

public struct SystemHostWallClock: HostWallClock {
    public init() {}

    public func unixSeconds() -> Int64 {
        Int64(Date().timeIntervalSince1970.rounded(.down))
    }
}
