/// The node's HTTP client, on libcurl. Follows up to `maxRedirects` redirects (http and https
/// only), retries what may pass (network errors, timeouts, broken transfers, 5xx) with backoff,
/// and uses the proxy from the environment (http_proxy, https_proxy, no_proxy), which libcurl
/// reads itself.
public final class CurlHTTPClient: HTTPTransferring {
    public let configuration: HTTPClientConfiguration

    public init(configuration: HTTPClientConfiguration = .init()) {
        self.configuration = configuration
    }

    public func perform(_ request: HTTPRequest) async throws(HTTPClientError) -> HTTPResponse {
        let limit = min(configuration.maxInMemoryResponseBytes, request.maximumByteCount ?? .max)
        return try await send(request, into: .memory(limit: limit), progress: nil)
    }

    public func download(
        _ request: HTTPRequest, to path: String, progress: (@Sendable (DownloadProgress) -> Void)? = nil
    ) async throws(HTTPClientError) -> HTTPResponse {
        try await send(
            request, into: .file(path: path, limit: request.expectedByteCount, errorBodyLimit: configuration.maxErrorBodyBytes),
            progress: progress)
    }

    /// One attempt, with no retry and no check of the request, every status answered: for a client
    /// that judges each answer itself and reports libcurl's reason as it is (the object store).
    public func performOnce(_ request: HTTPRequest) async -> Result<HTTPResponse, HTTPAttemptFailure> {
        do {
            try Self.validate(request)
        } catch {
            // A line break in a signed request's header (a session token read from a file, say)
            // would inject a header of its own: not sent, whatever the caller does with failures.
            return .failure(HTTPAttemptFailure(failure: .transfer(reason: error.description, isRetryable: false), reason: error.description))
        }
        let limit = min(configuration.maxInMemoryResponseBytes, request.maximumByteCount ?? .max)
        return await CurlTransfer(request: request, configuration: configuration, destination: .memory(limit: limit), progress: nil)
            .runOnOwnThread()
    }

    private func send(
        _ request: HTTPRequest, into destination: ResponseBodyDestination, progress: (@Sendable (DownloadProgress) -> Void)?
    ) async throws(HTTPClientError) -> HTTPResponse {
        try Self.validate(request)
        let url = redactedURL(request.url)
        let transfer = CurlTransfer(request: request, configuration: configuration, destination: destination, progress: progress)
        var random = SystemRandomNumberGenerator()
        var attempts = 0
        while true {
            if Task.isCancelled { throw .cancelled(url: url) }
            attempts += 1
            let isLastAttempt = attempts >= configuration.retry.maxAttempts
            switch await transfer.runOnOwnThread() {
            case .success(let response) where response.status >= 500:
                if isLastAttempt { throw .serverError(url: url, status: response.status, attempts: attempts) }
            case .success(let response):
                return response
            case .failure(let attempt):
                let failure = attempt.failure
                if isLastAttempt || !failure.isRetryable { throw failure.error(url: url, attempts: attempts) }
            }
            do {
                try await Task.sleep(for: configuration.retry.delay(afterFailedAttempts: attempts, using: &random))
            } catch {
                throw .cancelled(url: url)
            }
        }
    }

    /// A line break in a header would let a value inject headers of its own; a NUL would cut the
    /// C string libcurl gets.
    private static func validate(_ request: HTTPRequest) throws(HTTPClientError) {
        let forbidden: Set<Unicode.Scalar> = ["\r", "\n", "\0"]
        let url = redactedURL(request.url)
        let scheme = request.url.prefix(while: { $0 != ":" }).lowercased()
        guard scheme == "http" || scheme == "https", !request.url.unicodeScalars.contains(where: forbidden.contains) else {
            throw .invalidURL(url: url)
        }
        for field in request.headers {
            let name = field.name.unicodeScalars
            guard !name.isEmpty, !name.contains(":"), !name.contains(" "), !name.contains(where: forbidden.contains),
                !field.value.unicodeScalars.contains(where: forbidden.contains)
            else {
                throw .invalidHeader(name: String(field.name.prefix(64)))
            }
        }
    }
}
