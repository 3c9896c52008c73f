import Foundation
import HTTPTypes
import Prometheus

/// One server's metrics: its own Prometheus registry (no global `MetricsSystem.bootstrap`, so
/// that the tests' many servers in one process never share counters) and the handles the
/// server's parts record into: the submission API its answers, the scheduler its publications
/// and syncs, the connection limiter its refusals, the console its sign-ins, the HTTP responder
/// every request. What other parts own (open connections, held long polls, the store) is read
/// just before each scrape (``sample``).
///
/// Nothing personal: every label takes its values from a small set fixed here (kinds, outcomes
/// from the API's own error codes, the router's route patterns, status codes); never an upload
/// code, an id, a key, an address, a token or an account name. Any other value becomes "other".
final class ServerMetrics: Sendable {
    let registry = PrometheusCollectorRegistry()

    static let prefix = "tracer_server"

    // MARK: Fixed label values

    /// What an upload's answer was: stored, replayed (an Idempotency-Key seen before), or the
    /// API's error code (docs/openapi.yaml); anything else, "other".
    static let uploadOutcomes: Set<String> = [
        "stored", "replayed",
        // Credentials and the limit.
        "missing_credentials", "conflicting_credentials", "invalid_token", "invalid_code", "expired_code", "revoked_code", "used_code",
        "too_many_attempts", "upload_kind_not_accepted",
        // The request.
        "unsupported_media_type", "invalid_idempotency_key", "idempotency_key_reused", "body_too_large", "too_many_chunks", "invalid_json",
        "incomplete_request", "malformed_request", "trailers_too_large",
        // An id history's rules.
        "empty_history", "too_many_ids", "invalid_id", "invalid_window", "window_too_long", "window_too_old", "window_in_future",
        // A key history's rules.
        "too_many_keys", "invalid_key", "invalid_interval", "day_too_old", "day_in_future", "duplicate_day",
        // The server.
        "store_unavailable", "internal_error", "other",
    ]

    static let httpMethods: Set<String> = ["GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS"]
    /// The route label of a request no route matched.
    static let unmatchedRoute = "unmatched"

    enum UploadKind: String { case ids, keys }
    enum CodeEvent: String { case issued, used }
    enum ShedReason: String {
        /// The address held as many connections as it may.
        case addressAtLimit = "address_at_limit"
        /// The server held as many as it may and none was idle.
        case serverFull = "server_full"
        /// An idle connection of the busiest address, closed to make room.
        case idleEvicted = "idle_evicted"
    }
    enum SignInOutcome: String { case accepted, refused, limited, failed }

    // MARK: Handles

    private let publicationDuration: DurationHistogram
    private let publicationFailures: Counter
    private let publicationLastSuccess: Gauge
    private let logTreeSize: Gauge
    private let syncFailures: Counter
    private let syncLastSuccess: Gauge
    private let syncs: Counter
    let connectionsOpen: Gauge
    let longPollsHeld: Gauge
    let storeUp: Gauge
    let uploadCodesOpen: Gauge

    static let httpBuckets: [Duration] = [
        .milliseconds(5), .milliseconds(10), .milliseconds(25), .milliseconds(50), .milliseconds(100), .milliseconds(250),
        .milliseconds(500), .seconds(1), .seconds(2.5), .seconds(5), .seconds(10), .seconds(30), .seconds(60), .seconds(300),
    ]
    static let publicationBuckets: [Duration] = [
        .milliseconds(50), .milliseconds(100), .milliseconds(250), .milliseconds(500), .seconds(1), .seconds(2.5), .seconds(5),
        .seconds(10), .seconds(30), .seconds(60), .seconds(120), .seconds(300),
    ]

    init() {
        publicationDuration = registry.makeDurationHistogram(
            descriptor: Self.name("publication_duration", "seconds", "How long publications took, successful or not."), labels: [],
            buckets: Self.publicationBuckets)
        publicationFailures = registry.makeCounter(descriptor: Self.name("publication_failures", "total", "Publications that failed (retried after a back-off)."))
        publicationLastSuccess = registry.makeGauge(
            descriptor: Self.name("publication_last_success", "timestamp_seconds", "Unix time of the last successful publication (0: none since the start)."))
        logTreeSize = registry.makeGauge(descriptor: Self.name("publication_log_tree_size", "", "Entries in the published log (its checkpoint's tree size)."))
        syncFailures = registry.makeCounter(descriptor: Self.name("object_store_sync_failures", "total", "Object store syncs that failed."))
        syncs = registry.makeCounter(descriptor: Self.name("object_store_syncs", "total", "Object store syncs that succeeded."))
        syncLastSuccess = registry.makeGauge(
            descriptor: Self.name("object_store_sync_last_success", "timestamp_seconds", "Unix time of the last successful object store sync (0: none since the start)."))
        connectionsOpen = registry.makeGauge(descriptor: Self.name("connections_open", "", "API connections open, counted against maxConnections."))
        longPollsHeld = registry.makeGauge(descriptor: Self.name("long_polls_held", "", "GET /v1/generation requests held waiting for a new generation."))
        storeUp = registry.makeGauge(descriptor: Self.name("store_up", "", "1 when the database answered the scrape's query within 2 s, else 0."))
        uploadCodesOpen = registry.makeGauge(descriptor: Self.name("upload_codes_open", "", "Upload codes issued and neither used nor expired."))
        // Every labelled family shows from the first scrape, so that queries and alerts find
        // zeros rather than nothing before the first event.
        for kind in [UploadKind.ids, .keys] {
            for outcome in ["stored", "replayed"] { _ = uploads(kind, outcome) }
            publicationGauge("pending", kind)
            publicationGauge("live_batches", kind)
            publicationGauge("index_generation", kind)
        }
        for event in [CodeEvent.issued, .used] { _ = codes(event) }
        for reason in [ShedReason.addressAtLimit, .serverFull, .idleEvicted] { _ = shed(reason) }
        for outcome in [SignInOutcome.accepted, .refused, .limited, .failed] { _ = signIns(outcome) }
    }

