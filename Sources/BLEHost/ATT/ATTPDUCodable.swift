/// One ATT PDU type: the opcode octet followed by its parameters (Core Spec Vol 3 Part F 3.3).
/// `init(decoding:)` takes and `encode()` returns the whole PDU, opcode included.
public protocol ATTPDUCodable: Sendable, Equatable {
    static var opcode: ATTOpcode { get }
    init(decoding pdu: [UInt8]) throws(PacketDecodingError)
    func encode() -> [UInt8]
}

extension ByteReader {
    /// A reader positioned after the opcode, once the opcode is confirmed to be `expected`.
    static func attParameters(of pdu: [UInt8], expecting expected: ATTOpcode) throws(PacketDecodingError) -> ByteReader {
        var reader = ByteReader(pdu)
        let opcode = try reader.readUInt8("opcode")
        guard opcode == expected.rawValue else { throw .invalidValue(field: "opcode", value: Int(opcode)) }
        return reader
    }
}

extension ByteWriter {
    init(opcode: ATTOpcode, capacity: Int = 8) {
        self.init(capacity: capacity)
        write(opcode.rawValue)
    }
}

/// The PDUs that are their opcode alone (Write Response, Execute Write Response, Handle Value
/// Confirmation): one codec for all of them.
public protocol ATTOpcodeOnlyPDU: ATTPDUCodable {
    init()
}

extension ATTOpcodeOnlyPDU {
    public init(decoding pdu: [UInt8]) throws(PacketDecodingError) {
        let reader = try ByteReader.attParameters(of: pdu, expecting: Self.opcode)
        try reader.expectEnd()
        self.init()
    }

    public func encode() -> [UInt8] { [Self.opcode.rawValue] }
}

/// The responses laid out as opcode, then an attribute value or part of one up to the end (Read
/// Response, Read Blob Response): one codec for both.
public protocol ATTAttributeValuePDU: ATTPDUCodable {
    /// Every byte after the opcode.
    var attributeValue: [UInt8] { get }
    init(attributeValue: [UInt8])
}

extension ATTAttributeValuePDU {
    public init(decoding pdu: [UInt8]) throws(PacketDecodingError) {
        var reader = try ByteReader.attParameters(of: pdu, expecting: Self.opcode)
        self.init(attributeValue: reader.readRemaining())
    }

    public func encode() -> [UInt8] { [Self.opcode.rawValue] + attributeValue }
}

/// The PDUs laid out as opcode, attribute handle, value (Write Request and Command, Handle Value
/// Notification and Indication): one codec for all of them.
public protocol ATTHandleValuePDU: ATTPDUCodable {
    var handle: UInt16 { get }
    var value: [UInt8] { get }
    init(handle: UInt16, value: [UInt8])
}

extension ATTHandleValuePDU {
    public init(decoding pdu: [UInt8]) throws(PacketDecodingError) {
        var reader = try ByteReader.attParameters(of: pdu, expecting: Self.opcode)
        let handle = try reader.readUInt16("attribute handle")
        self.init(handle: handle, value: reader.readRemaining())
    }

    public func encode() -> [UInt8] {
        var writer = ByteWriter(opcode: Self.opcode, capacity: 3 + value.count)
        writer.write(handle)
        writer.write(contentsOf: value)
        return writer.bytes
    }
}

/// Prepare Write Request and its response share one layout (the response echoes the request):
/// opcode, attribute handle, value offset, part of the value.
public protocol ATTPreparedWritePDU: ATTPDUCodable {
    var handle: UInt16 { get }
    var offset: UInt16 { get }
    var partOfValue: [UInt8] { get }
    init(handle: UInt16, offset: UInt16, partOfValue: [UInt8])
}

extension ATTPreparedWritePDU {
    public init(decoding pdu: [UInt8]) throws(PacketDecodingError) {
        var reader = try ByteReader.attParameters(of: pdu, expecting: Self.opcode)
        let handle = try reader.readUInt16("attribute handle")
        let offset = try reader.readUInt16("value offset")
        self.init(handle: handle, offset: offset, partOfValue: reader.readRemaining())
    }

    public func encode() -> [UInt8] {
        var writer = ByteWriter(opcode: Self.opcode, capacity: 5 + partOfValue.count)
        writer.write(handle)
        writer.write(offset)
        writer.write(contentsOf: partOfValue)
        return writer.bytes
    }
}

/// A handle range for the requests that search part of the attribute database.
public struct ATTHandleRange: Sendable, Hashable {
    public var start: UInt16
    public var end: UInt16
    public init(start: UInt16, end: UInt16) {
        self.start = start
        self.end = end
    }
    public static let all = ATTHandleRange(start: 0x0001, end: 0xFFFF)
    /// Handle 0 is reserved and a range must not run backwards (3.4.3.1).
    public var isValid: Bool { start != 0 && start <= end }
    public func contains(_ handle: UInt16) -> Bool { start <= handle && handle <= end }
}
