@testable import PositiveListFormat
import TracerCore

/// A downloaded PositiveListBatch file (docs/positive-list-format.md), whole: the last 64 bytes stand
/// for the signature, which is not checked, so that the fuzzer reaches the structure checks a
/// file with a valid signature goes through (a mistaken or compromised signer).
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let file = Array(UnsafeBufferPointer(start: data, count: size))
    if let parsed = try? PositiveListBatch(file, check: .skipForFuzzing) {
        _ = parsed.entries
        _ = parsed.entry(for: UserID(rawValue: 0x0102_0304_0506_0708))
    }
    return 0
}
