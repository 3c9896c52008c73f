import CurlHTTP
import PositiveListFormat

/// The node's side of `GET /v1/generation` (a server with `longPollSeconds`): one request held
/// by the server until it publishes a generation newer than the cache's, or until its timeout.
/// The answer only says when to revalidate; what the node matches still comes from the signed
/// indexes, so a wrong answer costs one conditional request.
public struct GenerationLongPoll: Sendable {
    public let serverURL: String
    public let cache: PositiveListCache
    public let publicKey: PositiveListPublicKey
    let http: any HTTPTransferring

    /// `http` must allow an answer to take the server's longest hold (300 s) and to send
    /// nothing meanwhile (see ``clientConfiguration(_:)``).
    public init(serverURL: String, cache: PositiveListCache, publicKey: PositiveListPublicKey, http: any HTTPTransferring) {
        self.serverURL = serverURL.hasSuffix("/") ? String(serverURL.dropLast()) : serverURL
        self.cache = cache
        self.publicKey = publicKey
        self.http = http
    }

    /// `base` with room for a held request: a timeout above the server's longest hold, and no
    /// low-speed abort (a held request sends nothing until it answers).
    public static func clientConfiguration(_ base: HTTPClientConfiguration) -> HTTPClientConfiguration {
        var configuration = base
        configuration.baseTimeout = .seconds(330)
        configuration.minimumTransferRate = 0
        configuration.retry = RetryPolicy(maxAttempts: 1)
        return configuration
    }

    /// True when the server says a newer generation is published, false when the poll ended
    /// with nothing new (204).
    public func waitForNewGeneration() async throws(ListUpdateError) -> Bool {
        let (held, heldKeys) = heldGenerations()
        let url = serverURL + "/v1/generation?after=\(held)&keys=\(heldKeys)"
        let response: HTTPResponse
        do { response = try await http.perform(HTTPRequest(url: url, maximumByteCount: 1_024)) } catch {
            if case .cancelled = error { throw .cancelled }
            throw .network(error)
        }
        switch response.status {
        case 200: return true
        case 204: return false
        default: throw .unexpectedStatus(url: url, status: response.status)
        }
    }

    /// The generations of the id and key indexes the cache holds verified (0 for none), the
    /// ones a poll asks the server to go beyond.
    public func heldGenerations() -> (ids: UInt64, keys: UInt64) {
        (cache.index(publicKey: publicKey)?.generation ?? 0, cache.keyIndex(publicKey: publicKey)?.generation ?? 0)
    }
}
