/// The Characteristic Properties octet of a characteristic declaration (Core Spec Vol 3 Part G 3.3.1.1).
public struct GATTCharacteristicProperties: OptionSet, Sendable, Hashable {
    public let rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }

    public static let broadcast = GATTCharacteristicProperties(rawValue: 0x01)
    public static let read = GATTCharacteristicProperties(rawValue: 0x02)
    public static let writeWithoutResponse = GATTCharacteristicProperties(rawValue: 0x04)
    public static let write = GATTCharacteristicProperties(rawValue: 0x08)
    public static let notify = GATTCharacteristicProperties(rawValue: 0x10)
    public static let indicate = GATTCharacteristicProperties(rawValue: 0x20)
    public static let authenticatedSignedWrites = GATTCharacteristicProperties(rawValue: 0x40)
    public static let extendedProperties = GATTCharacteristicProperties(rawValue: 0x80)
}

/// Which ATT PDU carried a write, for handlers that care.
public enum GATTWriteKind: Sendable, Equatable {
    case request
    case command
}

/// Where a characteristic's value comes from when a client reads it.
public enum GATTValueSource: Sendable {
    /// A value fixed when the database is built.
    case constant([UInt8])
    /// A value computed on every read. Throwing an `ATTErrorCode` answers the read with that
    /// code; any other error answers Unlikely Error.
    case computed(@Sendable () async throws -> [UInt8])
}

/// Accepts or rejects a written value. Throwing an `ATTErrorCode` answers a Write Request with
/// that code (a Write Command is dropped silently); any other error answers Unlikely Error.
public typealias GATTWriteHandler = @Sendable (_ value: [UInt8], _ kind: GATTWriteKind) async throws -> Void

public struct GATTCharacteristicDefinition: Sendable {
    public var uuid: BluetoothUUID
    /// Also the access rules: Read needs `.read`, Write Request `.write`,
    /// Write Command `.writeWithoutResponse`. A CCCD is added for `.notify` or `.indicate`.
    public var properties: GATTCharacteristicProperties
    public var value: GATTValueSource
    public var onWrite: GATTWriteHandler?

    public init(
        uuid: BluetoothUUID,
        properties: GATTCharacteristicProperties,
        value: GATTValueSource = .constant([]),
        onWrite: GATTWriteHandler? = nil
    ) {
        self.uuid = uuid
        self.properties = properties
        self.value = value
        self.onWrite = onWrite
    }
}

public struct GATTServiceDefinition: Sendable {
    public var uuid: BluetoothUUID
    public var isPrimary: Bool
    public var characteristics: [GATTCharacteristicDefinition]

    public init(uuid: BluetoothUUID, isPrimary: Bool = true, characteristics: [GATTCharacteristicDefinition]) {
        self.uuid = uuid
        self.isPrimary = isPrimary
        self.characteristics = characteristics
    }
}
