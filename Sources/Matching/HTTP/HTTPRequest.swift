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

    public init(
        method: Method = .get, url: String, headers: [HTTPHeaderField] = [], body: [UInt8] = [],
        expectedByteCount: Int? = nil, maximumByteCount: Int? = nil
    ) {
        self.maximumByteCount = maximumByteCount
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body
        self.expectedByteCount = expectedByteCount
    }
}
