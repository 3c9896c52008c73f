/// Any ATT PDU, decoded by its opcode. Opcodes this stack does not implement decode to `.unknown`
/// rather than failing, so that a server can answer them with Request Not Supported.
public enum ATTPDU: Sendable, Equatable {
    case errorResponse(ATTErrorResponse)
    case exchangeMTURequest(ATTExchangeMTURequest)
    case exchangeMTUResponse(ATTExchangeMTUResponse)
    case findInformationRequest(ATTFindInformationRequest)
    case findInformationResponse(ATTFindInformationResponse)
    case findByTypeValueRequest(ATTFindByTypeValueRequest)
    case findByTypeValueResponse(ATTFindByTypeValueResponse)
    case readByTypeRequest(ATTReadByTypeRequest)
    case readByTypeResponse(ATTReadByTypeResponse)
    case readRequest(ATTReadRequest)
    case readResponse(ATTReadResponse)
    case readBlobRequest(ATTReadBlobRequest)
    case readBlobResponse(ATTReadBlobResponse)
    case readByGroupTypeRequest(ATTReadByGroupTypeRequest)
    case readByGroupTypeResponse(ATTReadByGroupTypeResponse)
    case writeRequest(ATTWriteRequest)
    case writeResponse(ATTWriteResponse)
    case writeCommand(ATTWriteCommand)
    case prepareWriteRequest(ATTPrepareWriteRequest)
    case prepareWriteResponse(ATTPrepareWriteResponse)
    case executeWriteRequest(ATTExecuteWriteRequest)
    case executeWriteResponse(ATTExecuteWriteResponse)
    case handleValueNotification(ATTHandleValueNotification)
    case handleValueIndication(ATTHandleValueIndication)
    case handleValueConfirmation(ATTHandleValueConfirmation)
    /// An opcode outside the set above, with its parameters untouched.
    case unknown(opcode: ATTOpcode, parameters: [UInt8])

    /// Throws only for an empty input or a known opcode whose parameters are malformed.
    public init(decoding pdu: [UInt8]) throws(PacketDecodingError) {
        guard let first = pdu.first else { throw .truncated(field: "opcode", needed: 1, available: 0) }
        switch ATTOpcode(first) {
        case .errorResponse: self = .errorResponse(try .init(decoding: pdu))
        case .exchangeMTURequest: self = .exchangeMTURequest(try .init(decoding: pdu))
        case .exchangeMTUResponse: self = .exchangeMTUResponse(try .init(decoding: pdu))
        case .findInformationRequest: self = .findInformationRequest(try .init(decoding: pdu))
        case .findInformationResponse: self = .findInformationResponse(try .init(decoding: pdu))
        case .findByTypeValueRequest: self = .findByTypeValueRequest(try .init(decoding: pdu))
        case .findByTypeValueResponse: self = .findByTypeValueResponse(try .init(decoding: pdu))
        case .readByTypeRequest: self = .readByTypeRequest(try .init(decoding: pdu))
        case .readByTypeResponse: self = .readByTypeResponse(try .init(decoding: pdu))
        case .readRequest: self = .readRequest(try .init(decoding: pdu))
        case .readResponse: self = .readResponse(try .init(decoding: pdu))
        case .readBlobRequest: self = .readBlobRequest(try .init(decoding: pdu))
        case .readBlobResponse: self = .readBlobResponse(try .init(decoding: pdu))
        case .readByGroupTypeRequest: self = .readByGroupTypeRequest(try .init(decoding: pdu))
        case .readByGroupTypeResponse: self = .readByGroupTypeResponse(try .init(decoding: pdu))
        case .writeRequest: self = .writeRequest(try .init(decoding: pdu))
        case .writeResponse: self = .writeResponse(try .init(decoding: pdu))
        case .writeCommand: self = .writeCommand(try .init(decoding: pdu))
        case .prepareWriteRequest: self = .prepareWriteRequest(try .init(decoding: pdu))
        case .prepareWriteResponse: self = .prepareWriteResponse(try .init(decoding: pdu))
        case .executeWriteRequest: self = .executeWriteRequest(try .init(decoding: pdu))
        case .executeWriteResponse: self = .executeWriteResponse(try .init(decoding: pdu))
        case .handleValueNotification: self = .handleValueNotification(try .init(decoding: pdu))
        case .handleValueIndication: self = .handleValueIndication(try .init(decoding: pdu))
        case .handleValueConfirmation: self = .handleValueConfirmation(try .init(decoding: pdu))
        default: self = .unknown(opcode: ATTOpcode(first), parameters: Array(pdu.dropFirst()))
        }
    }

