// Legacy LE advertising commands.

public struct LESetAdvertisingParameters: HCICommandWithReturnParameters, Equatable {
    public typealias ReturnParameters = HCIStatusOnly
    public static let opcode = HCIOpcode(ogf: 0x08, ocf: 0x0006)

    public enum AdvertisingType: UInt8, Sendable {
        case connectableUndirected = 0x00          // ADV_IND
        case connectableHighDutyDirected = 0x01    // ADV_DIRECT_IND
        case scannableUndirected = 0x02            // ADV_SCAN_IND
        case nonConnectableUndirected = 0x03       // ADV_NONCONN_IND
        case connectableLowDutyDirected = 0x04
    }

    /// In units of 0.625 ms (0x0020-0x4000).
    public var intervalMin: UInt16
    public var intervalMax: UInt16
    public var advertisingType: AdvertisingType
    public var ownAddressType: LEAddressType
    public var peerAddressType: LEAddressType
    public var peerAddress: BluetoothAddress
    /// Bit 0: channel 37, bit 1: 38, bit 2: 39.
    public var channelMap: UInt8
    public var filterPolicy: UInt8

    public init(
        intervalMin: UInt16 = 0x00A0, intervalMax: UInt16 = 0x00A0,
        advertisingType: AdvertisingType = .connectableUndirected, ownAddressType: LEAddressType = .random,
        peerAddressType: LEAddressType = .public, peerAddress: BluetoothAddress = .zero,
        channelMap: UInt8 = 0x07, filterPolicy: UInt8 = 0x00
    ) {
        self.intervalMin = intervalMin
        self.intervalMax = intervalMax
        self.advertisingType = advertisingType
        self.ownAddressType = ownAddressType
        self.peerAddressType = peerAddressType
        self.peerAddress = peerAddress
        self.channelMap = channelMap
        self.filterPolicy = filterPolicy
    }

    public func encodeParameters(into writer: inout ByteWriter) {
        writer.write(intervalMin)
        writer.write(intervalMax)
        writer.write(advertisingType.rawValue)
        writer.write(ownAddressType.rawValue)
        writer.write(peerAddressType.rawValue)
        peerAddress.write(to: &writer)
        writer.write(channelMap)
        writer.write(filterPolicy)
    }
}

/// The 31 data bytes of a legacy advertising PDU, sent zero-padded after a length byte.
public struct LegacyAdvertisingPayload: Hashable, Sendable {
    public static let capacity = 31
    public let bytes: [UInt8]

    public init(_ data: AdvertisingData) throws(AdvertisingDataError) {
        try self.init(bytes: data.encode())
    }

    public init(bytes: [UInt8]) throws(AdvertisingDataError) {
        guard bytes.count <= Self.capacity else { throw .tooLong(length: bytes.count, limit: Self.capacity) }
        self.bytes = bytes
    }

    func write(to writer: inout ByteWriter) {
        writer.write(UInt8(bytes.count))
        writer.write(contentsOf: bytes)
        writer.write(contentsOf: [UInt8](repeating: 0, count: Self.capacity - bytes.count))
    }
}

public struct LESetAdvertisingData: HCICommandWithReturnParameters, Equatable {
    public typealias ReturnParameters = HCIStatusOnly
    public static let opcode = HCIOpcode(ogf: 0x08, ocf: 0x0008)
    public var payload: LegacyAdvertisingPayload
    public init(_ payload: LegacyAdvertisingPayload) { self.payload = payload }
    public func encodeParameters(into writer: inout ByteWriter) { payload.write(to: &writer) }
}

public struct LESetScanResponseData: HCICommandWithReturnParameters, Equatable {
    public typealias ReturnParameters = HCIStatusOnly
    public static let opcode = HCIOpcode(ogf: 0x08, ocf: 0x0009)
    public var payload: LegacyAdvertisingPayload
    public init(_ payload: LegacyAdvertisingPayload) { self.payload = payload }
    public func encodeParameters(into writer: inout ByteWriter) { payload.write(to: &writer) }
}

public struct LESetAdvertisingEnable: HCICommandWithReturnParameters, Equatable {
    public typealias ReturnParameters = HCIStatusOnly
    public static let opcode = HCIOpcode(ogf: 0x08, ocf: 0x000A)
    public var isEnabled: Bool
    public init(_ isEnabled: Bool) { self.isEnabled = isEnabled }
    public func encodeParameters(into writer: inout ByteWriter) { writer.write(UInt8(isEnabled ? 1 : 0)) }
}
