import IDRotation
import Synchronization

/// The place in force: the configured name, plus the latest rounded fix while it is fresh. The
/// gpsd client writes it; the encounter log reads it at every sighting, so a read only takes a
/// lock for a copy and never waits on the network.
public final class PlaceBoard: Sendable {
    public static let defaultMaximumFixAge: Duration = .seconds(30)

    private struct Fix {
        var position: Place.Position
        var received: ContinuousClock.Instant
    }

    public let name: String?
    /// A fix older than this is no fix: the node may have moved since.
    public let maximumFixAge: Duration
    private let fix = Mutex<Fix?>(nil)

    public init(name: String?, maximumFixAge: Duration = PlaceBoard.defaultMaximumFixAge) {
        self.name = name
        self.maximumFixAge = maximumFixAge
    }

    /// A new rounded fix, or nil when gpsd says there is none (or is gone).
    public func record(_ position: Place.Position?, at instant: ContinuousClock.Instant = .now) {
        fix.withLock { $0 = position.map { Fix(position: $0, received: instant) } }
    }

    public func current(at instant: ContinuousClock.Instant = .now) -> Place? {
        let fresh = fix.withLock { fix -> Place.Position? in
            guard let fix, instant - fix.received <= maximumFixAge else { return nil }
            return fix.position
        }
        return Place(name: name, position: fresh)
    }
}
