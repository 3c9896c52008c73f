@testable import CurlHTTP
@testable import Matching
import Testing
import TestTiers

/// The client's pure parts: header parsing, URL redaction, timeouts and backoff.
@Suite(.tags(.unit)) struct HTTPClientPartsTests {
    private func parse(_ lines: [String]) -> [String: String] {
        var parser = HTTPHeaderParser()
        for line in lines {
            Array(line.utf8).withUnsafeBufferPointer { parser.consume(line: $0) }
        }
        return parser.fields
    }

    @Test func headersOfTheLastResponseOnlyAreKept() {
        let fields = parse(["HTTP/1.1 302 Found\r\n", "Location: /b\r\n", "\r\n", "HTTP/1.1 200 OK\r\n", "ETag: \"x\"\r\n", "\r\n"])
        #expect(fields == ["etag": "\"x\""])
    }

    @Test func hostileHeaderLinesAreSkippedNotTrapped() {
        let hostile = [
            "HTTP/1.1 200 OK\r\n", ":\r\n", ": no name\r\n", "no colon at all\r\n", "\r", "\n", "",
            "Content-Length: 99999999999999999999999999999\r\n", "X-Bytes: \u{FFFD}\u{0}\r\n", " folded before any header\r\n",
            "X-Folded: first\r\n", "\tsecond\r\n", "X-Empty:   \r\n",
        ]
        let fields = parse(hostile)
        #expect(fields["content-length"] == "99999999999999999999999999999")
        #expect(fields["x-folded"] == "first second")
        #expect(fields["x-empty"] == "")
        #expect(fields[""] == nil)
        #expect(fields.count == 4)
        var parser = HTTPHeaderParser()
        [UInt8]([0xFF, 0xFE, 0x3A, 0xC0]).withUnsafeBufferPointer { parser.consume(line: $0) }
        [UInt8]().withUnsafeBufferPointer { parser.consume(line: $0) }
        #expect(parser.fields.count == 1)
    }

    @Test func headerMemoryIsBounded() {
        var parser = HTTPHeaderParser()
        let line = Array("X-Big: \(String(repeating: "a", count: 8000))\r\n".utf8)
        for _ in 0..<1000 { line.withUnsafeBufferPointer { parser.consume(line: $0) } }
        #expect(parser.fields["x-big"]!.utf8.count < HTTPHeaderParser.maxTotalBytes)
    }

    @Test(arguments: [
        ("https://user:pw@example.org:8443/v1/list?token=s#frag", "https://example.org:8443/v1/list"),
        ("https://example.org?x=1", "https://example.org"),
        ("http://a@b@host/p@q", "http://host/p@q"),
        ("not a url ? at all", "not a url "),
        ("", ""),
        ("://", "://"),
    ])
    func redactionDropsCredentialsQueryAndFragment(url: String, shown: String) {
        #expect(redactedURL(url) == shown)
    }

    @Test func overallTimeoutGrowsWithTheExpectedSize() {
        let configuration = HTTPClientConfiguration(baseTimeout: .seconds(30), minimumTransferRate: 32 * 1024)
        #expect(configuration.overallTimeout(expectedByteCount: nil) == .seconds(30))
        #expect(configuration.overallTimeout(expectedByteCount: 64 * 1024 * 1024) == .seconds(30 + 2048))
        #expect(configuration.overallTimeout(expectedByteCount: 16 * 1024) == .seconds(30.5))
        #expect(configuration.overallTimeout(expectedByteCount: -5) == .seconds(30))
        #expect(configuration.overallTimeout(expectedByteCount: .max) > .seconds(1_000_000))
    }

    /// What a caller that tries again itself (the object store) may repeat: a connection that
    /// failed or stalled, not an attempt that ran out its whole timeout, nor a bad URL or pin.
    @Test func aWholeRequestTimeoutMayNotPassButAStallMay() {
        func mayPass(_ failure: TransferFailure) -> Bool { HTTPAttemptFailure(failure: failure, reason: "").mayPass }
        #expect(mayPass(.cannotConnect(reason: "connection refused")))
        #expect(mayPass(.timedOut(reason: "Operation too slow. Less than 1 bytes/sec transferred the last 30 seconds")))
        #expect(mayPass(.transfer(reason: "Recv failure: Connection reset by peer", isRetryable: true)))
        #expect(!mayPass(.ranOutOfTime(reason: "Operation timed out after 300000 milliseconds")))
        #expect(!mayPass(.tls(reason: "bad certificate")))
        #expect(!mayPass(.pinnedKeyMismatch))
        #expect(!mayPass(.invalidURL))
        #expect(!mayPass(.cancelled))
        // The retrying client's own short timeouts are still tried again.
        #expect(TransferFailure.ranOutOfTime(reason: "").isRetryable)
        #expect(TransferFailure.ranOutOfTime(reason: "x").error(url: "u", attempts: 2) == .timedOut(url: "u", attempts: 2, reason: "x"))
    }

    @Test func backoffDoublesUpToTheCapWithFullJitter() {
        let policy = RetryPolicy(maxAttempts: 10, initialDelay: .milliseconds(500), maxDelay: .seconds(8))
        #expect((1...7).map { policy.delayCeiling(afterFailedAttempts: $0) } == [
            .milliseconds(500), .seconds(1), .seconds(2), .seconds(4), .seconds(8), .seconds(8), .seconds(8),
        ])
        var random = SystemRandomNumberGenerator()
        let delays = (0..<200).map { _ in policy.delay(afterFailedAttempts: 3, using: &random) }
        #expect(delays.allSatisfy { $0 >= .zero && $0 <= .seconds(2) })
        #expect(Set(delays).count > 100, "full jitter spreads the delays")
        #expect(RetryPolicy(maxAttempts: 0).maxAttempts == 1)
    }
}
