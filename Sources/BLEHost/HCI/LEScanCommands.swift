// Legacy LE scanning commands.

public struct LESetScanParameters: HCICommandWithReturnParameters, Equatable {
    public typealias ReturnParameters = HCIStatusOnly
    public static let opcode = HCIOpcode(ogf: 0x08, ocf: 0x000B)

    public enum ScanType: UInt8, Sendable {
        case passive = 0x00
        case active = 0x01
    }

    public var scanType: ScanType
    /// In units of 0.625 ms.
    public var interval: UInt16
    public var window: UInt16
    public var ownAddressType: LEAddressType
    public var filterPolicy: UInt8

    public init(
        scanType: ScanType = .active, interval: UInt16 = 0x0060, window: UInt16 = 0x0030,
        ownAddressType: LEAddressType = .random, filterPolicy: UInt8 = 0x00
    ) {
        self.scanType = scanType
        self.interval = interval
        self.window = window
        self.ownAddressType = ownAddressType
        self.filterPolicy = filterPolicy
    }

    public func encodeParameters(into writer: inout ByteWriter) {
        writer.write(scanType.rawValue)
        writer.write(interval)
        writer.write(window)
        writer.write(ownAddressType.rawValue)
        writer.write(filterPolicy)
    }
}

public struct LESetScanEnable: HCICommandWithReturnParameters, Equatable {
    public typealias ReturnParameters = HCIStatusOnly
    public static let opcode = HCIOpcode(ogf: 0x08, ocf: 0x000C)
    public var isEnabled: Bool
    public var filterDuplicates: Bool
    public init(_ isEnabled: Bool, filterDuplicates: Bool = false) {
        self.isEnabled = isEnabled
        self.filterDuplicates = filterDuplicates
    }
    public func encodeParameters(into writer: inout ByteWriter) {
        writer.write(UInt8(isEnabled ? 1 : 0))
        writer.write(UInt8(filterDuplicates ? 1 : 0))
    }
}
