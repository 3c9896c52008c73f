// LE Controller commands for setup: event mask, buffers, features, random address.

public struct LESetEventMask: HCICommandWithReturnParameters, Equatable {
    public typealias ReturnParameters = HCIStatusOnly
    public static let opcode = HCIOpcode(ogf: 0x08, ocf: 0x0001)
    public var mask: UInt64

    /// Bit n enables LE subevent n+1: Connection Complete (0x01), Advertising Report (0x02),
    /// Connection Update Complete (0x03), Read Remote Features Complete (0x04), Data Length Change (0x07),
    /// Enhanced Connection Complete (0x0A), PHY Update Complete (0x0C), Extended Advertising Report (0x0D).
    /// Remote Connection Parameter Request and Long Term Key Request stay off: this host would have to answer them.
    public static let hostDefault: UInt64 = 1 << 0 | 1 << 1 | 1 << 2 | 1 << 3 | 1 << 6 | 1 << 9 | 1 << 11 | 1 << 12

    public init(mask: UInt64 = LESetEventMask.hostDefault) { self.mask = mask }
    public func encodeParameters(into writer: inout ByteWriter) { writer.write(mask) }
}

public struct LEReadBufferSize: HCICommandWithReturnParameters, Equatable {
    public static let opcode = HCIOpcode(ogf: 0x08, ocf: 0x0002)
    public init() {}
    public func encodeParameters(into writer: inout ByteWriter) {}

    public struct ReturnParameters: HCIReturnParameters, Equatable {
        /// 0 means the controller shares its BR/EDR buffers: use Read Buffer Size instead.
        public var leACLDataPacketLength: UInt16
        public var totalNumLEACLDataPackets: UInt8

        public init(decoding bytes: [UInt8]) throws(PacketDecodingError) {
            var reader = ByteReader(bytes)
            leACLDataPacketLength = try reader.readUInt16("LE_ACL_Data_Packet_Length")
            totalNumLEACLDataPackets = try reader.readUInt8("Total_Num_LE_ACL_Data_Packets")
        }
    }
}

public struct LEReadLocalSupportedFeatures: HCICommandWithReturnParameters, Equatable {
    public static let opcode = HCIOpcode(ogf: 0x08, ocf: 0x0003)
    public init() {}
    public func encodeParameters(into writer: inout ByteWriter) {}

    public struct ReturnParameters: HCIReturnParameters, Equatable {
        public var leFeatures: UInt64
        public init(decoding bytes: [UInt8]) throws(PacketDecodingError) {
            var reader = ByteReader(bytes)
            leFeatures = try reader.readUInt64("LE_Features")
        }

        public var supportsExtendedAdvertising: Bool { leFeatures & (1 << 12) != 0 }
    }
}

public struct LESetRandomAddress: HCICommandWithReturnParameters, Equatable {
    public typealias ReturnParameters = HCIStatusOnly
    public static let opcode = HCIOpcode(ogf: 0x08, ocf: 0x0005)
    public var address: BluetoothAddress
    public init(address: BluetoothAddress) { self.address = address }
    public func encodeParameters(into writer: inout ByteWriter) { address.write(to: &writer) }
}
