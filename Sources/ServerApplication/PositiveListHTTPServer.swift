import AuthorityConsole
import Foundation
import Hummingbird
import HummingbirdCore
import Logging
import NIOCore
import NIOHTTPTypes
import NIOHTTPTypesHTTP1
import PositiveListFormat
import PositiveListServer
import ServerHTTPAPI
import ServerStorage
import ServiceLifecycle
import TracerCore

/// Everything one running server shares: its settings, its database, its publisher.
public struct ServerComponents: Sendable {
    public let configuration: PositiveListServer.ServerConfiguration
    public let store: any SubmissionStore
    public let publisher: Publisher
    public let directory: PublishedDirectory
    public let clock: any WallClock
    /// Run after each scheduled publication when the configuration's objectStore section asks
    /// for it (`syncAfterPublish`).
    public let objectStoreSync: ObjectStoreSync?
    /// Where syncs, scheduled or from `tracer-server sync`, record their outcome (the console reads it).
    public let objectStoreSyncRecord: String?
    /// The signing key's public half, with which the console checks the indexes it reports on.
    public let publicKey: PositiveListPublicKey?
    /// The witness role (`witnessedLogs`): `POST /v1/add-checkpoint` is routed only with one.
    public let witness: CheckpointWitness?

    public init(
        configuration: PositiveListServer.ServerConfiguration, store: any SubmissionStore, publisher: Publisher, directory: PublishedDirectory, clock: any WallClock,
        objectStoreSync: ObjectStoreSync? = nil, objectStoreSyncRecord: String? = nil, publicKey: PositiveListPublicKey? = nil,
        witness: CheckpointWitness? = nil
    ) {
        self.witness = witness
        self.configuration = configuration
        self.store = store
        self.publisher = publisher
        self.directory = directory
        self.clock = clock
        self.objectStoreSync = objectStoreSync
        self.objectStoreSyncRecord = objectStoreSyncRecord
        self.publicKey = publicKey
    }
}