    static func name(_ metric: String, _ unit: String, _ help: String) -> MetricNameDescriptor {
        MetricNameDescriptor(namespace: prefix, metricName: metric, unitName: unit, helpText: help)
    }

    // MARK: Uploads and codes

    private func uploads(_ kind: UploadKind, _ outcome: String) -> Counter {
        registry.makeCounter(
            descriptor: Self.name("uploads", "total", "Uploads answered, by kind (ids, keys) and outcome (stored, replayed or the API's error code)."),
            labels: [("kind", kind.rawValue), ("outcome", Self.uploadOutcomes.contains(outcome) ? outcome : "other")])
    }

    func upload(_ kind: UploadKind, outcome: String) { uploads(kind, outcome).increment() }

    private func codes(_ event: CodeEvent) -> Counter {
        registry.makeCounter(
            descriptor: Self.name("upload_codes", "total", "Upload codes issued (API and console) and used by a stored upload."),
            labels: [("event", event.rawValue)])
    }

    func uploadCode(_ event: CodeEvent) { codes(event).increment() }

    // MARK: Publication and sync

    @discardableResult
    private func publicationGauge(_ metric: String, _ kind: UploadKind) -> Gauge {
        let help = switch metric {
        case "pending": "Accepted ids or keys held until they may be published (ids still valid, keys before their day's end and delay)."
        case "live_batches": "Batches the published index lists."
        default: "Generation of the published index."
        }
        return registry.makeGauge(descriptor: Self.name("publication_" + metric, "", help), labels: [("kind", kind.rawValue)])
    }

    func publicationSucceeded(_ report: PublishReport, took duration: Duration) {
        publicationDuration.record(duration)
        publicationLastSuccess.set(Double(report.publishedAt))
        publicationGauge("pending", .ids).set(Double(report.waitingIDs))
        publicationGauge("pending", .keys).set(Double(report.waitingKeys))
        publicationGauge("live_batches", .ids).set(Double(report.liveBatches))
        publicationGauge("live_batches", .keys).set(Double(report.liveKeyBatches))
        if let generation = report.indexGeneration { publicationGauge("index_generation", .ids).set(Double(generation)) }
        if let generation = report.keyIndexGeneration { publicationGauge("index_generation", .keys).set(Double(generation)) }
        if let log = report.log { logTreeSize.set(Double(log.treeSize)) }
    }

    func publicationFailed(took duration: Duration) {
        publicationDuration.record(duration)
        publicationFailures.increment()
    }

    func syncSucceeded(at time: Int64) {
        syncs.increment()
        syncLastSuccess.set(Double(time))
    }

    func syncFailed() { syncFailures.increment() }

    // MARK: Connections, console, HTTP

    private func shed(_ reason: ShedReason) -> Counter {
        registry.makeCounter(
            descriptor: Self.name("connections_shed", "total", "API connections refused or closed by the connection limits, by reason."),
            labels: [("reason", reason.rawValue)])
    }

    func connectionShed(_ reason: ShedReason) { shed(reason).increment() }

    private func signIns(_ outcome: SignInOutcome) -> Counter {
        registry.makeCounter(
            descriptor: Self.name("console_sign_ins", "total", "Console sign-ins by outcome: accepted, refused (wrong name or password), limited (too many failures), failed (an error)."),
            labels: [("outcome", outcome.rawValue)])
    }

    func consoleSignIn(_ outcome: SignInOutcome) { signIns(outcome).increment() }

    /// One API request: `route` is the router's pattern (nil when none matched), never the path.
    func request(route: String?, method: HTTPRequest.Method, status: Int, took duration: Duration) {
        let labels = [
            ("route", route ?? Self.unmatchedRoute),
            ("method", Self.httpMethods.contains(method.rawValue) ? method.rawValue : "other"),
        ]
        registry.makeCounter(
            descriptor: Self.name("http_requests", "total", "API requests answered, by route pattern, method and status code."),
            labels: labels + [("status", (100...599).contains(status) ? String(status) : "other")]
        ).increment()
        registry.makeDurationHistogram(
            descriptor: Self.name("http_request_duration", "seconds", "Time to answer API requests (to the response's head), by route pattern and method."),
            labels: labels, buckets: Self.httpBuckets
        ).record(duration)
    }

    /// A PostgreSQL pool's connections: idle, busy, and requests waiting for one.
    func databasePool(_ usage: ConnectionPoolUsage) {
        let connections = Self.name("database_pool_connections", "", "PostgreSQL pool connections by state (idle, busy).")
        registry.makeGauge(descriptor: connections, labels: [("state", "idle")]).set(Double(usage.idle))
        registry.makeGauge(descriptor: connections, labels: [("state", "busy")]).set(Double(usage.size - usage.idle))
        registry.makeGauge(descriptor: Self.name("database_pool_waiters", "", "Requests waiting for a PostgreSQL pool connection."))
            .set(Double(usage.waiting))
    }

    /// The exposition in Prometheus's text format (0.0.4).
    func exposition() -> [UInt8] { registry.emitToBuffer() }
}
