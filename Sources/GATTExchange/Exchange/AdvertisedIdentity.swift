import BLEHost
import IDRotation
import Synchronization

/// The id the node serves right now, and the start of its window (encounters are filed under it).
/// Changed only inside the rotation step, after the address changed, so the GATT read callback
/// never returns an id that does not belong to the address being used.
public final class AdvertisedIdentity: Sendable {
    private let current: Mutex<OwnID?>

    public init(_ ownID: OwnID? = nil) { current = Mutex(ownID) }

    public var ownID: OwnID? { current.withLock { $0 } }

    func set(_ ownID: OwnID) { current.withLock { $0 = ownID } }
}
