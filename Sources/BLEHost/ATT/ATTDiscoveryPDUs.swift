// The PDUs that search the attribute database (Core Spec Vol 3 Part F 3.4.3, 3.4.4.1, 3.4.4.9).

public struct ATTFindInformationRequest: ATTPDUCodable {
    public static let opcode = ATTOpcode.findInformationRequest
    public var range: ATTHandleRange

    public init(range: ATTHandleRange) { self.range = range }

    public init(decoding pdu: [UInt8]) throws(PacketDecodingError) {
        var reader = try ByteReader.attParameters(of: pdu, expecting: Self.opcode)
        range = ATTHandleRange(start: try reader.readUInt16("starting handle"), end: try reader.readUInt16("ending handle"))
        try reader.expectEnd()
    }

    public func encode() -> [UInt8] {
        var writer = ByteWriter(opcode: Self.opcode, capacity: 5)
        writer.write(range.start)
        writer.write(range.end)
        return writer.bytes
    }
}

public struct ATTFindInformationResponse: ATTPDUCodable {
    public static let opcode = ATTOpcode.findInformationResponse

    public struct Entry: Sendable, Equatable {
        public var handle: UInt16
        public var type: BluetoothUUID
        public init(handle: UInt16, type: BluetoothUUID) {
            self.handle = handle
            self.type = type
        }
    }

    /// Format 0x01 carries 16-bit UUIDs, 0x02 128-bit ones; one response never mixes them.
    public var entries: [Entry]

    /// The width every entry is encoded with: 16-bit only if every UUID was given in 16 bits.
    public var format: BluetoothUUID.Width {
        entries.allSatisfy { $0.type.width == .bits16 } ? .bits16 : .bits128
    }

    public init(entries: [Entry]) { self.entries = entries }

    public init(decoding pdu: [UInt8]) throws(PacketDecodingError) {
        var reader = try ByteReader.attParameters(of: pdu, expecting: Self.opcode)
        let formatCode = try reader.readUInt8("format")
        let width: BluetoothUUID.Width
        switch formatCode {
        case 0x01: width = .bits16
        case 0x02: width = .bits128
        default: throw .invalidValue(field: "format", value: Int(formatCode))
        }
        let entrySize = 2 + width.rawValue
        guard reader.remainingCount > 0, reader.remainingCount % entrySize == 0 else {
            throw .invalidValue(field: "information data length", value: reader.remainingCount)
        }
        var entries: [Entry] = []
        while !reader.isAtEnd {
            let handle = try reader.readUInt16("handle")
            entries.append(Entry(handle: handle, type: try BluetoothUUID(reading: &reader, width: width, field: "type")))
        }
        self.entries = entries
    }

    public func encode() -> [UInt8] {
        let width = format
        var writer = ByteWriter(opcode: Self.opcode, capacity: 2 + entries.count * (2 + width.rawValue))
        writer.write(width == .bits16 ? UInt8(0x01) : UInt8(0x02))
        for entry in entries {
            writer.write(entry.handle)
            writer.write(contentsOf: width == .bits16 ? entry.type.littleEndianBytes : entry.type.littleEndian128Bytes)
        }
        return writer.bytes
    }
}

public struct ATTFindByTypeValueRequest: ATTPDUCodable {
    public static let opcode = ATTOpcode.findByTypeValueRequest
    public var range: ATTHandleRange
    /// Always a 16-bit UUID in this PDU.
    public var attributeType: UInt16
    public var value: [UInt8]

    public init(range: ATTHandleRange, attributeType: UInt16, value: [UInt8]) {
        self.range = range
        self.attributeType = attributeType
        self.value = value
    }

    public init(decoding pdu: [UInt8]) throws(PacketDecodingError) {
        var reader = try ByteReader.attParameters(of: pdu, expecting: Self.opcode)
        range = ATTHandleRange(start: try reader.readUInt16("starting handle"), end: try reader.readUInt16("ending handle"))
        attributeType = try reader.readUInt16("attribute type")
        value = reader.readRemaining()
    }

