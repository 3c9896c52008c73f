// Creating, inspecting and ending LE connections.

public struct LECreateConnection: HCICommandWithStatus, Equatable {
    public static let opcode = HCIOpcode(ogf: 0x08, ocf: 0x000D)

    /// In units of 0.625 ms.
    public var scanInterval: UInt16
    public var scanWindow: UInt16
    public var initiatorFilterPolicy: UInt8
    public var peerAddressType: LEAddressType
    public var peerAddress: BluetoothAddress
    public var ownAddressType: LEAddressType
    /// In units of 1.25 ms.
    public var connectionIntervalMin: UInt16
    public var connectionIntervalMax: UInt16
    public var maxLatency: UInt16
    /// In units of 10 ms.
    public var supervisionTimeout: UInt16
    /// In units of 0.625 ms.
    public var minCELength: UInt16
    public var maxCELength: UInt16

    public init(
        peerAddressType: LEAddressType, peerAddress: BluetoothAddress, ownAddressType: LEAddressType = .random,
        scanInterval: UInt16 = 0x0060, scanWindow: UInt16 = 0x0030, initiatorFilterPolicy: UInt8 = 0,
        connectionIntervalMin: UInt16 = 0x0018, connectionIntervalMax: UInt16 = 0x0028, maxLatency: UInt16 = 0,
        supervisionTimeout: UInt16 = 0x0190, minCELength: UInt16 = 0, maxCELength: UInt16 = 0
    ) {
        self.scanInterval = scanInterval
        self.scanWindow = scanWindow
        self.initiatorFilterPolicy = initiatorFilterPolicy
        self.peerAddressType = peerAddressType
        self.peerAddress = peerAddress
        self.ownAddressType = ownAddressType
        self.connectionIntervalMin = connectionIntervalMin
        self.connectionIntervalMax = connectionIntervalMax
        self.maxLatency = maxLatency
        self.supervisionTimeout = supervisionTimeout
        self.minCELength = minCELength
        self.maxCELength = maxCELength
    }

    public func encodeParameters(into writer: inout ByteWriter) {
        writer.write(scanInterval)
        writer.write(scanWindow)
        writer.write(initiatorFilterPolicy)
        writer.write(peerAddressType.rawValue)
        peerAddress.write(to: &writer)
        writer.write(ownAddressType.rawValue)
        writer.write(connectionIntervalMin)
        writer.write(connectionIntervalMax)
        writer.write(maxLatency)
        writer.write(supervisionTimeout)
        writer.write(minCELength)
        writer.write(maxCELength)
    }
}

public struct LECreateConnectionCancel: HCICommandWithReturnParameters, Equatable {
    public typealias ReturnParameters = HCIStatusOnly
    public static let opcode = HCIOpcode(ogf: 0x08, ocf: 0x000E)
    public init() {}
    public func encodeParameters(into writer: inout ByteWriter) {}
}

public struct Disconnect: HCICommandWithStatus, Equatable {
    public static let opcode = HCIOpcode(ogf: 0x01, ocf: 0x0006)
    public var connectionHandle: UInt16
    public var reason: HCIStatusCode
    public init(connectionHandle: UInt16, reason: HCIStatusCode = .remoteUserTerminatedConnection) {
        self.connectionHandle = connectionHandle
        self.reason = reason
    }
    public func encodeParameters(into writer: inout ByteWriter) {
        writer.write(connectionHandle & 0x0FFF)
        writer.write(reason.rawValue)
    }
}

public struct ReadRSSI: HCICommandWithReturnParameters, Equatable {
    public static let opcode = HCIOpcode(ogf: 0x05, ocf: 0x0005)
    public var connectionHandle: UInt16
    public init(connectionHandle: UInt16) { self.connectionHandle = connectionHandle }
    public func encodeParameters(into writer: inout ByteWriter) { writer.write(connectionHandle & 0x0FFF) }

    public struct ReturnParameters: HCIReturnParameters, Equatable {
        public var connectionHandle: UInt16
        /// dBm; 127 means not available.
        public var rssi: Int8
        public init(decoding bytes: [UInt8]) throws(PacketDecodingError) {
            var reader = ByteReader(bytes)
            connectionHandle = try reader.readConnectionHandle("Handle")
            rssi = try reader.readInt8("RSSI")
        }
    }
}

public struct LEReadRemoteFeatures: HCICommandWithStatus, Equatable {
    public static let opcode = HCIOpcode(ogf: 0x08, ocf: 0x0016)
    public var connectionHandle: UInt16
    public init(connectionHandle: UInt16) { self.connectionHandle = connectionHandle }
    public func encodeParameters(into writer: inout ByteWriter) { writer.write(connectionHandle & 0x0FFF) }
}
