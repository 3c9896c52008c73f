import Foundation
@testable import SubmissionJSON

/// A body of `POST /v1/key-histories`: decoded, then checked by the server's rules for keys.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    if let history = try? SubmittedKeyHistory(json: Data(bytes: data, count: size)) {
        _ = try? KeyHistoryRules(maxKeys: 64, retentionDays: 28, clockSkewSeconds: 300).validate(history, now: 1_800_000_000)
    }
    return 0
}