    public var opcode: ATTOpcode {
        switch self {
        case .errorResponse: return .errorResponse
        case .exchangeMTURequest: return .exchangeMTURequest
        case .exchangeMTUResponse: return .exchangeMTUResponse
        case .findInformationRequest: return .findInformationRequest
        case .findInformationResponse: return .findInformationResponse
        case .findByTypeValueRequest: return .findByTypeValueRequest
        case .findByTypeValueResponse: return .findByTypeValueResponse
        case .readByTypeRequest: return .readByTypeRequest
        case .readByTypeResponse: return .readByTypeResponse
        case .readRequest: return .readRequest
        case .readResponse: return .readResponse
        case .readBlobRequest: return .readBlobRequest
        case .readBlobResponse: return .readBlobResponse
        case .readByGroupTypeRequest: return .readByGroupTypeRequest
        case .readByGroupTypeResponse: return .readByGroupTypeResponse
        case .writeRequest: return .writeRequest
        case .writeResponse: return .writeResponse
        case .writeCommand: return .writeCommand
        case .prepareWriteRequest: return .prepareWriteRequest
        case .prepareWriteResponse: return .prepareWriteResponse
        case .executeWriteRequest: return .executeWriteRequest
        case .executeWriteResponse: return .executeWriteResponse
        case .handleValueNotification: return .handleValueNotification
        case .handleValueIndication: return .handleValueIndication
        case .handleValueConfirmation: return .handleValueConfirmation
        case .unknown(let opcode, _): return opcode
        }
    }

    public func encode() -> [UInt8] {
        switch self {
        case .errorResponse(let pdu): return pdu.encode()
        case .exchangeMTURequest(let pdu): return pdu.encode()
        case .exchangeMTUResponse(let pdu): return pdu.encode()
        case .findInformationRequest(let pdu): return pdu.encode()
        case .findInformationResponse(let pdu): return pdu.encode()
        case .findByTypeValueRequest(let pdu): return pdu.encode()
        case .findByTypeValueResponse(let pdu): return pdu.encode()
        case .readByTypeRequest(let pdu): return pdu.encode()
        case .readByTypeResponse(let pdu): return pdu.encode()
        case .readRequest(let pdu): return pdu.encode()
        case .readResponse(let pdu): return pdu.encode()
        case .readBlobRequest(let pdu): return pdu.encode()
        case .readBlobResponse(let pdu): return pdu.encode()
        case .readByGroupTypeRequest(let pdu): return pdu.encode()
        case .readByGroupTypeResponse(let pdu): return pdu.encode()
        case .writeRequest(let pdu): return pdu.encode()
        case .writeResponse(let pdu): return pdu.encode()
        case .writeCommand(let pdu): return pdu.encode()
        case .prepareWriteRequest(let pdu): return pdu.encode()
        case .prepareWriteResponse(let pdu): return pdu.encode()
        case .executeWriteRequest(let pdu): return pdu.encode()
        case .executeWriteResponse(let pdu): return pdu.encode()
        case .handleValueNotification(let pdu): return pdu.encode()
        case .handleValueIndication(let pdu): return pdu.encode()
        case .handleValueConfirmation(let pdu): return pdu.encode()
        case .unknown(let opcode, let parameters): return [opcode.rawValue] + parameters
        }
    }

    /// The handle an Error Response should name when this request fails as a whole (3.4.1.1):
    /// the handle the request addresses, or the start of the range it searches.
    public var handleForErrorResponse: UInt16 {
        switch self {
        case .findInformationRequest(let pdu): return pdu.range.start
        case .findByTypeValueRequest(let pdu): return pdu.range.start
        case .readByTypeRequest(let pdu): return pdu.range.start
        case .readByGroupTypeRequest(let pdu): return pdu.range.start
        case .readRequest(let pdu): return pdu.handle
        case .readBlobRequest(let pdu): return pdu.handle
        case .writeRequest(let pdu): return pdu.handle
        case .prepareWriteRequest(let pdu): return pdu.handle
        default: return 0x0000
        }
    }
}
