import BLEHost
import IDRotation
import Synchronization

/// The random address each id is advertised from, shared by every session of a node, so that a
/// controller reset changes neither: the next session advertises the same id from the same
/// address, and the address still changes only with the id.
///
/// With a new address at every session start, each reset looked like a newcomer to the whole
/// crowd: in a 20-node crowd run a node's id showed up under four addresses in one window,
/// every peer connected to each of them again, and peers that had heard an address a moment
/// before the reset spent their attempts on it after it was gone.
public final class IDAddresses: Sendable {
    private let current = Mutex<(id: OwnID, address: BluetoothAddress)?>(nil)

    public init() {}

    /// The address `ownID` is advertised from: the one it was given before, or a new one
    /// (`draw`, a non-resolvable private address) for an id not seen yet.
    public func address(
        for ownID: OwnID, draw: () -> BluetoothAddress = { BluetoothAddress.randomNonResolvablePrivate() }
    ) -> BluetoothAddress {
        current.withLock { current in
            if let current, current.id == ownID { return current.address }
            let address = draw()
            current = (ownID, address)
            return address
        }
    }
}
