import Foundation
@testable import SubmissionJSON

/// A body of `POST /v1/histories` from anyone holding (or guessing) an upload code: decoded,
/// then checked by the rules the server applies before it stores anything.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    if let history = try? SubmittedHistory(json: Data(bytes: data, count: size)) {
        _ = try? HistoryRules(maxIDs: 3_000, retentionDays: 28, clockSkewSeconds: 300, maxWindowSeconds: 3_600).validate(history, now: 1_800_000_000)
    }
    return 0
}
