/// A 48-bit Bluetooth device address. Printed most significant byte first ("C0:00:00:00:00:DD"),
/// carried least significant byte first on the wire.
public struct BluetoothAddress: Hashable, Sendable, Comparable, CustomStringConvertible {
    /// The address in the low 48 bits.
    public let rawValue: UInt64

    public static let zero = BluetoothAddress(rawValue: 0)

    public init(rawValue: UInt64) { self.rawValue = rawValue & 0xFFFF_FFFF_FFFF }

    /// Six bytes as they appear on the wire (least significant first).
    public init(littleEndianBytes bytes: [UInt8]) throws(PacketDecodingError) {
        var reader = ByteReader(bytes)
        self = try BluetoothAddress(reading: &reader, field: "address")
        try reader.expectEnd()
    }

    /// Parses "AA:BB:CC:DD:EE:FF" (most significant first; "-" also accepted as separator).
    public init?(string: String) {
        let parts = string.split(whereSeparator: { $0 == ":" || $0 == "-" })
        guard parts.count == 6 else { return nil }
        var value: UInt64 = 0
        for part in parts {
            guard part.count == 2, let byte = UInt8(part, radix: 16) else { return nil }
            value = value << 8 | UInt64(byte)
        }
        self.init(rawValue: value)
    }

    public init(reading reader: inout ByteReader, field: String) throws(PacketDecodingError) {
        let bytes = try reader.readBytes(6, field)
        var value: UInt64 = 0
        for (index, byte) in bytes.enumerated() { value |= UInt64(byte) << (8 * index) }
        self.init(rawValue: value)
    }

    public var littleEndianBytes: [UInt8] {
        (0..<6).map { UInt8(truncatingIfNeeded: rawValue >> (8 * $0)) }
    }

    public func write(to writer: inout ByteWriter) { writer.write(contentsOf: littleEndianBytes) }

    public var description: String {
        littleEndianBytes.reversed().map { byte in
            let digits = String(byte, radix: 16, uppercase: true)
            return digits.count == 1 ? "0" + digits : digits
        }.joined(separator: ":")
    }

    public static func < (lhs: BluetoothAddress, rhs: BluetoothAddress) -> Bool { lhs.rawValue < rhs.rawValue }

    /// The kind of random address, from its two most significant bits (Core Spec Vol 6 Part B 1.3.2).
    public var randomAddressKind: RandomAddressKind {
        switch rawValue >> 46 {
        case 0b11: .staticAddress
        case 0b01: .resolvablePrivate
        case 0b00: .nonResolvablePrivate
        default: .reserved
        }
    }

    public enum RandomAddressKind: Sendable, Equatable {
        case staticAddress, resolvablePrivate, nonResolvablePrivate, reserved
    }

    /// A fresh non-resolvable private address: top two bits 00, and the 46 random bits neither all 0 nor all 1.
    public static func randomNonResolvablePrivate() -> BluetoothAddress {
        var generator = SystemRandomNumberGenerator()
        return randomNonResolvablePrivate(using: &generator)
    }

    public static func randomNonResolvablePrivate<Generator: RandomNumberGenerator>(
        using generator: inout Generator
    ) -> BluetoothAddress {
        let randomPartMask: UInt64 = (1 << 46) - 1
        while true {
            let candidate = generator.next() & randomPartMask
            if candidate != 0, candidate != randomPartMask { return BluetoothAddress(rawValue: candidate) }
        }
    }

    /// A fresh static random address: top two bits 11, the rest neither all 0 nor all 1.
    public static func randomStatic() -> BluetoothAddress {
        var generator = SystemRandomNumberGenerator()
        let randomPartMask: UInt64 = (1 << 46) - 1
        while true {
            let candidate = generator.next() & randomPartMask
            if candidate != 0, candidate != randomPartMask { return BluetoothAddress(rawValue: 0b11 << 46 | candidate) }
        }
    }
}

/// An LE address type as HCI carries it. Unknown values are kept, never rejected, because they come from the air.
public struct LEAddressType: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }

    public static let `public` = LEAddressType(rawValue: 0x00)
    public static let random = LEAddressType(rawValue: 0x01)
    public static let publicIdentity = LEAddressType(rawValue: 0x02)
    public static let randomIdentity = LEAddressType(rawValue: 0x03)
    /// Extended advertising reports only: an anonymous advertisement with no address.
    public static let anonymous = LEAddressType(rawValue: 0xFF)

    public var description: String {
        switch self {
        case .public: "public"
        case .random: "random"
        case .publicIdentity: "public identity"
        case .randomIdentity: "random identity"
        case .anonymous: "anonymous"
        default: "address type 0x\(String(rawValue, radix: 16))"
        }
    }
}
