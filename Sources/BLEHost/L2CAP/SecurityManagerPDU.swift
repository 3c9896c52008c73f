/// A Security Manager Protocol PDU (CID 0x0006). This host does not pair; it only needs to refuse politely.
public enum SecurityManagerPDU: Sendable, Equatable {
    case pairingRequest(PairingParameters)
    case pairingResponse(PairingParameters)
    case pairingFailed(reason: UInt8)
    case securityRequest(authenticationRequirements: UInt8)
    case other(code: UInt8, data: [UInt8])

    public static let pairingRequestCode: UInt8 = 0x01
    public static let pairingResponseCode: UInt8 = 0x02
    public static let pairingFailedCode: UInt8 = 0x05
    public static let securityRequestCode: UInt8 = 0x0B

    /// Pairing Failed reason 0x05.
    public static let pairingNotSupported: UInt8 = 0x05

    /// The six parameters of a Pairing Request or Response.
    public struct PairingParameters: Sendable, Equatable {
        public var ioCapability: UInt8
        public var oobDataFlag: UInt8
        public var authenticationRequirements: UInt8
        public var maximumEncryptionKeySize: UInt8
        public var initiatorKeyDistribution: UInt8
        public var responderKeyDistribution: UInt8

        public init(
            ioCapability: UInt8, oobDataFlag: UInt8, authenticationRequirements: UInt8,
            maximumEncryptionKeySize: UInt8, initiatorKeyDistribution: UInt8, responderKeyDistribution: UInt8
        ) {
            self.ioCapability = ioCapability
            self.oobDataFlag = oobDataFlag
            self.authenticationRequirements = authenticationRequirements
            self.maximumEncryptionKeySize = maximumEncryptionKeySize
            self.initiatorKeyDistribution = initiatorKeyDistribution
            self.responderKeyDistribution = responderKeyDistribution
        }

        init(reading reader: inout ByteReader) throws(PacketDecodingError) {
            ioCapability = try reader.readUInt8("IO_Capability")
            oobDataFlag = try reader.readUInt8("OOB_Data_Flag")
            authenticationRequirements = try reader.readUInt8("AuthReq")
            maximumEncryptionKeySize = try reader.readUInt8("Maximum_Encryption_Key_Size")
            initiatorKeyDistribution = try reader.readUInt8("Initiator_Key_Distribution")
            responderKeyDistribution = try reader.readUInt8("Responder_Key_Distribution")
        }

        var bytes: [UInt8] {
            [ioCapability, oobDataFlag, authenticationRequirements, maximumEncryptionKeySize,
             initiatorKeyDistribution, responderKeyDistribution]
        }
    }

    public init(decoding bytes: [UInt8]) throws(PacketDecodingError) {
        var reader = ByteReader(bytes)
        let code = try reader.readUInt8("Code")
        switch code {
        case Self.pairingRequestCode:
            self = .pairingRequest(try PairingParameters(reading: &reader))
            try reader.expectEnd()
        case Self.pairingResponseCode:
            self = .pairingResponse(try PairingParameters(reading: &reader))
            try reader.expectEnd()
        case Self.pairingFailedCode:
            self = .pairingFailed(reason: try reader.readUInt8("Reason"))
            try reader.expectEnd()
        case Self.securityRequestCode:
            self = .securityRequest(authenticationRequirements: try reader.readUInt8("AuthReq"))
            try reader.expectEnd()
        default:
            self = .other(code: code, data: reader.readRemaining())
        }
    }

    public func encode() -> [UInt8] {
        switch self {
        case .pairingRequest(let parameters): [Self.pairingRequestCode] + parameters.bytes
        case .pairingResponse(let parameters): [Self.pairingResponseCode] + parameters.bytes
        case .pairingFailed(let reason): [Self.pairingFailedCode, reason]
        case .securityRequest(let requirements): [Self.securityRequestCode, requirements]
        case .other(let code, let data): [code] + data
        }
    }
}
