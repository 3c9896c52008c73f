import Foundation
import Hummingbird
import HummingbirdCore
import IDRotation
import Logging
import NIOCore
import ServiceLifecycle

/// Everything one running server shares: its settings, its database, its publisher.
public struct ServerComponents: Sendable {
    public let configuration: ServerConfiguration
    public let store: any SubmissionStore
    public let publisher: Publisher
    public let directory: PublishedDirectory
    public let clock: any WallClock
    /// Run after each scheduled publication when the configuration's objectStore section asks
    /// for it (`syncAfterPublish`).
    public let objectStoreSync: ObjectStoreSync?

    public init(
        configuration: ServerConfiguration, store: any SubmissionStore, publisher: Publisher, directory: PublishedDirectory, clock: any WallClock,
        objectStoreSync: ObjectStoreSync? = nil
    ) {
        self.configuration = configuration
        self.store = store
        self.publisher = publisher
        self.directory = directory
        self.clock = clock
        self.objectStoreSync = objectStoreSync
    }
}

/// Builds the Hummingbird application: the submission API, the published files and `/healthz`.
public enum PositiveListHTTPServer {
    public static func makeApplication(
        _ components: ServerComponents, address: BindAddress, logger: Logger, publishOnSchedule: Bool = true
    ) -> some ApplicationProtocol {
        let router = Router(context: PositiveListRequestContext.self)
        var routes = RouteTable()
        SubmissionAPI(configuration: components.configuration, store: components.store, clock: components.clock)
            .addRoutes(to: router, table: &routes)
        PublishedFileServer(directory: components.directory, indexMaxAgeSeconds: components.configuration.indexMaxAgeSeconds)
            .addRoutes(to: router, table: &routes)
        routes.add("healthz", .get, to: router) { _, _ in
            // A database that cannot be read makes this throw; the error responder answers 503.
            _ = try await components.store.summary(now: components.clock.now())
            return Response(
                status: .ok, headers: [.contentType: "application/json"],
                body: ResponseBody(byteBuffer: ByteBuffer(string: "{\"status\":\"ok\"}")))
        }
        var services: [any Service] = []
        if publishOnSchedule {
            services.append(PublishScheduler(
                publisher: components.publisher, interval: .seconds(components.configuration.publishIntervalSeconds), logger: logger,
                sync: components.objectStoreSync))
        }
        // The idle timeout closes a connection that sends nothing, or sends its head a byte at a
        // time (Hummingbird sees no progress until the head is whole), after this long; and one
        // left open between requests. The read deadline bounds a body sent slowly.
        let requestReadTimeout = TimeAmount.seconds(Int64(components.configuration.requestReadTimeoutSeconds))
        let http1 = HTTP1Channel.Configuration(
            additionalChannelHandlers: [MalformedRequestResponder(), RequestReadDeadline(limit: requestReadTimeout)],
            idleTimeout: .seconds(Int64(components.configuration.idleTimeoutSeconds)))
        return Application(
            responder: JSONErrorResponder(wrapped: router.buildResponder(), routes: routes),
            server: .http1(configuration: http1),
            configuration: ApplicationConfiguration(address: address, serverName: nil),
            services: services,
            logger: logger)
    }
}
