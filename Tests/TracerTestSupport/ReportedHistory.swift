import IDRotation
import TracerCore

/// Own-id histories as a diagnosed node reports them, for the tests that carry one from a node's
/// store to a server (the node's exposure cycles, the console's code handed to `tracer report`).
public enum ReportedHistory {
    /// Back-to-back one-hour windows with fresh ids, from `start` until the last one that ended
    /// by `end` minus the server's default clock-skew allowance (300 s): tracer-server publishes
    /// an id only after that (issue 25), so a window ending closer to `end` would wait and make
    /// the tests depend on the minute of the hour they run in.
    public static func hourlyIDs(from start: UnixSeconds, until end: UnixSeconds) -> [OwnID] {
        stride(from: start, through: end - 3_600 - 300, by: 3_600).map {
            OwnID(id: UserID.random(), window: IDWindow(start: $0, end: $0 + 3_600))
        }
    }
}
