/// One fixed channel (ATT) on one LE connection, handed to the layer above.
public final class L2CAPChannel: L2CAPFixedChannel {
    public let connectionHandle: UInt16
    public let channelID: UInt16
    public let incoming: AsyncStream<[UInt8]>

    let continuation: AsyncStream<[UInt8]>.Continuation
    private let layer: L2CAPLayer

    init(connectionHandle: UInt16, channelID: UInt16, layer: L2CAPLayer, bufferLimit: Int) {
        self.connectionHandle = connectionHandle
        self.channelID = channelID
        self.layer = layer
        (incoming, continuation) = AsyncStream.makeStream(of: [UInt8].self, bufferingPolicy: .bufferingOldest(bufferLimit))
    }

    /// Throws `L2CAPError`.
    public func send(_ payload: [UInt8]) async throws {
        try await layer.send(payload, on: self)
    }
}
