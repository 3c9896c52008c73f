/// One header of a request. Values may be secrets (tokens), so they never appear in errors.
public struct HTTPHeaderField: Sendable, Hashable {
    public var name: String
    public var value: String

    public init(name: String, value: String) {
        self.name = name
        self.value = value
    }
}

public struct HTTPRequest: Sendable {
    public enum Method: String, Sendable {
        case get = "GET"
        case post = "POST"
        case head = "HEAD"
        case put = "PUT"
        case delete = "DELETE"
    }

    public var method: Method
    public var url: String
    public var headers: [HTTPHeaderField]
    public var body: [UInt8]
    /// When known (e.g. from a signed index), scales the overall timeout.
    public var expectedByteCount: Int?
    /// For `perform`: a tighter bound than the client's `maxInMemoryResponseBytes` for this
    /// answer (a file whose format bounds its size); a longer body throws responseTooLarge.
    public var maximumByteCount: Int?
    /// Signs the request with AWS Signature Version 4, for S3-compatible object storage. A signed
    /// request follows no redirect, which would carry the signed request elsewhere (S3 answers a
    /// wrong region with 301), and sends no empty "Expect:" line, which libcurl 7.88 would sign
    /// without sending, so that the service refuses the signature.
    public var signature: AWSSignature?

    public init(
        method: Method = .get, url: String, headers: [HTTPHeaderField] = [], body: [UInt8] = [],
        expectedByteCount: Int? = nil, maximumByteCount: Int? = nil, signature: AWSSignature? = nil
    ) {
        self.signature = signature
        self.maximumByteCount = maximumByteCount
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body
        self.expectedByteCount = expectedByteCount
    }
}

/// What libcurl needs to sign a request with AWS Signature Version 4 itself (CURLOPT_AWS_SIGV4).
public struct AWSSignature: Sendable {
    /// "aws:amz:REGION:SERVICE", e.g. "aws:amz:eu-west-1:s3".
    public var provider: String
    /// "ACCESS_KEY_ID:SECRET_ACCESS_KEY" (CURLOPT_USERPWD). Never shown in errors.
    public var keyPair: String

    public init(provider: String, keyPair: String) {
        self.provider = provider
        self.keyPair = keyPair
    }
}
