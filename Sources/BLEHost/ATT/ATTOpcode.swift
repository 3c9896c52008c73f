/// The first octet of every ATT PDU (Core Spec Vol 3 Part F 3.3.1).
/// A struct rather than an enum so that opcodes this stack does not implement stay representable.
public struct ATTOpcode: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }
    public init(_ rawValue: UInt8) { self.rawValue = rawValue }

    public static let errorResponse = ATTOpcode(0x01)
    public static let exchangeMTURequest = ATTOpcode(0x02)
    public static let exchangeMTUResponse = ATTOpcode(0x03)
    public static let findInformationRequest = ATTOpcode(0x04)
    public static let findInformationResponse = ATTOpcode(0x05)
    public static let findByTypeValueRequest = ATTOpcode(0x06)
    public static let findByTypeValueResponse = ATTOpcode(0x07)
    public static let readByTypeRequest = ATTOpcode(0x08)
    public static let readByTypeResponse = ATTOpcode(0x09)
    public static let readRequest = ATTOpcode(0x0A)
    public static let readResponse = ATTOpcode(0x0B)
    public static let readBlobRequest = ATTOpcode(0x0C)
    public static let readBlobResponse = ATTOpcode(0x0D)
    public static let readMultipleRequest = ATTOpcode(0x0E)
    public static let readMultipleResponse = ATTOpcode(0x0F)
    public static let readByGroupTypeRequest = ATTOpcode(0x10)
    public static let readByGroupTypeResponse = ATTOpcode(0x11)
    public static let writeRequest = ATTOpcode(0x12)
    public static let writeResponse = ATTOpcode(0x13)
    public static let prepareWriteRequest = ATTOpcode(0x16)
    public static let prepareWriteResponse = ATTOpcode(0x17)
    public static let executeWriteRequest = ATTOpcode(0x18)
    public static let executeWriteResponse = ATTOpcode(0x19)
    public static let handleValueNotification = ATTOpcode(0x1B)
    public static let handleValueIndication = ATTOpcode(0x1D)
    public static let handleValueConfirmation = ATTOpcode(0x1E)
    public static let readMultipleVariableRequest = ATTOpcode(0x20)
    public static let readMultipleVariableResponse = ATTOpcode(0x21)
    public static let multipleHandleValueNotification = ATTOpcode(0x23)
    public static let writeCommand = ATTOpcode(0x52)
    public static let signedWriteCommand = ATTOpcode(0xD2)

    /// Bit 6: the peer expects no response, and an unsupported command must be ignored (3.3.1).
    public var isCommand: Bool { rawValue & 0x40 != 0 }

    /// The PDUs a client sends or a server answers with, so a bearer can route what arrives.
    public enum Role: Sendable, Equatable {
        /// Client to server, answered by exactly one response or Error Response.
        case request
        /// Server to client, completing the client's outstanding request.
        case response
        /// Client to server, never answered.
        case command
        /// Server to client, never answered.
        case notification
        /// Server to client, answered by a confirmation.
        case indication
        /// Client to server, completing the server's outstanding indication.
        case confirmation
    }

    /// How this opcode is routed. Unknown opcodes without the command bit count as requests,
    /// because the spec requires a server to answer requests it does not support (3.4.1.1).
    public var role: Role {
        switch self {
        case .errorResponse, .exchangeMTUResponse, .findInformationResponse, .findByTypeValueResponse,
             .readByTypeResponse, .readResponse, .readBlobResponse, .readMultipleResponse,
             .readByGroupTypeResponse, .writeResponse, .prepareWriteResponse, .executeWriteResponse,
             .readMultipleVariableResponse:
            return .response
        case .handleValueNotification, .multipleHandleValueNotification:
            return .notification
        case .handleValueIndication:
            return .indication
        case .handleValueConfirmation:
            return .confirmation
        default:
            return isCommand ? .command : .request
        }
    }

    /// The response opcode that completes a request with this opcode, if it is one this stack sends.
    public var expectedResponse: ATTOpcode? {
        switch self {
        case .exchangeMTURequest: return .exchangeMTUResponse
        case .findInformationRequest: return .findInformationResponse
        case .findByTypeValueRequest: return .findByTypeValueResponse
        case .readByTypeRequest: return .readByTypeResponse
        case .readRequest: return .readResponse
        case .readBlobRequest: return .readBlobResponse
        case .readMultipleRequest: return .readMultipleResponse
        case .readByGroupTypeRequest: return .readByGroupTypeResponse
        case .writeRequest: return .writeResponse
        case .prepareWriteRequest: return .prepareWriteResponse
        case .executeWriteRequest: return .executeWriteResponse
        case .readMultipleVariableRequest: return .readMultipleVariableResponse
        default: return nil
        }
    }

    public var description: String {
        let hex = "0x" + HexFormat.format(rawValue, digits: 2)
        return "\(name) (\(hex))"
    }

    public var name: String {
        switch self {
        case .errorResponse: return "Error Response"
        case .exchangeMTURequest: return "Exchange MTU Request"
        case .exchangeMTUResponse: return "Exchange MTU Response"
        case .findInformationRequest: return "Find Information Request"
        case .findInformationResponse: return "Find Information Response"
        case .findByTypeValueRequest: return "Find By Type Value Request"
        case .findByTypeValueResponse: return "Find By Type Value Response"
        case .readByTypeRequest: return "Read By Type Request"
        case .readByTypeResponse: return "Read By Type Response"
        case .readRequest: return "Read Request"
        case .readResponse: return "Read Response"
        case .readBlobRequest: return "Read Blob Request"
        case .readBlobResponse: return "Read Blob Response"
        case .readMultipleRequest: return "Read Multiple Request"
        case .readMultipleResponse: return "Read Multiple Response"
        case .readByGroupTypeRequest: return "Read By Group Type Request"
        case .readByGroupTypeResponse: return "Read By Group Type Response"
        case .writeRequest: return "Write Request"
        case .writeResponse: return "Write Response"
        case .prepareWriteRequest: return "Prepare Write Request"
        case .prepareWriteResponse: return "Prepare Write Response"
        case .executeWriteRequest: return "Execute Write Request"
        case .executeWriteResponse: return "Execute Write Response"
        case .handleValueNotification: return "Handle Value Notification"
        case .handleValueIndication: return "Handle Value Indication"
        case .handleValueConfirmation: return "Handle Value Confirmation"
        case .readMultipleVariableRequest: return "Read Multiple Variable Request"
        case .readMultipleVariableResponse: return "Read Multiple Variable Response"
        case .multipleHandleValueNotification: return "Multiple Handle Value Notification"
        case .writeCommand: return "Write Command"
        case .signedWriteCommand: return "Signed Write Command"
        default: return "Unknown ATT opcode"
        }
    }
}
