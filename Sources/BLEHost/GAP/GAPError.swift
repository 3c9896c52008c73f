/// Failures of the GAP procedures (advertising, scanning, connecting), with the layer below's cause.
public enum GAPError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The controller refused or never answered a command.
    case hci(HCIError)
    /// No connection formed within the timeout; the attempt was cancelled.
    case connectionTimedOut(peer: BluetoothAddress, after: Duration)
    /// The peer kept advertising during the attempt and the controller never connected to it: a
    /// controller that listens connects at the first such advertisement, so its connect request went
    /// unanswered and it may be stuck waiting for the answer (some controllers then ignore every
    /// advertiser until reset). The attempt was cancelled.
    case peerAdvertisedWithoutConnecting(peer: BluetoothAddress, advertisements: Int)
    /// The controller reported the connection as failed.
    case connectionFailed(peer: BluetoothAddress, status: HCIStatusCode)
    /// The transport to the controller is gone; the host must be opened again.
    case controllerLost
    /// The advertising data does not fit a legacy advertisement.
    case advertisingDataTooLong(Int)
    /// The calling task was cancelled while the procedure waited for its turn; nothing was sent.
    case cancelled

    public var description: String {
        switch self {
        case .hci(let error): return "controller: \(error)"
        case .connectionTimedOut(let peer, let after): return "no connection to \(peer) within \(after)"
        case .peerAdvertisedWithoutConnecting(let peer, let advertisements):
            return "\(peer) advertised \(advertisements) times during the connection attempt and the controller did not connect"
        case .connectionFailed(let peer, let status): return "connection to \(peer) failed: \(status)"
        case .controllerLost: return "the connection to the Bluetooth controller was lost"
        case .advertisingDataTooLong(let length): return "advertising data of \(length) bytes exceeds 31"
        case .cancelled: return "cancelled before the controller was asked"
        }
    }
}
