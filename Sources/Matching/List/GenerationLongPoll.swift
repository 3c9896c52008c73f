import CurlHTTP
import Foundation
import Synchronization

/// The node's side of `GET /v1/generation` (a server with `longPollSeconds`): one request held
/// by the server until it publishes a generation newer than the last one the node followed, or
/// until its timeout. The answer only says when to revalidate; what the node matches still
/// comes from the verified list log, so a wrong answer costs one conditional request.
public struct GenerationLongPoll: Sendable {
    public let serverURL: String
    let http: any HTTPTransferring
    private let announced = AnnouncedGenerations()

    /// `http` must allow an answer to take the server's longest hold (300 s) and to send
    /// nothing meanwhile (see ``clientConfiguration(_:)``).
    public init(serverURL: String, http: any HTTPTransferring) {
        self.serverURL = serverURL.hasSuffix("/") ? String(serverURL.dropLast()) : serverURL
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
        case 200:
            if let answer = try? JSONDecoder().decode(Announcement.self, from: Data(response.body)) {
                announced.state.withLock { $0.pending = (answer.generation, answer.keyGeneration) }
            }
            return true
        case 204: return false
        default: throw .unexpectedStatus(url: url, status: response.status)
        }
    }

    /// The generations a poll asks the server to go beyond: the last ones the server announced
    /// after which the node brought its list up to date (0 for none yet). The log holds no
    /// generation of its own, so the announcement is the node's only measure.
    public func heldGenerations() -> (ids: UInt64, keys: UInt64) {
        announced.state.withLock { $0.followed }
    }

    /// Says that the node brought its list up to date after the last announcement: the next
    /// poll asks beyond the generations announced.
    public func followedAnnouncement() {
        announced.state.withLock { $0.followed = $0.pending }
    }

    private struct Announcement: Decodable {
        var generation: UInt64
        var keyGeneration: UInt64
    }
}

/// What the server announced and what of it the node followed; shared by the copies of one
/// poll, owned by its mutex.
private final class AnnouncedGenerations: Sendable {
    struct State {
        var pending: (ids: UInt64, keys: UInt64) = (0, 0)
        var followed: (ids: UInt64, keys: UInt64) = (0, 0)
    }

    let state = Mutex(State())
}
