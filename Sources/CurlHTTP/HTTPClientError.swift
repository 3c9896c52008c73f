/// Why a request failed. URLs are shown without user info, query or fragment, and header values
/// never appear, so descriptions are safe to log.
public enum HTTPClientError: Error, Sendable, Equatable, CustomStringConvertible {
    case invalidURL(url: String)
    /// libcurl, opened on the first request, is not installed or is not libcurl.
    case libcurlUnavailable(reason: String)
    /// A header name or value that would break the request (a line break or NUL in it).
    case invalidHeader(name: String)
    /// DNS failure or connection refused; `reason` is libcurl's message.
    case cannotConnect(url: String, attempts: Int, reason: String)
    case timedOut(url: String, attempts: Int, reason: String)
    case tlsFailure(url: String, reason: String)
    case pinnedKeyMismatch(url: String)
    case responseTooLarge(url: String, limit: Int)
    /// The connection broke or the answer was cut short or malformed.
    case transferFailed(url: String, attempts: Int, reason: String)
    /// A 5xx answer to the last of `attempts`.
    case serverError(url: String, status: Int, attempts: Int)
    case cannotWriteFile(path: String, reason: String)
    case cancelled(url: String)

    public var description: String {
        switch self {
        case .invalidURL(let url):
            "\(url) is not a valid http or https URL; check the server address in the configuration."
        case .libcurlUnavailable(let reason):
            "Could not load libcurl, which makes the requests to the list server (\(reason)); install it (Debian and Ubuntu: apt install libcurl4), or set TRACER_LIBCURL to the path of libcurl.so.4."
        case .invalidHeader(let name):
            "The request header \(name.debugDescription) contains a line break or NUL character; remove it from the request."
        case .cannotConnect(let url, let attempts, let reason):
            "Could not connect to \(url) (\(reason)) after \(Self.count(attempts)); check the server address and your network."
        case .timedOut(let url, let attempts, let reason):
            "The request to \(url) timed out (\(reason)) after \(Self.count(attempts)); the server or the network is too slow, try again later."
        case .tlsFailure(let url, let reason):
            "Could not set up a secure connection to \(url) (\(reason)); check the server's certificate and the configured CA bundle."
        case .pinnedKeyMismatch(let url):
            "The server at \(url) presented a public key that does not match the pinned key; do not trust it, and check the pinned key in the configuration."
        case .responseTooLarge(let url, let limit):
            "The answer from \(url) is larger than the limit of \(limit) bytes; download it to a file instead."
        case .transferFailed(let url, let attempts, let reason):
            "The transfer from \(url) failed (\(reason)) after \(Self.count(attempts)); try again later."
        case .serverError(let url, let status, let attempts):
            "The server at \(url) answered with HTTP status \(status) after \(Self.count(attempts)); try again later."
        case .cannotWriteFile(let path, let reason):
            "Could not write the download to \(path) (\(reason)); check free disk space and the directory's permissions."
        case .cancelled(let url):
            "The request to \(url) was cancelled."
        }
    }

    private static func count(_ attempts: Int) -> String { attempts == 1 ? "1 attempt" : "\(attempts) attempts" }
}
