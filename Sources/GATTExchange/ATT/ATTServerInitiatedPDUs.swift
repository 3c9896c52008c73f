// Values the server pushes to the client (Core Spec Vol 3 Part F 3.4.7).

public struct ATTHandleValueNotification: ATTPDUCodable {
    public static let opcode = ATTOpcode.handleValueNotification
    public var handle: UInt16
    public var value: [UInt8]

    public init(handle: UInt16, value: [UInt8]) {
        self.handle = handle
        self.value = value
    }

    public init(decoding pdu: [UInt8]) throws(PacketDecodingError) {
        var reader = try ByteReader.attParameters(of: pdu, expecting: Self.opcode)
        handle = try reader.readUInt16("attribute handle")
        value = reader.readRemaining()
    }

    public func encode() -> [UInt8] {
        var writer = ByteWriter(opcode: Self.opcode, capacity: 3 + value.count)
        writer.write(handle)
        writer.write(contentsOf: value)
        return writer.bytes
    }
}

public struct ATTHandleValueIndication: ATTPDUCodable {
    public static let opcode = ATTOpcode.handleValueIndication
    public var handle: UInt16
    public var value: [UInt8]

    public init(handle: UInt16, value: [UInt8]) {
        self.handle = handle
        self.value = value
    }

    public init(decoding pdu: [UInt8]) throws(PacketDecodingError) {
        var reader = try ByteReader.attParameters(of: pdu, expecting: Self.opcode)
        handle = try reader.readUInt16("attribute handle")
        value = reader.readRemaining()
    }

    public func encode() -> [UInt8] {
        var writer = ByteWriter(opcode: Self.opcode, capacity: 3 + value.count)
        writer.write(handle)
        writer.write(contentsOf: value)
        return writer.bytes
    }
}

public struct ATTHandleValueConfirmation: ATTPDUCodable {
    public static let opcode = ATTOpcode.handleValueConfirmation

    public init() {}

    public init(decoding pdu: [UInt8]) throws(PacketDecodingError) {
        let reader = try ByteReader.attParameters(of: pdu, expecting: Self.opcode)
        try reader.expectEnd()
    }

    public func encode() -> [UInt8] { [Self.opcode.rawValue] }
}
