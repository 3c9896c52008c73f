/// Command Complete (0x0E): the controller finished a command and returns its parameters.
public struct CommandCompleteEvent: Sendable, Equatable {
    /// How many commands the host may send now.
    public var numHCICommandPackets: UInt8
    public var opcode: HCIOpcode
    /// Starting with the status byte for every command this host sends.
    public var returnParameters: [UInt8]

    public init(numHCICommandPackets: UInt8, opcode: HCIOpcode, returnParameters: [UInt8]) {
        self.numHCICommandPackets = numHCICommandPackets
        self.opcode = opcode
        self.returnParameters = returnParameters
    }

    public init(decoding parameters: [UInt8]) throws(PacketDecodingError) {
        var reader = ByteReader(parameters)
        numHCICommandPackets = try reader.readUInt8("Num_HCI_Command_Packets")
        opcode = HCIOpcode(rawValue: try reader.readUInt16("Command_Opcode"))
        returnParameters = reader.readRemaining()
    }

    public func encode() -> [UInt8] {
        var writer = ByteWriter()
        writer.write(numHCICommandPackets)
        writer.write(opcode.rawValue)
        writer.write(contentsOf: returnParameters)
        return encodeEvent(code: HCIEvent.commandCompleteCode, parameters: writer.bytes)
    }
}

/// Command Status (0x0F): the controller accepted (or refused) a command that completes later.
public struct CommandStatusEvent: Sendable, Equatable {
    public var status: HCIStatusCode
    public var numHCICommandPackets: UInt8
    public var opcode: HCIOpcode

    public init(status: HCIStatusCode, numHCICommandPackets: UInt8, opcode: HCIOpcode) {
        self.status = status
        self.numHCICommandPackets = numHCICommandPackets
        self.opcode = opcode
    }

    public init(decoding parameters: [UInt8]) throws(PacketDecodingError) {
        var reader = ByteReader(parameters)
        status = try reader.readStatus()
        numHCICommandPackets = try reader.readUInt8("Num_HCI_Command_Packets")
        opcode = HCIOpcode(rawValue: try reader.readUInt16("Command_Opcode"))
    }

    public func encode() -> [UInt8] {
        var writer = ByteWriter()
        writer.write(status.rawValue)
        writer.write(numHCICommandPackets)
        writer.write(opcode.rawValue)
        return encodeEvent(code: HCIEvent.commandStatusCode, parameters: writer.bytes)
    }
}

/// Hardware Error (0x10): the controller failed; the host should reset it.
public struct HardwareErrorEvent: Sendable, Equatable {
    public var hardwareCode: UInt8
    public init(hardwareCode: UInt8) { self.hardwareCode = hardwareCode }
    public init(decoding parameters: [UInt8]) throws(PacketDecodingError) {
        var reader = ByteReader(parameters)
        hardwareCode = try reader.readUInt8("Hardware_Code")
    }
}
