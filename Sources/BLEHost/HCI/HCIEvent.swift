/// An event from the controller. Codes this host does not handle decode to `.unknown`, never to an error,
/// because a controller may send any event; only malformed known events throw.
public enum HCIEvent: Sendable, Equatable {
    case commandComplete(CommandCompleteEvent)
    case commandStatus(CommandStatusEvent)
    case disconnectionComplete(DisconnectionCompleteEvent)
    case numberOfCompletedPackets(NumberOfCompletedPacketsEvent)
    case hardwareError(HardwareErrorEvent)
    case leMeta(LEMetaEvent)
    case unknown(code: UInt8, parameters: [UInt8])

    public static let commandCompleteCode: UInt8 = 0x0E
    public static let commandStatusCode: UInt8 = 0x0F
    public static let disconnectionCompleteCode: UInt8 = 0x05
    public static let numberOfCompletedPacketsCode: UInt8 = 0x13
    public static let hardwareErrorCode: UInt8 = 0x10
    public static let leMetaCode: UInt8 = 0x3E

    /// Decodes an event packet body: event code, parameter length, parameters.
    public init(decoding body: [UInt8]) throws(PacketDecodingError) {
        var reader = ByteReader(body)
        let code = try reader.readUInt8("Event_Code")
        let length = Int(try reader.readUInt8("Parameter_Total_Length"))
        let parameters = try reader.readBytes(length, "event parameters")
        try reader.expectEnd()
        switch code {
        case Self.commandCompleteCode: self = .commandComplete(try CommandCompleteEvent(decoding: parameters))
        case Self.commandStatusCode: self = .commandStatus(try CommandStatusEvent(decoding: parameters))
        case Self.disconnectionCompleteCode: self = .disconnectionComplete(try DisconnectionCompleteEvent(decoding: parameters))
        case Self.numberOfCompletedPacketsCode:
            self = .numberOfCompletedPackets(try NumberOfCompletedPacketsEvent(decoding: parameters))
        case Self.hardwareErrorCode: self = .hardwareError(try HardwareErrorEvent(decoding: parameters))
        case Self.leMetaCode: self = .leMeta(try LEMetaEvent(decoding: parameters))
        default: self = .unknown(code: code, parameters: parameters)
        }
    }
}

/// Builds an event packet body; used by encoders of the events a test double must produce.
func encodeEvent(code: UInt8, parameters: [UInt8]) -> [UInt8] {
    [code, UInt8(truncatingIfNeeded: parameters.count)] + parameters
}

extension ByteReader {
    /// A status or reason octet, the first parameter of most events.
    mutating func readStatus(_ field: String = "Status") throws(PacketDecodingError) -> HCIStatusCode {
        HCIStatusCode(rawValue: try readUInt8(field))
    }

    /// A connection handle: the low 12 bits of its two octets, the top four being reserved (or,
    /// in an ACL header, flags).
    mutating func readConnectionHandle(_ field: String = "Connection_Handle") throws(PacketDecodingError) -> UInt16 {
        try readUInt16(field) & 0x0FFF
    }

    /// A one-octet count (`countField`), then that many elements, each read by `element`.
    mutating func readCountedList<Element>(
        _ countField: String, _ element: (inout ByteReader) throws(PacketDecodingError) -> Element
    ) throws(PacketDecodingError) -> [Element] {
        let count = Int(try readUInt8(countField))
        var elements: [Element] = []
        for _ in 0..<count { elements.append(try element(&self)) }
        return elements
    }
}
