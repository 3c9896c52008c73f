/// Fetches from the positive list server. Implemented by `CurlHTTPClient`; tests of code that
/// downloads can substitute their own.
public protocol HTTPTransferring: Sendable {
    /// Sends `request` and returns the whole answer, held in memory. 3xx answers that are not
    /// followed (such as 304) and 4xx answers are returned, not thrown.
    func perform(_ request: HTTPRequest) async throws(HTTPClientError) -> HTTPResponse

    /// Streams the body of a 2xx answer into `path` (created/truncated; the caller verifies and
    /// renames it). For a non-2xx answer the file is removed and the (size-limited, e.g. 64 KiB)
    /// body is returned in the response. `progress` is called on the transfer's own thread, so it
    /// should return quickly.
    func download(_ request: HTTPRequest, to path: String, progress: (@Sendable (DownloadProgress) -> Void)?)
        async throws(HTTPClientError) -> HTTPResponse
}
