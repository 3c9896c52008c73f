import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdCore
import Logging
import NIOCore
import PositiveListServer
import ServiceLifecycle

/// The metrics listener (`metrics.listen`): `GET /metrics` in Prometheus's text format, and
/// nothing else. Its own Hummingbird application, run as a service of the API's as the console
/// is, so that the API's address never answers `/metrics`.
package struct MetricsServer: Sendable {
    static let contentType = "text/plain; version=0.0.4; charset=utf-8"

    let settings: MetricsSettings
    let metrics: ServerMetrics
    /// Reads what other parts own into the metrics' gauges, just before each scrape.
    let sample: @Sendable () async -> Void
    let idleTimeoutSeconds: Int

    /// The listener as a service of the API's: it logs the address it bound, and a port in use
    /// ends it (and so `serve`) with ``ListenerInUse`` naming `metrics.listen`.
    package init(settings: MetricsSettings, metrics: ServerMetrics, sample: @escaping @Sendable () async -> Void, idleTimeoutSeconds: Int) {
        self.settings = settings
        self.metrics = metrics
        self.sample = sample
        self.idleTimeoutSeconds = idleTimeoutSeconds
    }

    package func makeService(logger: Logger) -> some Service {
        let router = Router(context: PositiveListRequestContext.self)
        router.get("metrics") { _, _ in
            await sample()
            return Response(
                status: .ok, headers: [.contentType: Self.contentType, .cacheControl: "no-store"],
                body: ResponseBody(byteBuffer: ByteBuffer(bytes: metrics.exposition())))
        }
        let application = Application(
            router: router,
            server: .http1(configuration: HTTP1Channel.Configuration(idleTimeout: .seconds(Int64(idleTimeoutSeconds)))),
            configuration: ApplicationConfiguration(address: .hostname(settings.host, port: settings.port), serverName: nil),
            onServerRunning: { channel in
                logger.info("metrics listening", metadata: [
                    "address": "\(channel.localAddress?.ipAddress ?? settings.host):\(channel.localAddress?.port ?? settings.port)", "path": "/metrics",
                ])
            },
            logger: logger)
        return ListenerService(application: application, setting: "metrics.listen", address: "\(settings.host):\(settings.port)")
    }
}

/// A listener of its own (`metrics.listen`) could not bind: its port is taken.
public struct ListenerInUse: Error, CustomStringConvertible {
    /// The configuration's setting, such as `metrics.listen`.
    public let setting: String
    /// HOST:PORT as configured.
    public let address: String

    public var description: String { "\(setting) \(address) is in use" }
}

/// An application run as a service of the API's, whose bind failure for a port in use says
/// which setting named the port instead of NIO's bare `bind(...)` error.
struct ListenerService<Wrapped: ApplicationProtocol>: Service {
    let application: Wrapped
    let setting: String
    let address: String

    func run() async throws {
        do {
            try await application.run()
        } catch let error as IOError where error.errnoCode == EADDRINUSE {
            throw ListenerInUse(setting: setting, address: address)
        }
    }
}

/// Records every API request's route pattern, method, status and time in ``ServerMetrics``:
/// around the JSON error responder, so that it sees the status every client gets.
package struct MetricsResponder<Wrapped: HTTPResponder>: HTTPResponder where Wrapped.Context: RequestContext {
    package typealias Context = Wrapped.Context
    let wrapped: Wrapped
    /// nil: no metrics listener; requests pass through uncounted.
    let metrics: ServerMetrics?
    /// The router's patterns; a request matching none (404) counts as "unmatched".
    let routes: Set<String>

    package init(wrapped: Wrapped, metrics: ServerMetrics?, routes: Set<String>) {
        self.wrapped = wrapped
        self.metrics = metrics
        self.routes = routes
    }

    package func respond(to request: Request, context: Context) async throws -> Response {
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
