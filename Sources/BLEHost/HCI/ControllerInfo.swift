/// The size and number of ACL data buffers in the controller, which bound what the host may send.
public struct ACLBufferSize: Sendable, Equatable {
    /// Largest ACL data payload per packet.
    public var packetLength: Int
    public var packetCount: Int

    public init(packetLength: Int, packetCount: Int) {
        self.packetLength = packetLength
        self.packetCount = packetCount
    }
}

/// What `HostControllerInterface.initialize()` learned about the controller.
public struct ControllerInfo: Sendable, Equatable {
    public var version: ReadLocalVersionInformation.ReturnParameters
    public var supportedCommands: [UInt8]
    public var lmpFeatures: UInt64
    public var leFeatures: UInt64
    public var publicAddress: BluetoothAddress
    public var aclBuffers: ACLBufferSize
}
