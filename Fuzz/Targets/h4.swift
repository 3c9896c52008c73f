@testable import BLEHost

/// A transport's byte stream: the H4 framer fed in reads of fuzzer-chosen sizes, and every
/// packet it frames decoded as the host would (events, ACL data through reassembly).
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    var input = FuzzInput(data, size)
    var parser = H4FrameParser()
    var reassembler = ACLReassembler()
    while !input.isEmpty {
        let packets: [HCIPacket]
        do { packets = try parser.append(input.message()) } catch { return 0 }  // the host drops the transport
        for packet in packets {
            switch packet.type {
            case .event: _ = try? HCIEvent(decoding: packet.body)
            case .aclData:
                if let acl = try? ACLDataPacket(decoding: packet.body) { _ = reassembler.receive(acl) }
            default: break
            }
        }
    }
    return 0
}