/// Builds the Hummingbird application: the submission API, the published files and `/healthz`.
public enum PositiveListHTTPServer {
    public static func makeApplication(
        _ components: ServerComponents, address: BindAddress, logger: Logger, publishOnSchedule: Bool = true
    ) -> some ApplicationProtocol {
        let router = Router(context: PositiveListRequestContext.self)
        // Uploads ask the scheduler to publish; without a schedule (tests, `publish` by hand)
        // nobody would answer.
        let demand = publishOnSchedule ? PublicationDemand() : nil
        let limits = connectionLimits(components.configuration, logger: logger)
        // Only with a metrics listener: without one nothing is counted at all.
        let metrics = components.configuration.metrics.flatMap { $0.enabled ? ServerMetrics() : nil }
        // A quarter of the connections at most wait in long polls, so that uploads, downloads
        // and health checks always find room.
        let watch = components.configuration.longPollSeconds.map { _ in
            GenerationWatch(directory: components.directory, identity: components.publisher.logIdentity, maxWaiters: limits.total / 4)
        }
        let routes = addRoutes(components, to: router, demand: demand, watch: watch, metrics: metrics)
        // The idle timeout closes a connection that sends nothing, or sends its head a byte at a
        // time (Hummingbird sees no progress until the head is whole), after this long; and one
        // left open between requests. The read deadline bounds a body sent slowly.
        let requestReadTimeout = TimeAmount.seconds(Int64(components.configuration.requestReadTimeoutSeconds))
        let limiter = ConnectionLimiter(
            limits: limits,
            unlimitedAddresses: components.configuration.trustForwardedFor
                ? Set(components.configuration.trustedProxies.compactMap(ForwardedFor.canonicalAddress)) : [],
            metrics: metrics)
        var services: [any Service] = []
        if publishOnSchedule {
            var scheduler = PublishScheduler(
                publisher: components.publisher, interval: .seconds(components.configuration.publishIntervalSeconds),
                spacing: .seconds(components.configuration.publishSpacingSeconds), demand: demand, watch: watch, logger: logger,
                sync: components.objectStoreSync,
                retry: RetryBackoff(longest: .seconds(components.configuration.publishRetryMaxSeconds)))
            scheduler.metrics = metrics
            services.append(scheduler)
        }
        if let metrics, let settings = components.configuration.metrics {
            let store = StoreSampler { [store = components.store, clock = components.clock] in try await store.uploadCodeCounts(now: clock.now()) }
            services.append(MetricsServer(
                settings: settings, metrics: metrics,
                sample: { await sampleOwnedState(metrics, store: store, components: components, limiter: limiter, watch: watch) },
                idleTimeoutSeconds: components.configuration.idleTimeoutSeconds
            ).makeService(logger: logger))
        }
        if let console = components.configuration.console, console.enabled {
            // Both stores keep the console's tables; a store without them (a test's) has no console.
            if let consoleStore = components.store as? any ConsoleStore {
                var consoleServer = ConsoleServer(
                    settings: console, configuration: components.configuration, codes: components.store, store: consoleStore, clock: components.clock,
                    publication: components.publicKey.map { _ in
                        ConsolePublication(
                            directory: components.directory, logIdentity: components.publisher.logIdentity,
                            objectStoreSyncRecord: components.configuration.objectStore == nil ? nil : components.objectStoreSyncRecord,
                            publicationRecord: components.publisher.recordPath)
                    })
                consoleServer.metrics = metrics
                services.append(consoleServer.makeApplication(logger: logger))
            } else {
                logger.error("console not started: the store does not keep console accounts")
            }
        }
        let http1 = HTTP1Channel.Configuration(
            additionalChannelHandlers: [
                MalformedRequestResponder(), RequestReadDeadline(limit: requestReadTimeout),
                RequestFraming(maxBodyParts: SubmissionAPI.maxBodyParts, limiter: limiter),
            ],
            idleTimeout: .seconds(Int64(components.configuration.idleTimeoutSeconds)))
        return Application(
            responder: MetricsResponder(
                wrapped: JSONErrorResponder(wrapped: router.buildResponder(), routes: routes), metrics: metrics, routes: routes.patterns),
            server: HTTPServerBuilder { responder in
                GuardedHTTP1Channel(http1: HTTP1Channel(responder: responder, configuration: http1), limiter: limiter)
            },
            configuration: ApplicationConfiguration(address: address, serverName: nil),
            services: services,
            logger: logger)
    }
}

extension PositiveListHTTPServer {
    /// The API's routes on `router`: the submission API, the long poll (or its turned-off
    /// answer), the published files, the witness's, `/healthz`.
    static func addRoutes(
        _ components: ServerComponents, to router: Router<PositiveListRequestContext>, demand: PublicationDemand?, watch: GenerationWatch?,
        metrics: ServerMetrics?
    ) -> RouteTable {
        var routes = RouteTable()
        SubmissionAPI(configuration: components.configuration, store: components.store, clock: components.clock, demand: demand, metrics: metrics)
            .addRoutes(to: router, table: &routes)
        if let watch, let seconds = components.configuration.longPollSeconds {
            GenerationAPI(watch: watch, timeout: .seconds(seconds)).addRoutes(to: router, table: &routes)
        } else {
            GenerationAPI.addTurnedOffRoute(to: router, table: &routes)
        }
        PublishedFileServer(directory: components.directory, indexMaxAgeSeconds: components.configuration.indexMaxAgeSeconds)
            .addRoutes(to: router, table: &routes)
        if let witness = components.witness {
            WitnessAPI(witness: witness).addRoutes(to: router, table: &routes)
        }
        routes.add("healthz", .get, to: router) { _, _ in
            // A database that cannot be read makes this throw; the error responder answers 503.
            // The scrape's one short query, not the summary's counts of whole tables: load
            // balancers and monitors ask this every few seconds.
            _ = try await components.store.uploadCodeCounts(now: components.clock.now())
            return Response(
                status: .ok, headers: [.contentType: "application/json"],
                body: ResponseBody(byteBuffer: ByteBuffer(string: "{\"status\":\"ok\"}")))
        }
        return routes
    }