    public func encode() -> [UInt8] {
        var writer = ByteWriter(opcode: Self.opcode, capacity: 7 + value.count)
        writer.write(range.start)
        writer.write(range.end)
        writer.write(attributeType)
        writer.write(contentsOf: value)
        return writer.bytes
    }
}

public struct ATTFindByTypeValueResponse: ATTPDUCodable {
    public static let opcode = ATTOpcode.findByTypeValueResponse

    public struct HandlesInformation: Sendable, Equatable {
        public var foundHandle: UInt16
        public var groupEndHandle: UInt16
        public init(foundHandle: UInt16, groupEndHandle: UInt16) {
            self.foundHandle = foundHandle
            self.groupEndHandle = groupEndHandle
        }
    }

    public var handles: [HandlesInformation]

    public init(handles: [HandlesInformation]) { self.handles = handles }

    public init(decoding pdu: [UInt8]) throws(PacketDecodingError) {
        var reader = try ByteReader.attParameters(of: pdu, expecting: Self.opcode)
        guard reader.remainingCount > 0, reader.remainingCount % 4 == 0 else {
            throw .invalidValue(field: "handles information list length", value: reader.remainingCount)
        }
        var handles: [HandlesInformation] = []
        while !reader.isAtEnd {
            handles.append(HandlesInformation(
                foundHandle: try reader.readUInt16("found attribute handle"),
                groupEndHandle: try reader.readUInt16("group end handle")))
        }
        self.handles = handles
    }

    public func encode() -> [UInt8] {
        var writer = ByteWriter(opcode: Self.opcode, capacity: 1 + 4 * handles.count)
        for entry in handles {
            writer.write(entry.foundHandle)
            writer.write(entry.groupEndHandle)
        }
        return writer.bytes
    }
}

public struct ATTReadByTypeRequest: ATTPDUCodable {
    public static let opcode = ATTOpcode.readByTypeRequest
    public var range: ATTHandleRange
    public var attributeType: BluetoothUUID

    public init(range: ATTHandleRange, attributeType: BluetoothUUID) {
        self.range = range
        self.attributeType = attributeType
    }

    public init(decoding pdu: [UInt8]) throws(PacketDecodingError) {
        var reader = try ByteReader.attParameters(of: pdu, expecting: Self.opcode)
        range = ATTHandleRange(start: try reader.readUInt16("starting handle"), end: try reader.readUInt16("ending handle"))
        attributeType = try BluetoothUUID(littleEndianBytes: reader.readRemaining())
    }

    public func encode() -> [UInt8] {
        var writer = ByteWriter(opcode: Self.opcode, capacity: 21)
        writer.write(range.start)
        writer.write(range.end)
        writer.write(contentsOf: attributeType.littleEndianBytes)
        return writer.bytes
    }
}

public struct ATTReadByTypeResponse: ATTPDUCodable {
    public static let opcode = ATTOpcode.readByTypeResponse

    public struct Entry: Sendable, Equatable {
        public var handle: UInt16
        public var value: [UInt8]
        public init(handle: UInt16, value: [UInt8]) {
            self.handle = handle
            self.value = value
        }
    }

    /// Non-empty, every value of one length, at most 253 octets (the length field is one octet).
    public let entries: [Entry]

    /// Nil when the entries cannot form one response: none, unequal value lengths, or too long.
    public init?(entries: [Entry]) {
        guard let first = entries.first, first.value.count <= 253,
              entries.allSatisfy({ $0.value.count == first.value.count }) else { return nil }
        self.entries = entries
    }

    public init(decoding pdu: [UInt8]) throws(PacketDecodingError) {
        var reader = try ByteReader.attParameters(of: pdu, expecting: Self.opcode)
        let pairLength = Int(try reader.readUInt8("length"))
        guard pairLength >= 2 else { throw .invalidValue(field: "length", value: pairLength) }
        guard reader.remainingCount > 0, reader.remainingCount % pairLength == 0 else {
            throw .invalidValue(field: "attribute data list length", value: reader.remainingCount)
        }
        var entries: [Entry] = []
        while !reader.isAtEnd {
            let handle = try reader.readUInt16("attribute handle")
            entries.append(Entry(handle: handle, value: try reader.readBytes(pairLength - 2, "attribute value")))
        }
        self.entries = entries
    }

