import CCurl

/// Why one attempt failed, before the client decides whether to try again.
enum TransferFailure: Error, Sendable, Equatable {
    case invalidURL
    case libcurlUnavailable(reason: String)
    case cannotConnect(reason: String)
    /// Connecting or moving bytes took too long (the connect limit, or nothing moved for the
    /// low-speed time): a stall, which another connection may not meet.
    case timedOut(reason: String)
    /// The attempt ran out its whole overall timeout: the request trickled (or waited) that long.
    case ranOutOfTime(reason: String)
    case tls(reason: String)
    case pinnedKeyMismatch
    case tooLarge(limit: Int)
    case transfer(reason: String, isRetryable: Bool)
    case cannotWriteFile(path: String, reason: String)
    case cancelled

    /// Network trouble may pass; a bad certificate, a wrong pin or a full disk will not. The
    /// retrying client tries a request that ran out its time again too (its timeouts are short);
    /// ``HTTPAttemptFailure/mayPass`` does not.
    var isRetryable: Bool {
        switch self {
        case .cannotConnect, .timedOut, .ranOutOfTime: true
        case .transfer(_, let isRetryable): isRetryable
        case .invalidURL, .libcurlUnavailable, .tls, .pinnedKeyMismatch, .tooLarge, .cannotWriteFile, .cancelled: false
        }
    }

    func error(url: String, attempts: Int) -> HTTPClientError {
        switch self {
        case .invalidURL: .invalidURL(url: url)
        case .libcurlUnavailable(let reason): .libcurlUnavailable(reason: reason)
        case .cannotConnect(let reason): .cannotConnect(url: url, attempts: attempts, reason: reason)
        case .timedOut(let reason), .ranOutOfTime(let reason): .timedOut(url: url, attempts: attempts, reason: reason)
        case .tls(let reason): .tlsFailure(url: url, reason: reason)
        case .pinnedKeyMismatch: .pinnedKeyMismatch(url: url)
        case .tooLarge(let limit): .responseTooLarge(url: url, limit: limit)
        case .transfer(let reason, _): .transferFailed(url: url, attempts: attempts, reason: reason)
        case .cannotWriteFile(let path, let reason): .cannotWriteFile(path: path, reason: reason)
        case .cancelled: .cancelled(url: url)
        }
    }

    /// Classifies what curl_easy_perform returned. `wasRedirected` tells a redirect to a
    /// forbidden scheme from a bad URL given by the caller.
    init(code: CURLcode, message: String, wasRedirected: Bool) {
        switch code {
        case CURLE_UNSUPPORTED_PROTOCOL, CURLE_URL_MALFORMAT:
            self = wasRedirected ? .transfer(reason: "redirected to a URL that is not http or https", isRetryable: false) : .invalidURL
        case CURLE_COULDNT_RESOLVE_HOST, CURLE_COULDNT_RESOLVE_PROXY, CURLE_COULDNT_CONNECT:
            self = .cannotConnect(reason: message)
        case CURLE_OPERATION_TIMEDOUT:
            self = .timedOut(reason: message)
        case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
            self = .pinnedKeyMismatch
        case CURLE_SSL_CONNECT_ERROR, CURLE_PEER_FAILED_VERIFICATION, CURLE_SSL_CERTPROBLEM, CURLE_SSL_CIPHER,
            CURLE_SSL_CACERT_BADFILE, CURLE_SSL_ISSUER_ERROR, CURLE_SSL_CRL_BADFILE, CURLE_SSL_INVALIDCERTSTATUS,
            CURLE_SSL_ENGINE_NOTFOUND, CURLE_SSL_ENGINE_SETFAILED, CURLE_SSL_ENGINE_INITFAILED, CURLE_USE_SSL_FAILED:
            self = .tls(reason: message)
        case CURLE_ABORTED_BY_CALLBACK:
            // Only the cancellation check in our progress callback aborts.
            self = .cancelled
        case CURLE_TOO_MANY_REDIRECTS, CURLE_OUT_OF_MEMORY, CURLE_NOT_BUILT_IN, CURLE_UNKNOWN_OPTION,
            CURLE_BAD_FUNCTION_ARGUMENT, CURLE_FAILED_INIT:
            self = .transfer(reason: message, isRetryable: false)
        default:
            // Partial bodies, resets, empty or malformed replies: worth another attempt.
            self = .transfer(reason: message, isRetryable: true)
        }
    }
}
