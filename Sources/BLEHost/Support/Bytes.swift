/// Why a byte sequence could not be decoded. Decoders throw these instead of trapping,
/// because every byte that reaches the host stack may come from a hostile peer.
public enum PacketDecodingError: Error, Equatable, Sendable {
    /// The input ended before `field` could be read.
    case truncated(field: String, needed: Int, available: Int)
    /// A field held a value the format does not allow.
    case invalidValue(field: String, value: Int)
    /// Bytes were left over after a fixed-size structure.
    case trailingBytes(count: Int)
}

/// Reads little-endian fields from a byte buffer, throwing on underflow.
public struct ByteReader: Sendable {
    public let bytes: [UInt8]
    public private(set) var offset: Int

    public init<Bytes: Sequence>(_ bytes: Bytes) where Bytes.Element == UInt8 {
        self.bytes = Array(bytes)
        self.offset = 0
    }

    public var remainingCount: Int { bytes.count - offset }
    public var isAtEnd: Bool { offset >= bytes.count }

    public mutating func readUInt8(_ field: String) throws(PacketDecodingError) -> UInt8 {
        try ensure(1, field)
        defer { offset += 1 }
        return bytes[offset]
    }

    public mutating func readInt8(_ field: String) throws(PacketDecodingError) -> Int8 {
        Int8(bitPattern: try readUInt8(field))
    }

    public mutating func readUInt16(_ field: String) throws(PacketDecodingError) -> UInt16 {
        try ensure(2, field)
        defer { offset += 2 }
        return UInt16(bytes[offset]) | UInt16(bytes[offset + 1]) << 8
    }

    public mutating func readUInt24(_ field: String) throws(PacketDecodingError) -> UInt32 {
        try ensure(3, field)
        defer { offset += 3 }
        return UInt32(bytes[offset]) | UInt32(bytes[offset + 1]) << 8 | UInt32(bytes[offset + 2]) << 16
    }

    public mutating func readUInt32(_ field: String) throws(PacketDecodingError) -> UInt32 {
        try ensure(4, field)
        defer { offset += 4 }
        var value: UInt32 = 0
        for index in 0..<4 { value |= UInt32(bytes[offset + index]) << (8 * index) }
        return value
    }

    public mutating func readUInt64(_ field: String) throws(PacketDecodingError) -> UInt64 {
        try ensure(8, field)
        defer { offset += 8 }
        var value: UInt64 = 0
        for index in 0..<8 { value |= UInt64(bytes[offset + index]) << (8 * index) }
        return value
    }

    public mutating func readBytes(_ count: Int, _ field: String) throws(PacketDecodingError) -> [UInt8] {
        guard count >= 0 else { throw .invalidValue(field: field, value: count) }
        try ensure(count, field)
        defer { offset += count }
        return Array(bytes[offset..<offset + count])
    }

    public mutating func readRemaining() -> [UInt8] {
        defer { offset = bytes.count }
        return Array(bytes[min(offset, bytes.count)...])
    }

    /// Fails when bytes remain, for structures whose length is fixed by the format.
    public func expectEnd() throws(PacketDecodingError) {
        if remainingCount > 0 { throw .trailingBytes(count: remainingCount) }
    }

    private func ensure(_ count: Int, _ field: String) throws(PacketDecodingError) {
        if remainingCount < count {
            throw .truncated(field: field, needed: count, available: max(0, remainingCount))
        }
    }
}

/// Appends little-endian fields to a byte buffer.
public struct ByteWriter: Sendable {
    public private(set) var bytes: [UInt8] = []

    public init(capacity: Int = 0) { bytes.reserveCapacity(capacity) }

    public mutating func write(_ value: UInt8) { bytes.append(value) }
    public mutating func write(_ value: Int8) { bytes.append(UInt8(bitPattern: value)) }
    public mutating func write(_ value: UInt16) {
        bytes.append(UInt8(truncatingIfNeeded: value))
        bytes.append(UInt8(truncatingIfNeeded: value >> 8))
    }
    public mutating func writeUInt24(_ value: UInt32) {
        for index in 0..<3 { bytes.append(UInt8(truncatingIfNeeded: value >> (8 * index))) }
    }
    public mutating func write(_ value: UInt32) {
        for index in 0..<4 { bytes.append(UInt8(truncatingIfNeeded: value >> (8 * index))) }
    }
    public mutating func write(_ value: UInt64) {
        for index in 0..<8 { bytes.append(UInt8(truncatingIfNeeded: value >> (8 * index))) }
    }
    public mutating func write<Bytes: Sequence>(contentsOf value: Bytes) where Bytes.Element == UInt8 {
        bytes.append(contentsOf: value)
    }
}
