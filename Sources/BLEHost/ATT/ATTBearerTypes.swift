/// Why an ATT bearer stopped carrying PDUs. Once closed it stays closed.
public enum ATTBearerCloseReason: Sendable, Equatable {
    /// A transaction went unanswered for the transaction timeout. The spec forbids any further
    /// PDU on this bearer; only a new connection recovers (Core Spec Vol 3 Part F 3.3.3).
    case transactionTimeout(ATTOpcode)
    /// The L2CAP channel's incoming stream finished: the connection is gone.
    case channelClosed
    /// The channel refused an outgoing PDU.
    case sendFailed(String)
    /// `close()` was called.
    case closedLocally
}

/// How an ATT transaction or send failed.
public enum ATTBearerError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The peer answered the request with an Error Response.
    case errorResponse(request: ATTOpcode, handle: UInt16, code: ATTErrorCode)
    /// This transaction got no answer within the transaction timeout; the bearer is now closed.
    case transactionTimedOut(request: ATTOpcode)
    /// The bearer was or became closed before the operation could complete.
    case closed(ATTBearerCloseReason)
    /// The peer answered with a PDU that does not complete the outstanding request.
    case unexpectedResponse(request: ATTOpcode, received: ATTOpcode)
    /// The peer's answer had the right opcode but could not be decoded.
    case malformedResponse(request: ATTOpcode, PacketDecodingError)
    /// `request` was given something that is not a request this bearer can track.
    case notARequest(ATTOpcode)
    /// `send(command:)` was given something that is not a command.
    case notACommand(ATTOpcode)
    /// The encoded PDU does not fit the negotiated ATT_MTU.
    case pduExceedsMTU(length: Int, mtu: Int)

    public var description: String {
        switch self {
        case .errorResponse(let request, let handle, let code):
            return "\(request) failed at handle 0x\(String(handle, radix: 16)): \(code)"
        case .transactionTimedOut(let request):
            return "\(request) timed out; the ATT bearer is closed"
        case .closed(let reason):
            return "ATT bearer closed: \(reason)"
        case .unexpectedResponse(let request, let received):
            return "\(request) answered by unexpected \(received)"
        case .malformedResponse(let request, let error):
            return "malformed answer to \(request): \(error)"
        case .notARequest(let opcode):
            return "\(opcode) is not a request"
        case .notACommand(let opcode):
            return "\(opcode) is not a command"
        case .pduExceedsMTU(let length, let mtu):
            return "PDU of \(length) octets exceeds ATT_MTU \(mtu)"
        }
    }
}

/// What a server handler knows about the bearer a request arrived on.
public struct ATTRequestContext: Sendable {
    /// The negotiated ATT_MTU: no response may be longer.
    public let mtu: Int
    public init(mtu: Int) { self.mtu = mtu }
}

/// The server side of a bearer: answers the peer's requests and consumes its commands.
/// Exchange MTU and unknown opcodes are handled by the bearer and never reach the handler.
public protocol ATTServerHandler: Sendable {
    /// Every request gets exactly one answer: a response PDU or an Error Response.
    func respond(to request: ATTPDU, context: ATTRequestContext) async -> ATTPDU
    /// Commands are never answered, whatever happens.
    func receive(command: ATTPDU, context: ATTRequestContext) async
}

/// A value the peer's server pushed to us.
public struct ATTHandleValue: Sendable, Equatable {
    public enum Kind: Sendable, Equatable {
        case notification
        /// The bearer confirms an indication once the value handler returns.
        case indication
    }
    public var handle: UInt16
    public var value: [UInt8]
    public var kind: Kind

    public init(handle: UInt16, value: [UInt8], kind: Kind) {
        self.handle = handle
        self.value = value
        self.kind = kind
    }
}

public struct ATTBearerConfiguration: Sendable {
    /// The ATT_MTU used before any exchange (Core Spec Vol 3 Part G 5.2.1).
    public static let defaultMTU = 23
    /// The largest receive MTU this stack offers; 247 fills one 251-octet LE data PDU.
    public static let maximumLocalMTU: UInt16 = 247

    /// The receive MTU this side offers in an MTU exchange, kept within 23...247.
    public var localMTU: UInt16 {
        didSet { localMTU = Self.clampedLocalMTU(localMTU) }
    }
    /// How long a request or indication may wait for its answer; 30 s in the spec (3.3.3).
    public var transactionTimeout: Duration

    public init(localMTU: UInt16 = ATTBearerConfiguration.maximumLocalMTU, transactionTimeout: Duration = .seconds(30)) {
        self.localMTU = Self.clampedLocalMTU(localMTU)
        self.transactionTimeout = transactionTimeout
    }

    static func clampedLocalMTU(_ value: UInt16) -> UInt16 {
        min(max(value, UInt16(defaultMTU)), maximumLocalMTU)
    }

    /// ATT_MTU after an exchange: the smaller of both receive MTUs, never below the default.
    func negotiatedMTU(peerRxMTU: UInt16) -> Int {
        max(Self.defaultMTU, Int(min(localMTU, peerRxMTU)))
    }
}