    /// The route patterns the API of `components` has (the values the metrics' route label may
    /// take besides "unmatched"), from a router built as `makeApplication` builds its own.
    static func routePatterns(_ components: ServerComponents) -> Set<String> {
        addRoutes(components, to: Router(context: PositiveListRequestContext.self), demand: nil, watch: nil, metrics: nil).patterns
    }

    /// What the metrics read from the parts that own it, before each scrape: open connections,
    /// held long polls, whether the store answers with its open upload codes (one short query,
    /// at most one in flight, reused for a few seconds, waited for 2 s at most: ``StoreSampler``),
    /// and its connection pool's use, if it has one.
    static func sampleOwnedState(
        _ metrics: ServerMetrics, store: StoreSampler, components: ServerComponents, limiter: ConnectionLimiter, watch: GenerationWatch?
    ) async {
        metrics.connectionsOpen.set(Double(limiter.openConnections))
        // The publisher's clock, which stamped the publications the lag counts from.
        metrics.sampleSyncLag(now: components.clock.now())
        if let watch { metrics.longPollsHeld.set(Double(await watch.heldPolls)) }
        switch await store.sample() {
        case .up(let codes):
            metrics.storeUp.set(1.0)
            metrics.uploadCodesOpen.set(Double(codes.open))
            metrics.uploadCodesExpiredUnused.set(Double(codes.expiredUnused))
        case .down:
            metrics.storeUp.set(0.0)
        }
        if let usage = components.store.connectionPoolUsage { metrics.databasePool(usage) }
    }

    /// The configuration's limits for this process's descriptor limit; when those cannot be
    /// met (`serve` checks before it starts), the largest that leave the reserve.
    static func connectionLimits(_ configuration: PositiveListServer.ServerConfiguration, logger: Logger) -> ConnectionLimits {
        let descriptorLimit = ConnectionLimits.currentDescriptorLimit()
        do {
            return try configuration.connectionLimits(descriptorLimit: descriptorLimit)
        } catch {
            logger.warning("connection limits lowered", metadata: ["reason": "\(error)"])
            var lowered = configuration
            lowered.maxConnections = nil
            return (try? lowered.connectionLimits(descriptorLimit: descriptorLimit)) ?? ConnectionLimits(total: 16, perAddress: 8)
        }
    }
}

/// Hummingbird's HTTP/1.1 connection with the server's own handlers where Hummingbird's
/// `additionalChannelHandlers` cannot put them: the connection limit first of all, decided
/// before any byte is parsed, and ``RequestHeadPolicy`` before the HTTP types codec, where the
/// request's version is still known. A refused connection gets no HTTP pipeline at all: a
/// flood's refused connections cost the server an accept, a write and a close.
struct GuardedHTTP1Channel: ServerChildChannel {
    typealias Value = HTTP1Channel.Value

    let http1: HTTP1Channel
    let limiter: ConnectionLimiter

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        let peer = channel.remoteAddress?.ipAddress ?? "unknown"
        // The spelling the trusted proxies are listed in, so that they are recognised.
        let address = ForwardedFor.canonicalAddress(peer) ?? peer
        let refusal: ConnectionLimiter.Refusal?
        switch limiter.admit(channel, address: address) {
        case .admitted: refusal = nil
        case .refused(let reason): refusal = reason
        }
        do {
            try channel.pipeline.syncOperations.addHandler(ConnectionAdmissionHandler(limiter: limiter, refusal: refusal))
            if refusal != nil {
                // Hummingbird still runs its loop on it; it reads nothing and ends at the close.
                return channel.eventLoop.makeSucceededFuture(
                    try NIOAsyncChannel(wrappingChannelSynchronously: channel, configuration: .init(isOutboundHalfClosureEnabled: true)))
            }
        } catch {
            if refusal == nil { limiter.release(channel) }
            return channel.eventLoop.makeFailedFuture(error)
        }
        return http1.setup(channel: channel, logger: logger).flatMapThrowing { value in
            let codec = try channel.pipeline.syncOperations.handler(type: HTTP1ToHTTPServerCodec.self)
            try channel.pipeline.syncOperations.addHandler(RequestHeadPolicy(), position: .before(codec))
            return value
        }
    }

    func handle(value: Value, logger: Logger) async {
        await http1.handle(value: value, logger: logger)
    }
}
