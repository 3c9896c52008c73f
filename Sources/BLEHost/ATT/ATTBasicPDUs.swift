// Error Response and MTU exchange (Core Spec Vol 3 Part F 3.4.1, 3.4.2).

public struct ATTErrorResponse: ATTPDUCodable {
    public static let opcode = ATTOpcode.errorResponse
    public var requestOpcode: ATTOpcode
    public var handle: UInt16
    public var errorCode: ATTErrorCode

    public init(requestOpcode: ATTOpcode, handle: UInt16, errorCode: ATTErrorCode) {
        self.requestOpcode = requestOpcode
        self.handle = handle
        self.errorCode = errorCode
    }

    public init(decoding pdu: [UInt8]) throws(PacketDecodingError) {
        var reader = try ByteReader.attParameters(of: pdu, expecting: Self.opcode)
        requestOpcode = ATTOpcode(try reader.readUInt8("request opcode in error"))
        handle = try reader.readUInt16("attribute handle in error")
        errorCode = ATTErrorCode(try reader.readUInt8("error code"))
        try reader.expectEnd()
    }

    public func encode() -> [UInt8] {
        var writer = ByteWriter(opcode: Self.opcode, capacity: 5)
        writer.write(requestOpcode.rawValue)
        writer.write(handle)
        writer.write(errorCode.rawValue)
        return writer.bytes
    }
}

public struct ATTExchangeMTURequest: ATTPDUCodable {
    public static let opcode = ATTOpcode.exchangeMTURequest
    public var clientRxMTU: UInt16

    public init(clientRxMTU: UInt16) { self.clientRxMTU = clientRxMTU }

    public init(decoding pdu: [UInt8]) throws(PacketDecodingError) {
        var reader = try ByteReader.attParameters(of: pdu, expecting: Self.opcode)
        clientRxMTU = try reader.readUInt16("client rx MTU")
        try reader.expectEnd()
    }

    public func encode() -> [UInt8] {
        var writer = ByteWriter(opcode: Self.opcode, capacity: 3)
        writer.write(clientRxMTU)
        return writer.bytes
    }
}

public struct ATTExchangeMTUResponse: ATTPDUCodable {
    public static let opcode = ATTOpcode.exchangeMTUResponse
    public var serverRxMTU: UInt16

    public init(serverRxMTU: UInt16) { self.serverRxMTU = serverRxMTU }

    public init(decoding pdu: [UInt8]) throws(PacketDecodingError) {
        var reader = try ByteReader.attParameters(of: pdu, expecting: Self.opcode)
        serverRxMTU = try reader.readUInt16("server rx MTU")
        try reader.expectEnd()
    }

    public func encode() -> [UInt8] {
        var writer = ByteWriter(opcode: Self.opcode, capacity: 3)
        writer.write(serverRxMTU)
        return writer.bytes
    }
}
