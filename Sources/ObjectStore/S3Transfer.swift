import Crypto
import CurlHTTP
import Foundation
import TracerCore

/// One signed request to the object store, performed by libcurl.
///
/// libcurl (7.75+) signs with AWS Signature Version 4 itself (CURLOPT_AWS_SIGV4, the key pair as
/// CURLOPT_USERPWD), so the object store needs no SDK and no new Swift package: the project already
/// links libcurl for the node's downloads. The payload hash is always ours (x-amz-content-sha256,
/// a real SHA-256 of the body, also for PUT), which real S3 checks against the body; libcurl then
/// signs that header's value instead of computing or skipping one.
struct S3Request: Sendable {
    typealias Method = HTTPRequest.Method

    var method: Method
    var url: String
    var headers: [(name: String, value: String)] = []
    var body: [UInt8] = []
}

struct S3Response: Sendable {
    var status: Int
    /// Lowercased names.
    var headers: [String: String]
    var body: [UInt8]

    /// The `<Code>` of an S3 XML error body, or "" (HEAD answers have no body).
    var errorCode: String {
        let text = String(decoding: body.prefix(4_096), as: UTF8.self)
        guard let start = text.range(of: "<Code>"), let end = text.range(of: "</Code>", range: start.upperBound..<text.endIndex) else { return "" }
        return String(text[start.upperBound..<end.lowerBound])
    }
}

/// Whether libcurl delivered an answer (of any status), or why not, and whether another attempt
/// may succeed (a cut or stalled connection may; a bad URL or certificate will not).
enum S3TransferOutcome: Sendable {
    case answered(S3Response)
    case failed(reason: String, mayPass: Bool)
}

struct S3Transfer: Sendable {
    let request: S3Request
    let region: String
    let credentials: ObjectStoreCredentials
    let timeout: Duration

    static let emptyPayloadHash = SHA256.hash(data: [UInt8]()).hex

    func perform() async -> S3TransferOutcome {
        let payloadHash = request.body.isEmpty ? Self.emptyPayloadHash : SHA256.hash(data: request.body).hex
        // The session token is a header like the others, so that libcurl signs it as the service asks.
        let tokenHeader = credentials.sessionToken.map { [HTTPHeaderField(name: "x-amz-security-token", value: $0)] } ?? []
        let headers = request.headers.map { HTTPHeaderField(name: $0.name, value: $0.value) }
            + [HTTPHeaderField(name: "x-amz-content-sha256", value: payloadHash)] + tokenHeader
        let signed = HTTPRequest(
            method: request.method, url: request.url, headers: headers, body: request.body,
            signature: AWSSignature(provider: "aws:amz:\(region):s3", keyPair: credentials.userPassword))
        switch await client.performOnce(signed) {
        case .success(let response): return .answered(S3Response(status: response.status, headers: response.headers, body: response.body))
        case .failure(let failure): return .failed(reason: failure.reason, mayPass: failure.mayPass)
        }
    }

    /// A connection along which nothing moved, either way, for this long is given up (libcurl's
    /// low-speed limit of 1 byte/s): a connection stalled part-way (a lost route, a middlebox
    /// dropping its state) would otherwise hold the sync, and with it the publication lock, for the
    /// whole `timeout` (5 minutes). A slow uplink that still moves bytes is not cut; S3 answers a
    /// whole body within seconds.
    static let stallTimeout: Duration = .seconds(30)

    /// The node's client, set as the object store used libcurl before they shared it: 10 s to
    /// connect, ``stallTimeout`` without a byte, one attempt (``ObjectStoreClient`` tries again),
    /// no size limit on an answer held in memory.
    private var client: CurlHTTPClient {
        CurlHTTPClient(configuration: HTTPClientConfiguration(
            connectTimeout: .seconds(10), baseTimeout: timeout, minimumTransferRate: 1, lowSpeedTime: Self.stallTimeout,
            maxInMemoryResponseBytes: .max, retry: RetryPolicy(maxAttempts: 1), userAgent: "tracer-server/0.1", maxRedirects: 0))
    }
}

extension Digest {
    var hex: String { Hex.encode(self) }
}
