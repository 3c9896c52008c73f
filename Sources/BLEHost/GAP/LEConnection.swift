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

    /// The reason the controller gave for the link's end, once it has ended.
    private let disconnection = OnceSignal<HCIStatusCode>()

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

    public var isConnected: Bool { disconnection.value == nil }

    /// Waits for the link to close and returns the reason the controller gave. A cancelled caller
    /// waits on: every link ends, at the latest when the host closes.
    public func disconnected() async -> HCIStatusCode {
        await disconnection.waitThroughCancellation()
    }

    /// The first reason counts; a later one is ignored.
    func markDisconnected(reason: HCIStatusCode) {
        disconnection.fire(reason)
    }

    public var description: String { peer.description }
}
