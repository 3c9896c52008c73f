import Foundation
import HTTPTypes
import Hummingbird
import PositiveListServer
import ServiceLifecycle
import Waits

/// `GET /v1/generation?after=G&keys=K`, the long poll (on only when `longPollSeconds` is set):
/// answers `200 {"generation": g, "keyGeneration": 0}` as soon as the published list log's tree
/// size is above G (at once if it already is, or if K, a retired key index generation, is not
/// 0), or `204` after `longPollSeconds` with nothing new (``GenerationWatch``). The answer is a
/// hint, not the list: the node then revalidates the checkpoint as usual, so a lying answer
/// costs it one conditional request.
package struct GenerationAPI: Sendable {
    let watch: GenerationWatch
    let timeout: Duration

    package init(watch: GenerationWatch, timeout: Duration) {
        self.watch = watch
        self.timeout = timeout
    }

    package func addRoutes(to router: Router<PositiveListRequestContext>, table: inout RouteTable) {
        table.add("v1/generation", .get, to: router) { request, _ in try await answer(request) }
    }

    /// The path without the long poll (no `longPollSeconds`): GET answers 404 `not_found`, as
    /// docs/openapi.yaml says, and the path stays known, so that another method is answered 405
    /// with `Allow: GET` whether the poll is on or off, as on every other documented path (an
    /// unrouted path would answer 404 to every method, which the document does not describe).
    package static func addTurnedOffRoute(to router: Router<PositiveListRequestContext>, table: inout RouteTable) {
        table.add("v1/generation", .get, to: router) { _, _ in
            throw APIError(
                .notFound, "not_found",
                "This server has no long poll (longPollSeconds is not set); revalidate the signed indexes on your own schedule.")
        }
    }

    private func answer(_ request: Request) async throws -> Response {
        let query = request.uri.queryParameters
        func generation(_ name: String) throws -> UInt64 {
            guard let text = query[Substring(name)] else { return 0 }
            guard let value = UInt64(text) else {
                throw APIError(.badRequest, "invalid_generation", "\(name) must be a whole number, the generation the node holds (0 for none).")
            }
            return value
        }
        let held = GenerationWatch.Generations(generation: try generation("after"), keyGeneration: try generation("keys"))
        let headers: HTTPFields = [.cacheControl: "no-store"]
        // The HTTP server is the first service to stop and drains its requests before the
        // scheduler stops the watch, so a held poll would keep a stopping server up until its
        // timeout: the server's own shutdown ends the polls.
        let watch = self.watch
        let outcome = await withGracefulShutdownHandler {
            await watch.wait(after: held, until: Deadline(.now + timeout, on: ContinuousClock()))
        } onGracefulShutdown: {
            Task { await watch.stop() }
        }
        let newer: GenerationWatch.Generations
        switch outcome {
        case .newer(let generations): newer = generations
        case .nothingNew: return Response(status: .noContent, headers: headers)
        case .full: throw APIError.longPollsFull(retryAfterSeconds: Int(timeout.components.seconds))
        }
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        var jsonHeaders = headers
        jsonHeaders[.contentType] = "application/json"
        return Response(status: .ok, headers: jsonHeaders, body: ResponseBody(byteBuffer: ByteBuffer(bytes: try encoder.encode(newer))))
    }
}
