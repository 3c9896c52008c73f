@testable import PositiveListFormat

/// A downloaded PositiveListKeyIndex file (docs/positive-list-format.md), whole: the last 64 bytes stand
/// for the signature, which is not checked, so that the fuzzer reaches the structure checks a
/// file with a valid signature goes through (a mistaken or compromised signer).
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let file = Array(UnsafeBufferPointer(start: data, count: size))
    if let parsed = try? PositiveListKeyIndex(file, check: .skipForFuzzing) {
        _ = parsed.batches.count
    }
    return 0
}
