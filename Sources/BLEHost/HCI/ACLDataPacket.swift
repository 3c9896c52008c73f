/// Packet_Boundary_Flag of an HCI ACL data packet.
public enum ACLPacketBoundary: UInt8, Sendable, Equatable {
    /// First fragment of a non-automatically-flushable L2CAP frame (host to controller on LE).
    case firstNonFlushable = 0b00
    case continuing = 0b01
    /// First fragment of an automatically flushable frame (what LE controllers send to the host).
    case firstFlushable = 0b10
    case complete = 0b11

    public var startsFrame: Bool { self == .firstNonFlushable || self == .firstFlushable }
}

/// An HCI ACL data packet: one fragment of an L2CAP frame on one connection.
public struct ACLDataPacket: Sendable, Equatable {
    public var connectionHandle: UInt16
    public var packetBoundary: ACLPacketBoundary
    public var broadcastFlag: UInt8
    public var data: [UInt8]

    public init(connectionHandle: UInt16, packetBoundary: ACLPacketBoundary, broadcastFlag: UInt8 = 0, data: [UInt8]) {
        self.connectionHandle = connectionHandle & 0x0FFF
        self.packetBoundary = packetBoundary
        self.broadcastFlag = broadcastFlag & 0b11
        self.data = data
    }

    /// Decodes a packet body: handle and flags, data length, data.
    public init(decoding body: [UInt8]) throws(PacketDecodingError) {
        var reader = ByteReader(body)
        let handleAndFlags = try reader.readUInt16("Handle")
        let length = Int(try reader.readUInt16("Data_Total_Length"))
        data = try reader.readBytes(length, "Data")
        try reader.expectEnd()
        connectionHandle = handleAndFlags & 0x0FFF
        // Two bits can only hold 0...3, each of which is a case.
        packetBoundary = ACLPacketBoundary(rawValue: UInt8((handleAndFlags >> 12) & 0b11)) ?? .continuing
        broadcastFlag = UInt8((handleAndFlags >> 14) & 0b11)
    }

    public func encode() -> [UInt8] {
        var writer = ByteWriter(capacity: 4 + data.count)
        writer.write(connectionHandle & 0x0FFF | UInt16(packetBoundary.rawValue) << 12 | UInt16(broadcastFlag) << 14)
        writer.write(UInt16(truncatingIfNeeded: data.count))
        writer.write(contentsOf: data)
        return writer.bytes
    }

    public var packet: HCIPacket { HCIPacket(type: .aclData, body: encode()) }
}
