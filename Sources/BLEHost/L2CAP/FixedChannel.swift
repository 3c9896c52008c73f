/// One fixed L2CAP channel (for example ATT, CID 0x0004) on one LE connection, as the layer
/// above L2CAP sees it. The layer above never sees ACL fragments or connection handles.
public protocol L2CAPFixedChannel: Sendable {
    /// Sends one complete channel payload (SDU); L2CAP fragments it to the controller's buffers.
    func send(_ payload: [UInt8]) async throws
    /// The complete payloads the peer sends on this channel, in order.
    /// The sequence finishes when the connection closes.
    var incoming: AsyncStream<[UInt8]> { get }
}