    public func encode() -> [UInt8] {
        let pairLength = 2 + (entries.first?.value.count ?? 0)
        var writer = ByteWriter(opcode: Self.opcode, capacity: 2 + pairLength * entries.count)
        writer.write(UInt8(truncatingIfNeeded: pairLength))
        for entry in entries {
            writer.write(entry.handle)
            writer.write(contentsOf: entry.value)
        }
        return writer.bytes
    }
}

public struct ATTReadByGroupTypeRequest: ATTPDUCodable {
    public static let opcode = ATTOpcode.readByGroupTypeRequest
    public var range: ATTHandleRange
    public var groupType: BluetoothUUID

    public init(range: ATTHandleRange, groupType: BluetoothUUID) {
        self.range = range
        self.groupType = groupType
    }

    public init(decoding pdu: [UInt8]) throws(PacketDecodingError) {
        var reader = try ByteReader.attParameters(of: pdu, expecting: Self.opcode)
        range = ATTHandleRange(start: try reader.readUInt16("starting handle"), end: try reader.readUInt16("ending handle"))
        groupType = try BluetoothUUID(littleEndianBytes: reader.readRemaining())
    }

    public func encode() -> [UInt8] {
        var writer = ByteWriter(opcode: Self.opcode, capacity: 21)
        writer.write(range.start)
        writer.write(range.end)
        writer.write(contentsOf: groupType.littleEndianBytes)
        return writer.bytes
    }
}

public struct ATTReadByGroupTypeResponse: ATTPDUCodable {
    public static let opcode = ATTOpcode.readByGroupTypeResponse

    public struct Entry: Sendable, Equatable {
        public var handle: UInt16
        public var endGroupHandle: UInt16
        public var value: [UInt8]
        public init(handle: UInt16, endGroupHandle: UInt16, value: [UInt8]) {
            self.handle = handle
            self.endGroupHandle = endGroupHandle
            self.value = value
        }
    }

    /// Non-empty, every value of one length, at most 251 octets (the length field is one octet).
    public let entries: [Entry]

    /// Nil when the entries cannot form one response: none, unequal value lengths, or too long.
    public init?(entries: [Entry]) {
        guard let first = entries.first, first.value.count <= 251,
              entries.allSatisfy({ $0.value.count == first.value.count }) else { return nil }
        self.entries = entries
    }

    public init(decoding pdu: [UInt8]) throws(PacketDecodingError) {
        var reader = try ByteReader.attParameters(of: pdu, expecting: Self.opcode)
        let entryLength = Int(try reader.readUInt8("length"))
        guard entryLength >= 4 else { throw .invalidValue(field: "length", value: entryLength) }
        guard reader.remainingCount > 0, reader.remainingCount % entryLength == 0 else {
            throw .invalidValue(field: "attribute data list length", value: reader.remainingCount)
        }
        var entries: [Entry] = []
        while !reader.isAtEnd {
            let handle = try reader.readUInt16("attribute handle")
            let endGroupHandle = try reader.readUInt16("end group handle")
            entries.append(Entry(handle: handle, endGroupHandle: endGroupHandle,
                                 value: try reader.readBytes(entryLength - 4, "attribute value")))
        }
        self.entries = entries
    }

    public func encode() -> [UInt8] {
        let entryLength = 4 + (entries.first?.value.count ?? 0)
        var writer = ByteWriter(opcode: Self.opcode, capacity: 2 + entryLength * entries.count)
        writer.write(UInt8(truncatingIfNeeded: entryLength))
        for entry in entries {
            writer.write(entry.handle)
            writer.write(entry.endGroupHandle)
            writer.write(contentsOf: entry.value)
        }
        return writer.bytes
    }
}
