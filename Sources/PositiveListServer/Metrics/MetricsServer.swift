import HTTPTypes
import Hummingbird
import HummingbirdCore
import Logging
import NIOCore

/// The metrics listener (`metrics.listen`): `GET /metrics` in Prometheus's text format, and
/// nothing else. Its own Hummingbird application, run as a service of the API's as the console
/// is, so that the API's address never answers `/metrics`.
struct MetricsServer: Sendable {
    static let contentType = "text/plain; version=0.0.4; charset=utf-8"

    let settings: MetricsSettings
    let metrics: ServerMetrics
    /// Reads what other parts own into the metrics' gauges, just before each scrape.
    let sample: @Sendable () async -> Void
    let idleTimeoutSeconds: Int

    func makeApplication(logger: Logger) -> some ApplicationProtocol {
        let router = Router(context: PositiveListRequestContext.self)
        router.get("metrics") { _, _ in
            await sample()
            return Response(
                status: .ok, headers: [.contentType: Self.contentType, .cacheControl: "no-store"],
                body: ResponseBody(byteBuffer: ByteBuffer(bytes: metrics.exposition())))
        }
        return Application(
            router: router,
            server: .http1(configuration: HTTP1Channel.Configuration(idleTimeout: .seconds(Int64(idleTimeoutSeconds)))),
            configuration: ApplicationConfiguration(address: .hostname(settings.host, port: settings.port), serverName: nil),
            logger: logger)
    }
}

/// Records every API request's route pattern, method, status and time in ``ServerMetrics``:
/// around the JSON error responder, so that it sees the status every client gets.
struct MetricsResponder<Wrapped: HTTPResponder>: HTTPResponder where Wrapped.Context: RequestContext {
    typealias Context = Wrapped.Context
    let wrapped: Wrapped
    /// nil: no metrics listener; requests pass through uncounted.
    let metrics: ServerMetrics?
    /// The router's patterns; a request matching none (404) counts as "unmatched".
    let routes: Set<String>

    func respond(to request: Request, context: Context) async throws -> Response {
        guard let metrics else { return try await wrapped.respond(to: request, context: context) }
        let started = ContinuousClock.now
        func record(_ status: Int) {
            let route = context.endpointPath.flatMap { routes.contains($0) ? $0 : nil }
            metrics.request(route: route, method: request.method, status: status, took: .now - started)
        }
        do {
            let response = try await wrapped.respond(to: request, context: context)
            record(response.status.code)
            return response
        } catch let error as any HTTPResponseError {
            record(error.status.code)
            throw error
        } catch {
            record(500)
            throw error
        }
    }
}
