/// A Bluetooth UUID in either of the two widths ATT carries (Core Spec Vol 3 Part B 2.5.1).
///
/// Equality and hashing use the 128-bit value, so `0x2800` equals
/// `00002800-0000-1000-8000-00805F9B34FB`. The width it was created or decoded with is kept
/// separately, so that a decoded PDU re-encodes byte for byte.
public struct BluetoothUUID: Hashable, Sendable, CustomStringConvertible, ExpressibleByIntegerLiteral {
    /// How the UUID travels on air: 2 octets (Bluetooth Base UUID alias) or 16 octets.
    public enum Width: Int, Sendable {
        case bits16 = 2
        case bits128 = 16
    }

    /// The 128-bit value, most significant octet first (the order of the textual form).
    public let bigEndianBytes: [UInt8]
    public let width: Width

    /// 00000000-0000-1000-8000-00805F9B34FB, most significant octet first.
    static let baseBigEndian: [UInt8] = [
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x10, 0x00, 0x80, 0x00, 0x00, 0x80, 0x5F, 0x9B, 0x34, 0xFB,
    ]

    /// A 16-bit UUID, expanded onto the Bluetooth Base UUID.
    public init(_ shortValue: UInt16) {
        var bytes = Self.baseBigEndian
        bytes[2] = UInt8(truncatingIfNeeded: shortValue >> 8)
        bytes[3] = UInt8(truncatingIfNeeded: shortValue)
        self.init(validatedBigEndianBytes: bytes, width: .bits16)
    }

    public init(integerLiteral value: UInt16) { self.init(value) }

    /// A 128-bit UUID from its two halves, as written: `BluetoothUUID(0xA09A0000_5AAA_47F2, 0x9C7F_93BDB3A65376)`.
    public init(_ mostSignificant: UInt64, _ leastSignificant: UInt64) {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(16)
        for shift in stride(from: 56, through: 0, by: -8) { bytes.append(UInt8(truncatingIfNeeded: mostSignificant >> UInt64(shift))) }
        for shift in stride(from: 56, through: 0, by: -8) { bytes.append(UInt8(truncatingIfNeeded: leastSignificant >> UInt64(shift))) }
        self.init(validatedBigEndianBytes: bytes, width: .bits128)
    }

    /// A 128-bit UUID from its 16 octets in textual (big-endian) order; nil unless exactly 16 octets.
    public init?(bigEndianBytes bytes: [UInt8]) {
        guard bytes.count == 16 else { return nil }
        self.init(validatedBigEndianBytes: bytes, width: .bits128)
    }

    private init(validatedBigEndianBytes bytes: [UInt8], width: Width) {
        self.bigEndianBytes = bytes
        self.width = width
    }

    /// Parses "a09a0000-5aaa-47f2-9c7f-93bdb3a65376" (hyphens optional) or "2800" / "0x2800".
    public init?(string: String) {
        var text = Substring(string)
        if text.hasPrefix("0x") || text.hasPrefix("0X") { text = text.dropFirst(2) }
        let hexDigits = text.filter { $0 != "-" }
        guard hexDigits.allSatisfy(\.isHexDigit) else { return nil }
        switch hexDigits.count {
        case 4:
            guard let value = UInt16(String(hexDigits), radix: 16) else { return nil }
            self.init(value)
        case 32:
            // Hyphens are only accepted in the canonical 8-4-4-4-12 places.
            if text.contains("-") {
                let groups = text.split(separator: "-", omittingEmptySubsequences: false).map(\.count)
                guard groups == [8, 4, 4, 4, 12] else { return nil }
            }
            var bytes: [UInt8] = []
            bytes.reserveCapacity(16)
            var index = hexDigits.startIndex
            while index < hexDigits.endIndex {
                let next = hexDigits.index(index, offsetBy: 2)
                guard let byte = UInt8(String(hexDigits[index..<next]), radix: 16) else { return nil }
                bytes.append(byte)
                index = next
            }
            self.init(bigEndianBytes: bytes)
        default:
            return nil
        }
    }

    /// Reads a UUID of `width` in ATT's little-endian order.
    public init(reading reader: inout ByteReader, width: Width, field: String) throws(PacketDecodingError) {
        switch width {
        case .bits16:
            self.init(try reader.readUInt16(field))
        case .bits128:
            let littleEndian = try reader.readBytes(16, field)
            self.init(validatedBigEndianBytes: littleEndian.reversed(), width: .bits128)
        }
    }

    /// Decodes the attribute value of a service declaration or a UUID field: exactly 2 or 16 octets.
    public init(littleEndianBytes bytes: [UInt8]) throws(PacketDecodingError) {
        var reader = ByteReader(bytes)
        switch bytes.count {
        case 2: try self.init(reading: &reader, width: .bits16, field: "UUID")
        case 16: try self.init(reading: &reader, width: .bits128, field: "UUID")
        default: throw .invalidValue(field: "UUID length", value: bytes.count)
        }
    }

    /// True when the value lies on the Bluetooth Base UUID, whatever width it was given in.
    public var isBaseAlias: Bool {
        bigEndianBytes[0] == 0 && bigEndianBytes[1] == 0 && Array(bigEndianBytes[4...]) == Array(Self.baseBigEndian[4...])
    }

    /// The 16-bit alias, when there is one.
    public var shortValue: UInt16? {
        guard isBaseAlias else { return nil }
        return UInt16(bigEndianBytes[2]) << 8 | UInt16(bigEndianBytes[3])
    }

    /// The on-air octets in this UUID's own width.
    public var littleEndianBytes: [UInt8] {
        switch width {
        case .bits16: return [bigEndianBytes[3], bigEndianBytes[2]]
        case .bits128: return bigEndianBytes.reversed()
        }
    }

    /// The 16 on-air octets, for PDUs whose format requires the full width.
    public var littleEndian128Bytes: [UInt8] { bigEndianBytes.reversed() }

    public static func == (lhs: BluetoothUUID, rhs: BluetoothUUID) -> Bool {
        lhs.bigEndianBytes == rhs.bigEndianBytes
    }

    public func hash(into hasher: inout Hasher) { hasher.combine(bigEndianBytes) }

    public var description: String {
        if width == .bits16, let shortValue {
            return "0x" + HexFormat.format(shortValue, digits: 4)
        }
        let hex = bigEndianBytes.map { HexFormat.format($0, digits: 2, uppercase: false) }.joined()
        var parts: [Substring] = []
        var start = hex.startIndex
        for length in [8, 4, 4, 4, 12] {
            let end = hex.index(start, offsetBy: length)
            parts.append(hex[start..<end])
            start = end
        }
        return parts.joined(separator: "-")
    }
}
