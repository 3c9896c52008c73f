/// What this host answers on the LE signaling channel: it accepts connection parameter updates and rejects
/// every other request as not understood (it offers no credit-based channels).
public enum LESignalingResponder {
    /// The reply to one signaling frame payload, or nil when none is due (responses, indications, garbage
    /// too short to carry an identifier, identifier 0).
    public static func reply(to payload: [UInt8]) -> LESignalingCommand? {
        guard payload.count >= 4 else { return nil }
        let code = payload[0]
        let identifier = payload[1]
        guard identifier != 0 else { return nil }
        let rejection = LESignalingCommand(
            code: LESignalingCommand.commandRejectCode, identifier: identifier,
            data: CommandReject(reason: CommandReject.commandNotUnderstood).encode())
        guard let command = try? LESignalingCommand(decoding: payload) else {
            return LESignalingCommand(code: code, identifier: identifier, data: []).isResponseOrIndication ? nil : rejection
        }
        if command.isResponseOrIndication { return nil }
        switch command.code {
        case LESignalingCommand.connectionParameterUpdateRequestCode:
            guard (try? ConnectionParameterUpdateRequest(decoding: command.data)) != nil else { return rejection }
            return LESignalingCommand(
                code: LESignalingCommand.connectionParameterUpdateResponseCode, identifier: identifier,
                data: ConnectionParameterUpdateResponse(result: ConnectionParameterUpdateResponse.accepted).encode())
        default:
            return rejection
        }
    }
}

/// What this host answers on the Security Manager channel: pairing is not supported.
public enum SecurityManagerResponder {
    public static func reply(to payload: [UInt8]) -> SecurityManagerPDU? {
        guard let pdu = try? SecurityManagerPDU(decoding: payload) else { return nil }
        switch pdu {
        case .pairingRequest, .securityRequest:
            return .pairingFailed(reason: SecurityManagerPDU.pairingNotSupported)
        default:
            return nil
        }
    }
}
