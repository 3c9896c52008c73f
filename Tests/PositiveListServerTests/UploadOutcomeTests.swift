import NIOCore
import NIOHTTP1
@testable import PositiveListServer
@testable import ServerHTTPAPI
import ServerStorage
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

/// The object store's lag: from the first publication the bucket has not taken since its last
/// successful sync, 0 once a sync succeeds (issue 41: the sync's last success, lag, failures).
@Suite(.tags(.unit)) struct SyncLagMetricTests {
    static func lag(_ metrics: ServerMetrics) -> String? {
        String(decoding: metrics.exposition(), as: UTF8.self).split(separator: "\n")
            .first { $0.hasPrefix("tracer_server_object_store_sync_lag_seconds ") }.map(String.init)
    }

    @Test func theLagCountsFromTheFirstUnsyncedPublicationUntilASyncSucceeds() {
        let metrics = ServerMetrics()
        metrics.sampleSyncLag(now: 1_000)
        #expect(Self.lag(metrics) == "tracer_server_object_store_sync_lag_seconds 0.0")
        metrics.publishedForSync(at: 1_000)
        metrics.publishedForSync(at: 1_300)
        metrics.syncFailed()
        metrics.sampleSyncLag(now: 1_600)
        #expect(Self.lag(metrics) == "tracer_server_object_store_sync_lag_seconds 600.0", "from the first publication not synced")
        metrics.syncSucceeded(at: 1_610)
        metrics.sampleSyncLag(now: 1_620)
        #expect(Self.lag(metrics) == "tracer_server_object_store_sync_lag_seconds 0.0")
    }
}
