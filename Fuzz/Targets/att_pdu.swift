@testable import BLEHost

/// One ATT PDU from a peer, either role: decoded, and what decodes encoded again (a decoded PDU
/// must always be encodable, or a relay or a log of it would trap).
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    if let pdu = try? ATTPDU(decoding: bytes) { _ = pdu.encode() }
    return 0
}
