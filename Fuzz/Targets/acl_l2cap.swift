@testable import BLEHost

/// A peer's ACL data: a sequence of ACL packets (each a length-prefixed message) through the
/// reassembler, and every complete L2CAP frame to the decoder of its fixed channel, as the
/// L2CAP layer routes them (signaling and security manager answered, ATT decoded).
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    var input = FuzzInput(data, size)
    var reassembler = ACLReassembler(limits: .init(maximumFrameLength: 512, timeout: .seconds(10)))
    while !input.isEmpty {
        let bytes = input.message()
        // A frame decoded from one packet's payload as well, so that the L2CAP decoders are
        // reached without the fuzzer first having to build a valid ACL header.
        _ = try? L2CAPBasicFrame(decoding: bytes)
        guard let packet = try? ACLDataPacket(decoding: bytes) else { continue }
        guard case .frame(_, let frame) = reassembler.receive(packet) else { continue }
        switch frame.channelID {
        case L2CAPChannelIdentifier.leSignaling:
            if let command = try? LESignalingCommand(decoding: frame.payload) {
                _ = try? ConnectionParameterUpdateRequest(decoding: command.data)
                _ = try? ConnectionParameterUpdateResponse(decoding: command.data)
                _ = try? CommandReject(decoding: command.data)
            }
            _ = LESignalingResponder.reply(to: frame.payload)
        case L2CAPChannelIdentifier.securityManager:
            _ = try? SecurityManagerPDU(decoding: frame.payload)
            _ = SecurityManagerResponder.reply(to: frame.payload)
        case L2CAPChannelIdentifier.attribute:
            _ = try? ATTPDU(decoding: frame.payload)
        default:
            break
        }
    }
    return 0
}
