/// The H4 packet indicator that precedes every HCI packet on a UART-style byte stream
/// (and on the Linux HCI user channel socket).
public enum HCIPacketType: UInt8, Sendable, CaseIterable {
    case command = 0x01
    case aclData = 0x02
    case synchronousData = 0x03
    case event = 0x04
    case isochronousData = 0x05
}

/// One complete HCI packet: its type and the bytes after the H4 indicator (header and parameters).
public struct HCIPacket: Sendable, Equatable {
    public var type: HCIPacketType
    public var body: [UInt8]

    public init(type: HCIPacketType, body: [UInt8]) {
        self.type = type
        self.body = body
    }

    /// The packet as it travels over H4: the indicator byte, then the body.
    public var h4Encoded: [UInt8] { [type.rawValue] + body }
}
