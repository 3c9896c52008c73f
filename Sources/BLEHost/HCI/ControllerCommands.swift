// Controller & Baseband and Informational commands used to bring a controller up.

public struct Reset: HCICommandWithReturnParameters, Equatable {
    public typealias ReturnParameters = HCIStatusOnly
    public static let opcode = HCIOpcode(ogf: 0x03, ocf: 0x0003)
    public init() {}
    public func encodeParameters(into writer: inout ByteWriter) {}
}

public struct SetEventMask: HCICommandWithReturnParameters, Equatable {
    public typealias ReturnParameters = HCIStatusOnly
    public static let opcode = HCIOpcode(ogf: 0x03, ocf: 0x0001)
    public var mask: UInt64

    /// The events this host handles: Disconnection Complete (bit 4), Encryption Change (7),
    /// Read Remote Version Information Complete (11), Hardware Error (15), Data Buffer Overflow (25),
    /// Encryption Key Refresh Complete (47) and LE Meta (61).
    public static let hostDefault: UInt64 = 1 << 4 | 1 << 7 | 1 << 11 | 1 << 15 | 1 << 25 | 1 << 47 | 1 << 61

    public init(mask: UInt64 = SetEventMask.hostDefault) { self.mask = mask }
    public func encodeParameters(into writer: inout ByteWriter) { writer.write(mask) }
}

public struct ReadLocalVersionInformation: HCICommandWithReturnParameters, Equatable {
    public static let opcode = HCIOpcode(ogf: 0x04, ocf: 0x0001)
    public init() {}
    public func encodeParameters(into writer: inout ByteWriter) {}

    public struct ReturnParameters: HCIReturnParameters, Equatable {
        public var hciVersion: UInt8
        public var hciSubversion: UInt16
        public var lmpVersion: UInt8
        public var companyIdentifier: UInt16
        public var lmpSubversion: UInt16

        public init(decoding bytes: [UInt8]) throws(PacketDecodingError) {
            var reader = ByteReader(bytes)
            hciVersion = try reader.readUInt8("HCI_Version")
            hciSubversion = try reader.readUInt16("HCI_Subversion")
            lmpVersion = try reader.readUInt8("LMP_Version")
            companyIdentifier = try reader.readUInt16("Company_Identifier")
            lmpSubversion = try reader.readUInt16("LMP_Subversion")
        }
    }
}

public struct ReadLocalSupportedCommands: HCICommandWithReturnParameters, Equatable {
    public static let opcode = HCIOpcode(ogf: 0x04, ocf: 0x0002)
    public init() {}
    public func encodeParameters(into writer: inout ByteWriter) {}

    public struct ReturnParameters: HCIReturnParameters, Equatable {
        /// 64 octets; bit `n` of octet `o` is command (o, n) of the specification's table.
        public var supportedCommands: [UInt8]

        public init(decoding bytes: [UInt8]) throws(PacketDecodingError) {
            var reader = ByteReader(bytes)
            supportedCommands = try reader.readBytes(64, "Supported_Commands")
        }

        public func isSupported(octet: Int, bit: Int) -> Bool {
            guard supportedCommands.indices.contains(octet), (0..<8).contains(bit) else { return false }
            return supportedCommands[octet] & (1 << bit) != 0
        }
    }
}

public struct ReadLocalSupportedFeatures: HCICommandWithReturnParameters, Equatable {
    public static let opcode = HCIOpcode(ogf: 0x04, ocf: 0x0003)
    public init() {}
    public func encodeParameters(into writer: inout ByteWriter) {}

    public struct ReturnParameters: HCIReturnParameters, Equatable {
        public var lmpFeatures: UInt64
        public init(decoding bytes: [UInt8]) throws(PacketDecodingError) {
            var reader = ByteReader(bytes)
            lmpFeatures = try reader.readUInt64("LMP_Features")
        }
    }
}

public struct ReadBufferSize: HCICommandWithReturnParameters, Equatable {
    public static let opcode = HCIOpcode(ogf: 0x04, ocf: 0x0005)
    public init() {}
    public func encodeParameters(into writer: inout ByteWriter) {}

    public struct ReturnParameters: HCIReturnParameters, Equatable {
        public var aclDataPacketLength: UInt16
        public var synchronousDataPacketLength: UInt8
        public var totalNumACLDataPackets: UInt16
        public var totalNumSynchronousDataPackets: UInt16

        public init(decoding bytes: [UInt8]) throws(PacketDecodingError) {
            var reader = ByteReader(bytes)
            aclDataPacketLength = try reader.readUInt16("ACL_Data_Packet_Length")
            synchronousDataPacketLength = try reader.readUInt8("Synchronous_Data_Packet_Length")
            totalNumACLDataPackets = try reader.readUInt16("Total_Num_ACL_Data_Packets")
            totalNumSynchronousDataPackets = try reader.readUInt16("Total_Num_Synchronous_Data_Packets")
        }
    }
}

public struct ReadBDADDR: HCICommandWithReturnParameters, Equatable {
    public static let opcode = HCIOpcode(ogf: 0x04, ocf: 0x0009)
    public init() {}
    public func encodeParameters(into writer: inout ByteWriter) {}

    public struct ReturnParameters: HCIReturnParameters, Equatable {
        public var address: BluetoothAddress
        public init(decoding bytes: [UInt8]) throws(PacketDecodingError) {
            var reader = ByteReader(bytes)
            address = try BluetoothAddress(reading: &reader, field: "BD_ADDR")
        }
    }
}
