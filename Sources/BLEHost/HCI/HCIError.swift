/// Why an HCI operation failed.
public enum HCIError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The controller answered with a non-success status.
    case commandFailed(opcode: HCIOpcode, status: HCIStatusCode)
    /// The controller did not answer within the command timeout.
    case commandTimedOut(opcode: HCIOpcode, after: Duration)
    /// The answer could not be decoded.
    case malformedReturnParameters(opcode: HCIOpcode, PacketDecodingError)
    /// A Command Status arrived where Command Complete was expected, or the reverse, with success.
    case unexpectedCompletion(opcode: HCIOpcode)
    /// ACL data was sent before the controller's buffer sizes were known (run `initialize()` first).
    case aclBuffersUnknown
    /// ACL data was queued for a connection that closed before it could be sent.
    case connectionClosed(handle: UInt16)
    /// The transport failed or was closed; nothing more can be sent.
    case transport(HCITransportError)

    public var description: String {
        switch self {
        case .commandFailed(let opcode, let status): "HCI command \(opcode) failed: \(status)"
        case .commandTimedOut(let opcode, let after): "HCI command \(opcode) not answered within \(after)"
        case .malformedReturnParameters(let opcode, let error): "HCI command \(opcode) returned malformed parameters: \(error)"
        case .unexpectedCompletion(let opcode): "HCI command \(opcode) completed with an unexpected event kind"
        case .aclBuffersUnknown: "ACL buffer sizes unknown: initialize the controller first"
        case .connectionClosed(let handle): "connection 0x\(String(handle, radix: 16)) closed"
        case .transport(let error): error.description
        }
    }

    /// The controller's status code, when the controller refused the command.
    public var status: HCIStatusCode? {
        if case .commandFailed(_, let status) = self { return status }
        return nil
    }
}
