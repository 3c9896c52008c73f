/// A command to the kernel's Bluetooth management interface (BlueZ doc/mgmt-api.txt): opcode,
/// controller index and parameter length, each u16 little-endian, then the parameters.
struct ManagementCommand: Equatable, Sendable {
    static let readControllerIndexListOpcode: UInt16 = 0x0003
    static let readControllerInformationOpcode: UInt16 = 0x0004
    static let setPoweredOpcode: UInt16 = 0x0005
    /// The index of commands about no one controller (MGMT_INDEX_NONE).
    static let noIndex: UInt16 = 0xffff

    let opcode: UInt16
    let index: UInt16
    let parameters: [UInt8]

    static func setPowered(index: UInt16, on: Bool) -> ManagementCommand {
        ManagementCommand(opcode: setPoweredOpcode, index: index, parameters: [on ? 0x01 : 0x00])
    }

    /// The controllers the management interface manages (those a user channel holds are left out).
    static func readControllerIndexList() -> ManagementCommand {
        ManagementCommand(opcode: readControllerIndexListOpcode, index: noIndex, parameters: [])
    }

    /// One controller's address, version, manufacturer, settings, class and names.
    static func readControllerInformation(index: UInt16) -> ManagementCommand {
        ManagementCommand(opcode: readControllerInformationOpcode, index: index, parameters: [])
    }

    func encode() -> [UInt8] {
        var bytes = [UInt8]()
        bytes.reserveCapacity(6 + parameters.count)
        for field in [opcode, index, UInt16(truncatingIfNeeded: parameters.count)] {
            bytes.append(UInt8(truncatingIfNeeded: field))
            bytes.append(UInt8(truncatingIfNeeded: field >> 8))
        }
        return bytes + parameters
    }
}

enum ManagementDecodingError: Error, Equatable, Sendable, CustomStringConvertible {
    case tooShort(needed: Int, got: Int)
    case lengthMismatch(declared: Int, actual: Int)

    var description: String {
        switch self {
        case .tooShort(let needed, let got): "management packet too short: needs \(needed) bytes, got \(got)"
        case .lengthMismatch(let declared, let actual): "management packet declares \(declared) parameter bytes but carries \(actual)"
        }
    }
}

/// The return parameters of Read Controller Index List: a u16 count, then that many u16 indices.
func decodeControllerIndexList(_ returned: some Collection<UInt8>) throws(ManagementDecodingError) -> [UInt16] {
    let bytes = Array(returned)
    guard bytes.count >= 2 else { throw .tooShort(needed: 2, got: bytes.count) }
    let count = Int(UInt16(bytes[0]) | UInt16(bytes[1]) << 8)
    guard bytes.count == 2 + 2 * count else { throw .lengthMismatch(declared: 2 * count, actual: bytes.count - 2) }
    return (0..<count).map { UInt16(bytes[2 + 2 * $0]) | UInt16(bytes[3 + 2 * $0]) << 8 }
}

/// The return parameters of Read Controller Information (mgmt-api.txt): address (6 bytes, least
/// significant first), version, manufacturer, supported and current settings, class of device,
/// name (249 bytes) and short name (11 bytes), 280 bytes in all.
struct ManagementControllerInformation: Equatable, Sendable {
    static let size = 280
    /// Bit 0 of the settings: the controller is powered.
    static let poweredSetting: UInt32 = 1 << 0
    /// Bit 9 of the settings: Low Energy is enabled.
    static let lowEnergySetting: UInt32 = 1 << 9

    /// As people write it: most significant byte first, colon-separated.
    let address: String
    let manufacturer: UInt16
    let supportedSettings: UInt32
    let currentSettings: UInt32
    let name: String

    var isPowered: Bool { currentSettings & Self.poweredSetting != 0 }

    init(address: String, manufacturer: UInt16, supportedSettings: UInt32, currentSettings: UInt32, name: String) {
        self.address = address
        self.manufacturer = manufacturer
        self.supportedSettings = supportedSettings
        self.currentSettings = currentSettings
        self.name = name
    }

