import NIOCore
import NIOHTTP1
@testable import PositiveListServer
import Testing

/// An upload's outcome in the metrics is the `error` code its client gets: both come from
/// ``APIError/answering(_:)``. Malformed and truncated bodies were once counted "other" while
/// the client was answered `malformed_request` or `incomplete_request`.
@Suite(.tags(.unit)) struct UploadOutcomeTests {
    @Test func malformedAndTruncatedBodiesAreCountedAsTheirAnswers() {
        let cases: [(any Error, String)] = [
            (HTTPParserError.invalidChunkSize, "malformed_request"),
            (HTTPParserError.invalidEOFState, "incomplete_request"),
            (HTTPParserError.headerOverflow, "trailers_too_large"),
            (IOError(errnoCode: 104, reason: "read"), "incomplete_request"),
            (TooManyBodyParts(limit: 4), "too_many_chunks"),
            (ServerStoreError.busy(path: "server.db"), "store_unavailable"),
            (APIError.usedCode, "used_code"),
            (CancellationError(), "internal_error"),
        ]
        for (error, code) in cases {
            let answer = APIError.answering(error)
            #expect(answer.code == code, "\(error)")
            #expect(ServerMetrics.uploadOutcomes.contains(answer.code), "\(answer.code) would be counted as other")
        }
    }
}
