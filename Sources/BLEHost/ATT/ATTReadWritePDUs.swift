// Reading and writing attribute values (Core Spec Vol 3 Part F 3.4.4, 3.4.5, 3.4.6).

public struct ATTReadRequest: ATTPDUCodable {
    public static let opcode = ATTOpcode.readRequest
    public var handle: UInt16

    public init(handle: UInt16) { self.handle = handle }

    public init(decoding pdu: [UInt8]) throws(PacketDecodingError) {
        var reader = try ByteReader.attParameters(of: pdu, expecting: Self.opcode)
        handle = try reader.readUInt16("attribute handle")
        try reader.expectEnd()
    }

    public func encode() -> [UInt8] {
        var writer = ByteWriter(opcode: Self.opcode, capacity: 3)
        writer.write(handle)
        return writer.bytes
    }
}

public struct ATTReadResponse: ATTAttributeValuePDU {
    public static let opcode = ATTOpcode.readResponse
    public var value: [UInt8]

    public init(value: [UInt8]) { self.value = value }
    public init(attributeValue: [UInt8]) { self.init(value: attributeValue) }
    public var attributeValue: [UInt8] { value }
}

public struct ATTReadBlobRequest: ATTPDUCodable {
    public static let opcode = ATTOpcode.readBlobRequest
    public var handle: UInt16
    public var offset: UInt16

    public init(handle: UInt16, offset: UInt16) {
        self.handle = handle
        self.offset = offset
    }

    public init(decoding pdu: [UInt8]) throws(PacketDecodingError) {
        var reader = try ByteReader.attParameters(of: pdu, expecting: Self.opcode)
        handle = try reader.readUInt16("attribute handle")
        offset = try reader.readUInt16("value offset")
        try reader.expectEnd()
    }

    public func encode() -> [UInt8] {
        var writer = ByteWriter(opcode: Self.opcode, capacity: 5)
        writer.write(handle)
        writer.write(offset)
        return writer.bytes
    }
}

public struct ATTReadBlobResponse: ATTAttributeValuePDU {
    public static let opcode = ATTOpcode.readBlobResponse
    public var partOfValue: [UInt8]

    public init(partOfValue: [UInt8]) { self.partOfValue = partOfValue }
    public init(attributeValue: [UInt8]) { self.init(partOfValue: attributeValue) }
    public var attributeValue: [UInt8] { partOfValue }
}

public struct ATTWriteRequest: ATTHandleValuePDU {
    public static let opcode = ATTOpcode.writeRequest
    public var handle: UInt16
    public var value: [UInt8]

    public init(handle: UInt16, value: [UInt8]) {
        self.handle = handle
        self.value = value
    }
}

public struct ATTWriteResponse: ATTOpcodeOnlyPDU {
    public static let opcode = ATTOpcode.writeResponse
    public init() {}
}

public struct ATTWriteCommand: ATTHandleValuePDU {
    public static let opcode = ATTOpcode.writeCommand
    public var handle: UInt16
    public var value: [UInt8]

    public init(handle: UInt16, value: [UInt8]) {
        self.handle = handle
        self.value = value
    }
}

public struct ATTPrepareWriteRequest: ATTPreparedWritePDU {
    public static let opcode = ATTOpcode.prepareWriteRequest
    public var handle: UInt16
    public var offset: UInt16
    public var partOfValue: [UInt8]

    public init(handle: UInt16, offset: UInt16, partOfValue: [UInt8]) {
        self.handle = handle
        self.offset = offset
        self.partOfValue = partOfValue
    }
}

public struct ATTPrepareWriteResponse: ATTPreparedWritePDU {
    public static let opcode = ATTOpcode.prepareWriteResponse
    public var handle: UInt16
    public var offset: UInt16
    public var partOfValue: [UInt8]

    public init(handle: UInt16, offset: UInt16, partOfValue: [UInt8]) {
        self.handle = handle
        self.offset = offset
        self.partOfValue = partOfValue
    }
}

public struct ATTExecuteWriteRequest: ATTPDUCodable {
    public static let opcode = ATTOpcode.executeWriteRequest

    public enum Flags: UInt8, Sendable {
        case cancelAllPreparedWrites = 0x00
        case writeAllPendingPreparedValues = 0x01
    }

    public var flags: Flags

    public init(flags: Flags) { self.flags = flags }

    public init(decoding pdu: [UInt8]) throws(PacketDecodingError) {
        var reader = try ByteReader.attParameters(of: pdu, expecting: Self.opcode)
        let raw = try reader.readUInt8("flags")
        guard let flags = Flags(rawValue: raw) else { throw .invalidValue(field: "flags", value: Int(raw)) }
        self.flags = flags
        try reader.expectEnd()
    }

    public func encode() -> [UInt8] { [Self.opcode.rawValue, flags.rawValue] }
}

public struct ATTExecuteWriteResponse: ATTOpcodeOnlyPDU {
    public static let opcode = ATTOpcode.executeWriteResponse
    public init() {}
}