    init(decoding returned: some Collection<UInt8>) throws(ManagementDecodingError) {
        let bytes = Array(returned)
        guard bytes.count >= Self.size else { throw .tooShort(needed: Self.size, got: bytes.count) }
        address = formatBluetoothAddress(bytes[0..<6])
        manufacturer = UInt16(bytes[7]) | UInt16(bytes[8]) << 8
        supportedSettings = Self.u32(bytes, 9)
        currentSettings = Self.u32(bytes, 13)
        let nameBytes = bytes[20..<269].prefix { $0 != 0 }
        name = String(decoding: nameBytes, as: UTF8.self)
    }

    private static func u32(_ bytes: [UInt8], _ offset: Int) -> UInt32 {
        (0..<4).reduce(UInt32(0)) { $0 | UInt32(bytes[offset + $1]) << (8 * $1) }
    }
}

/// "00:1B:DC:07:32:A1" from an address as the kernel stores it, least significant byte first.
func formatBluetoothAddress(_ littleEndian: some Collection<UInt8>) -> String {
    let digits = Array("0123456789ABCDEF")
    return littleEndian.reversed().map { String([digits[Int($0 >> 4)], digits[Int($0 & 0x0f)]]) }.joined(separator: ":")
}

/// An event from the management interface. Only the replies to a command are told apart; every
/// other event (new settings, index added …) is kept as `other` so that a reader can skip it.
struct ManagementEvent: Equatable, Sendable {
    static let commandCompleteCode: UInt16 = 0x0001
    static let commandStatusCode: UInt16 = 0x0002

    enum Kind: Equatable, Sendable {
        /// The command ran; `status` 0 is success, `returned` its return parameters.
        case commandComplete(opcode: UInt16, status: UInt8, returned: [UInt8])
        /// The command was refused or is pending (status only).
        case commandStatus(opcode: UInt16, status: UInt8)
        case other(code: UInt16, parameters: [UInt8])
    }

    let index: UInt16
    let kind: Kind

    init(index: UInt16, kind: Kind) {
        self.index = index
        self.kind = kind
    }

    init(decoding bytes: some Collection<UInt8>) throws(ManagementDecodingError) {
        let bytes = Array(bytes)
        guard bytes.count >= 6 else { throw .tooShort(needed: 6, got: bytes.count) }
        let code = Self.u16(bytes, 0)
        index = Self.u16(bytes, 2)
        let length = Int(Self.u16(bytes, 4))
        let parameters = Array(bytes[6...])
        guard parameters.count == length else { throw .lengthMismatch(declared: length, actual: parameters.count) }
        switch code {
        case Self.commandCompleteCode, Self.commandStatusCode:
            guard parameters.count >= 3 else { throw .tooShort(needed: 9, got: bytes.count) }
            let opcode = Self.u16(parameters, 0)
            kind = code == Self.commandCompleteCode
                ? .commandComplete(opcode: opcode, status: parameters[2], returned: Array(parameters[3...]))
                : .commandStatus(opcode: opcode, status: parameters[2])
        default:
            kind = .other(code: code, parameters: parameters)
        }
    }

    /// The reply's opcode and status when this event answers a command.
    var reply: (opcode: UInt16, status: UInt8)? {
        switch kind {
        case .commandComplete(let opcode, let status, _), .commandStatus(let opcode, let status): (opcode, status)
        case .other: nil
        }
    }

    private static func u16(_ bytes: [UInt8], _ offset: Int) -> UInt16 {
        UInt16(bytes[offset]) | UInt16(bytes[offset + 1]) << 8
    }

    /// The management interface's status codes, as a person reads them.
    static func describeStatus(_ status: UInt8) -> String {
        let name: String = switch status {
        case 0x00: "Success"
        case 0x01: "Unknown Command"
        case 0x03: "Failed"
        case 0x0a: "Busy"
        case 0x0b: "Rejected"
        case 0x0c: "Not Supported"
        case 0x0d: "Invalid Parameters"
        case 0x0e: "Disconnected"
        case 0x0f: "Not Powered"
        case 0x10: "Cancelled"
        case 0x11: "Invalid Index"
        case 0x12: "RFKilled"
        case 0x14: "Permission Denied"
        default: "status"
        }
        return "\(name) (0x\(String(status, radix: 16)))"
    }
}
