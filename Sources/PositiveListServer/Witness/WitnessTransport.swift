import CurlHTTP
import Foundation

/// A witness's answer to one add-checkpoint request, whatever its status.
public struct WitnessHTTPAnswer: Sendable, Equatable {
    public var status: Int
    public var contentType: String?
    public var body: [UInt8]

    public init(status: Int, contentType: String? = nil, body: [UInt8] = []) {
        self.status = status
        self.contentType = contentType
        self.body = body
    }
}

/// How the log's cosigner reaches witnesses: libcurl in the server (``CurlWitnessTransport``), a
/// witness in the same process in unit tests.
public protocol WitnessTransport: Sendable {
    /// One POST of `body` to `url`, given at most `timeout`: the answer, of any status, or why none came.
    func post(_ body: [UInt8], to url: String, timeout: Duration) async -> Result<WitnessHTTPAnswer, WitnessUnreachable>
}

/// Why no answer came (in libcurl's words: refused, timed out, TLS).
public struct WitnessUnreachable: Error, Sendable, Equatable {
    public let reason: String

    public init(reason: String) {
        self.reason = reason
    }
}

/// Requests through the server's one HTTP client (libcurl): one attempt, no redirect, the whole
/// exchange bounded by `timeout`, an answer of at most 64 KiB (a witness answers one signature
/// line per key).
public struct CurlWitnessTransport: WitnessTransport {
    public init() {}

    public func post(_ body: [UInt8], to url: String, timeout: Duration) async -> Result<WitnessHTTPAnswer, WitnessUnreachable> {
        let client = CurlHTTPClient(configuration: HTTPClientConfiguration(
            connectTimeout: min(timeout, .seconds(5)), baseTimeout: timeout, minimumTransferRate: 1, lowSpeedTime: timeout,
            maxInMemoryResponseBytes: 64 << 10, retry: RetryPolicy(maxAttempts: 1), userAgent: "tracer-server/0.1", maxRedirects: 0))
        let request = HTTPRequest(
            method: .post, url: url, headers: [HTTPHeaderField(name: "Content-Type", value: "text/plain; charset=utf-8")], body: body)
        switch await client.performOnce(request) {
        case .success(let response):
            return .success(WitnessHTTPAnswer(status: response.status, contentType: response.header("Content-Type"), body: response.body))
        case .failure(let failure):
            return .failure(WitnessUnreachable(reason: failure.reason))
        }
    }
}
