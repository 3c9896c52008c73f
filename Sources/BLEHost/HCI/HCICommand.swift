/// An HCI command opcode: OGF in the top 6 bits, OCF in the low 10.
public struct HCIOpcode: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: UInt16
    public init(rawValue: UInt16) { self.rawValue = rawValue }
    public init(ogf: UInt8, ocf: UInt16) { rawValue = UInt16(ogf & 0x3F) << 10 | (ocf & 0x03FF) }

    public var ogf: UInt8 { UInt8(rawValue >> 10) }
    public var ocf: UInt16 { rawValue & 0x03FF }

    public var description: String {
        let hex = String(rawValue, radix: 16, uppercase: true)
        return "0x" + String(repeating: "0", count: max(0, 4 - hex.count)) + hex
    }
}

/// A command the host sends to the controller.
public protocol HCICommand: Sendable {
    static var opcode: HCIOpcode { get }
    /// Appends the command parameters (without opcode and length).
    func encodeParameters(into writer: inout ByteWriter)
}

extension HCICommand {
    /// The command packet without the H4 indicator: opcode, parameter length, parameters.
    public func encode() -> [UInt8] {
        var parameters = ByteWriter()
        encodeParameters(into: &parameters)
        var writer = ByteWriter(capacity: 3 + parameters.bytes.count)
        writer.write(Self.opcode.rawValue)
        writer.write(UInt8(truncatingIfNeeded: parameters.bytes.count))
        writer.write(contentsOf: parameters.bytes)
        return writer.bytes
    }

    public var packet: HCIPacket { HCIPacket(type: .command, body: encode()) }
}

/// A command the controller answers with Command Complete, carrying return parameters.
public protocol HCICommandWithReturnParameters: HCICommand {
    associatedtype ReturnParameters: HCIReturnParameters
}

/// A command the controller answers with Command Status; its outcome arrives later as its own event.
public protocol HCICommandWithStatus: HCICommand {}

/// The return parameters of a Command Complete event after the leading status byte, which the
/// host controller interface checks first (on failure controllers may send the status alone).
public protocol HCIReturnParameters: Sendable {
    init(decoding bytes: [UInt8]) throws(PacketDecodingError)
}

/// For commands whose Command Complete carries nothing but the status.
public struct HCIStatusOnly: HCIReturnParameters, Equatable {
    public init() {}
    /// Extra bytes are tolerated: some controllers append fields older specifications did not define.
    public init(decoding bytes: [UInt8]) throws(PacketDecodingError) {}
}
