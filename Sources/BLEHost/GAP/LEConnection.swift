import Synchronization

/// The other end of a link, as known when it forms.
public struct LinkPeer: Sendable, Hashable, CustomStringConvertible {
    public let handle: UInt16
    public let role: LERole
    public let address: BluetoothAddress
    public let addressType: LEAddressType

    public var description: String { "link 0x\(String(handle, radix: 16)) (\(role), peer \(address))" }
}

/// One LE link, in either role, with its ATT bearer. A GATT server answers the peer on every link
/// (a peer that connected to us reads our id; one we connected to may read it too).
public final class LEConnection: Sendable, CustomStringConvertible {
    public let handle: UInt16
    public let role: LERole
    public let peerAddress: BluetoothAddress
    public let peerAddressType: LEAddressType
    public let bearer: ATTBearer
    /// The link's ATT channel in L2CAP's table, which identifies this link when its handle is reused.
    let channel: L2CAPChannel
    public var client: GATTClient { GATTClient(bearer: bearer) }

    private let disconnection = Mutex<DisconnectionState>(.connected(waiters: []))

    private enum DisconnectionState {
        case connected(waiters: [CheckedContinuation<HCIStatusCode, Never>])
        case disconnected(reason: HCIStatusCode)
    }

    public let peer: LinkPeer

    init(peer: LinkPeer, bearer: ATTBearer, channel: L2CAPChannel) {
        self.peer = peer
        self.channel = channel
        handle = peer.handle
        role = peer.role
        peerAddress = peer.address
        peerAddressType = peer.addressType
        self.bearer = bearer
    }

    public var isConnected: Bool {
        disconnection.withLock { if case .connected = $0 { true } else { false } }
    }

    /// Waits for the link to close and returns the reason the controller gave.
    public func disconnected() async -> HCIStatusCode {
        await withCheckedContinuation { continuation in
            let reason: HCIStatusCode? = disconnection.withLock { state in
                switch state {
                case .disconnected(let reason): return reason
                case .connected(var waiters):
                    waiters.append(continuation)
                    state = .connected(waiters: waiters)
                    return nil
                }
            }
            if let reason { continuation.resume(returning: reason) }
        }
    }

    func markDisconnected(reason: HCIStatusCode) {
        let waiters: [CheckedContinuation<HCIStatusCode, Never>] = disconnection.withLock { state in
            guard case .connected(let waiters) = state else { return [] }
            state = .disconnected(reason: reason)
            return waiters
        }
        for waiter in waiters { waiter.resume(returning: reason) }
    }

    public var description: String { peer.description }
}
