/// Fixed channel identifiers of an LE-U logical link (Core Spec Vol 3 Part A 2.1).
public enum L2CAPChannelIdentifier {
    public static let attribute: UInt16 = 0x0004
    public static let leSignaling: UInt16 = 0x0005
    public static let securityManager: UInt16 = 0x0006
}

/// An L2CAP basic-mode frame (B-frame): payload length, channel ID, payload.
public struct L2CAPBasicFrame: Sendable, Equatable {
    public static let headerLength = 4

    public var channelID: UInt16
    public var payload: [UInt8]

    public init(channelID: UInt16, payload: [UInt8]) {
        self.channelID = channelID
        self.payload = payload
    }

    public init(decoding bytes: [UInt8]) throws(PacketDecodingError) {
        var reader = ByteReader(bytes)
        let length = Int(try reader.readUInt16("L2CAP length"))
        channelID = try reader.readUInt16("Channel ID")
        payload = try reader.readBytes(length, "L2CAP payload")
        try reader.expectEnd()
    }

    /// Fails for payloads longer than the 16-bit length field can describe.
    public func encode() throws(L2CAPError) -> [UInt8] {
        guard payload.count <= Int(UInt16.max) else { throw .payloadTooLong(length: payload.count, limit: Int(UInt16.max)) }
        var writer = ByteWriter(capacity: Self.headerLength + payload.count)
        writer.write(UInt16(payload.count))
        writer.write(channelID)
        writer.write(contentsOf: payload)
        return writer.bytes
    }
}

/// Why L2CAP could not deliver a payload.
public enum L2CAPError: Error, Equatable, Sendable, CustomStringConvertible {
    case payloadTooLong(length: Int, limit: Int)
    /// The connection this channel belonged to has closed.
    case channelClosed(connectionHandle: UInt16, channelID: UInt16)
    case hci(HCIError)

    public var description: String {
        switch self {
        case .payloadTooLong(let length, let limit): "L2CAP payload of \(length) bytes exceeds \(limit)"
        case .channelClosed(let handle, let channel):
            "L2CAP channel 0x\(String(channel, radix: 16)) on connection 0x\(String(handle, radix: 16)) is closed"
        case .hci(let error): error.description
        }
    }
}
