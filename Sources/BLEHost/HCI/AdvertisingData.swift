/// One AD structure of advertising or scan response data: a type and its data (Core Spec Supplement Part A).
public struct AdvertisingDataStructure: Hashable, Sendable {
    public var type: UInt8
    public var data: [UInt8]

    public init(type: UInt8, data: [UInt8]) {
        self.type = type
        self.data = data
    }

    public static let flagsType: UInt8 = 0x01
    public static let incompleteList128BitServiceUUIDsType: UInt8 = 0x06
    public static let completeList128BitServiceUUIDsType: UInt8 = 0x07
    public static let shortenedLocalNameType: UInt8 = 0x08
    public static let completeLocalNameType: UInt8 = 0x09
    public static let txPowerLevelType: UInt8 = 0x0A

    /// LE General Discoverable Mode (0x02) | BR/EDR Not Supported (0x04).
    public static let generalDiscoverableLEOnlyFlags: UInt8 = 0x06

    public static func flags(_ value: UInt8) -> Self { Self(type: flagsType, data: [value]) }

    public static func completeList128BitServiceUUIDs(_ uuids: [BluetoothUUID]) -> Self {
        Self(type: completeList128BitServiceUUIDsType, data: uuids.flatMap(\.littleEndian128Bytes))
    }

    public static func txPowerLevel(_ dBm: Int8) -> Self { Self(type: txPowerLevelType, data: [UInt8(bitPattern: dBm)]) }

    public static func completeLocalName(_ name: String) -> Self { Self(type: completeLocalNameType, data: Array(name.utf8)) }
}

public enum AdvertisingDataError: Error, Equatable, Sendable {
    /// The encoded data does not fit the advertising PDU (31 bytes for legacy advertising).
    case tooLong(length: Int, limit: Int)
    /// One AD structure's data is longer than its one-byte length field allows.
    case structureTooLong(type: UInt8, length: Int)
}

/// A sequence of AD structures, as carried in advertising reports and set with LE Set Advertising Data.
public struct AdvertisingData: Hashable, Sendable {
    public var structures: [AdvertisingDataStructure]

    public init(_ structures: [AdvertisingDataStructure]) { self.structures = structures }

    /// Parses leniently, because the bytes come from any device in radio range: a zero length marks the
    /// end of significant data (the rest is padding), and a structure that overruns the buffer ends parsing.
    /// What was parsed before either is kept.
    public init(parsing bytes: [UInt8]) {
        var structures: [AdvertisingDataStructure] = []
        var offset = 0
        while offset < bytes.count {
            let length = Int(bytes[offset])
            guard length > 0, offset + 1 + length <= bytes.count else { break }
            structures.append(AdvertisingDataStructure(type: bytes[offset + 1], data: Array(bytes[(offset + 2)..<(offset + 1 + length)])))
            offset += 1 + length
        }
        self.structures = structures
    }

    public func encode() throws(AdvertisingDataError) -> [UInt8] {
        var bytes: [UInt8] = []
        for structure in structures {
            guard structure.data.count <= 254 else {
                throw .structureTooLong(type: structure.type, length: structure.data.count)
            }
            bytes.append(UInt8(structure.data.count + 1))
            bytes.append(structure.type)
            bytes.append(contentsOf: structure.data)
        }
        return bytes
    }

    public func first(ofType type: UInt8) -> AdvertisingDataStructure? { structures.first { $0.type == type } }

    public var flags: UInt8? { first(ofType: AdvertisingDataStructure.flagsType)?.data.first }

    public var txPowerLevel: Int8? {
        guard let structure = first(ofType: AdvertisingDataStructure.txPowerLevelType), structure.data.count == 1 else { return nil }
        return Int8(bitPattern: structure.data[0])
    }

    /// Service UUIDs from complete and incomplete 128-bit lists; a trailing partial UUID is ignored.
    public var serviceUUIDs128: [BluetoothUUID] {
        structures
            .filter { $0.type == AdvertisingDataStructure.completeList128BitServiceUUIDsType
                || $0.type == AdvertisingDataStructure.incompleteList128BitServiceUUIDsType }
            .flatMap { structure -> [BluetoothUUID] in
                stride(from: 0, to: structure.data.count - 15, by: 16).compactMap { start in
                    try? BluetoothUUID(littleEndianBytes: Array(structure.data[start..<(start + 16)]))
                }
            }
    }

    public var localName: String? {
        let structure = first(ofType: AdvertisingDataStructure.completeLocalNameType)
            ?? first(ofType: AdvertisingDataStructure.shortenedLocalNameType)
        return structure.map { String(decoding: $0.data, as: UTF8.self) }
    }
}
