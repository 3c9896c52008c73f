import Foundation
@testable import SubmissionJSON

/// The optional body of `POST /v1/codes`, from an authority's client.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    _ = try? CodeRequest(json: Data(bytes: data, count: size))
    return 0
}
