import Foundation
import HTTPTypes
import Prometheus
import ServerStorage
import Synchronization

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
package final class ServerMetrics: Sendable {
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

    package enum UploadKind: String, CaseIterable { case ids, keys }
    package enum CodeEvent: String, CaseIterable { case issued, used }
    package enum ShedReason: String, CaseIterable {
        /// The address held as many connections as it may.
        case addressAtLimit = "address_at_limit"
        /// The server held as many as it may and none was idle.
        case serverFull = "server_full"
        /// An idle connection of the busiest address, closed to make room.
        case idleEvicted = "idle_evicted"
    }
    package enum SignInOutcome: String, CaseIterable { case accepted, refused, limited, failed }
    enum PublicationGauge: String, CaseIterable {
        case pending
        case liveBatches = "live_batches"
    }

    // MARK: Handles

    // Made once, in `init`, for every value of their fixed labels: recording looks a handle up
    // in a dictionary that never changes, and never takes the registry's lock (a request, a shed
    // connection in a flood). Only the HTTP families, whose label values are many more
    // combinations than are ever seen, are made on first use and kept (``requestHandles``).
    private let uploads: [UploadKind: [String: Counter]]
    private let codes: [CodeEvent: Counter]
    private let shed: [ShedReason: Counter]
    private let signIns: [SignInOutcome: Counter]
    private let publicationGauges: [PublicationGauge: [UploadKind: Gauge]]

    private let publicationDuration: DurationHistogram
    private let publicationFailures: Counter
    private let publicationLastSuccess: Gauge
    private let logTreeSize: Gauge
    private let syncFailures: Counter
    private let syncLastSuccess: Gauge
    private let syncs: Counter
    private let syncLag: Gauge
    /// The wall time of the first publication the bucket has not taken since its last successful
    /// sync; nil while it holds the last one, or with no object store.
    private let unsyncedSince = Mutex<Int64?>(nil)
    package let connectionsOpen: Gauge
    package let longPollsHeld: Gauge
    package let storeUp: Gauge
    package let uploadCodesOpen: Gauge
    package let uploadCodesExpiredUnused: Gauge

    static let httpBuckets: [Duration] = [
        .milliseconds(5), .milliseconds(10), .milliseconds(25), .milliseconds(50), .milliseconds(100), .milliseconds(250),
        .milliseconds(500), .seconds(1), .seconds(2.5), .seconds(5), .seconds(10), .seconds(30), .seconds(60), .seconds(300),
    ]
    static let publicationBuckets: [Duration] = [
        .milliseconds(50), .milliseconds(100), .milliseconds(250), .milliseconds(500), .seconds(1), .seconds(2.5), .seconds(5),
        .seconds(10), .seconds(30), .seconds(60), .seconds(120), .seconds(300),
    ]

    package init() {
        publicationDuration = registry.makeDurationHistogram(
            descriptor: Self.name("publication_duration", "seconds", "How long publications took, successful or not."), labels: [],
            buckets: Self.publicationBuckets)
        publicationFailures = registry.makeCounter(descriptor: Self.name("publication_failures", "total", "Publications that failed (retried after a back-off)."))
        publicationLastSuccess = registry.makeGauge(
            descriptor: Self.name("publication_last_success", "timestamp_seconds", "Unix time of the last successful publication (0: none since the start)."))
        logTreeSize = registry.makeGauge(descriptor: Self.name("publication_log_tree_size", "", "Entries in the published log (its checkpoint's tree size)."))
        syncFailures = registry.makeCounter(descriptor: Self.name("object_store_sync_failures", "total", "Object store syncs that failed."))
        syncs = registry.makeCounter(descriptor: Self.name("object_store_syncs", "total", "Object store syncs that succeeded."))
        syncLag = registry.makeGauge(descriptor: Self.name(
            "object_store_sync_lag", "seconds",
            "How long the bucket has lacked a publication: seconds since the first publication not synced yet; 0 while it holds the last one (or there is no object store)."))
        syncLastSuccess = registry.makeGauge(
            descriptor: Self.name("object_store_sync_last_success", "timestamp_seconds", "Unix time of the last successful object store sync (0: none since the start)."))
        connectionsOpen = registry.makeGauge(descriptor: Self.name("connections_open", "", "API connections open, counted against maxConnections."))
        longPollsHeld = registry.makeGauge(descriptor: Self.name("long_polls_held", "", "GET /v1/generation requests held waiting for a new generation."))
        storeUp = registry.makeGauge(descriptor: Self.name("store_up", "", "1 when the database answered the scrape's query within 2 s, else 0."))
        uploadCodesOpen = registry.makeGauge(descriptor: Self.name("upload_codes_open", "", "Upload codes issued and neither used nor expired."))
        uploadCodesExpiredUnused = registry.makeGauge(descriptor: Self.name(
            "upload_codes_expired_unused", "",
            "Upload codes that expired without an upload, among those the server keeps (issued within the retention period)."))
        // Every labelled family shows from the first scrape, so that queries and alerts find
        // zeros rather than nothing before the first event.
        let registry = registry
        let uploadsName = Self.name("uploads", "total", "Uploads answered, by kind (ids, keys) and outcome (stored, replayed or the API's error code).")
        uploads = Dictionary(uniqueKeysWithValues: UploadKind.allCases.map { kind in
            (kind, Dictionary(uniqueKeysWithValues: Self.uploadOutcomes.map { outcome in
                (outcome, registry.makeCounter(descriptor: uploadsName, labels: [("kind", kind.rawValue), ("outcome", outcome)]))
            }))
        })
        let codesName = Self.name("upload_codes", "total", "Upload codes issued (API and console) and used by a stored upload.")
        codes = Dictionary(uniqueKeysWithValues: CodeEvent.allCases.map {
            ($0, registry.makeCounter(descriptor: codesName, labels: [("event", $0.rawValue)]))
        })
        let shedName = Self.name("connections_shed", "total", "API connections refused or closed by the connection limits, by reason.")
        shed = Dictionary(uniqueKeysWithValues: ShedReason.allCases.map {
            ($0, registry.makeCounter(descriptor: shedName, labels: [("reason", $0.rawValue)]))
        })
        let signInsName = Self.name(
            "console_sign_ins", "total", "Console sign-ins by outcome: accepted, refused (wrong name or password), limited (too many failures), failed (an error).")
        signIns = Dictionary(uniqueKeysWithValues: SignInOutcome.allCases.map {
            ($0, registry.makeCounter(descriptor: signInsName, labels: [("outcome", $0.rawValue)]))
        })
        publicationGauges = Dictionary(uniqueKeysWithValues: PublicationGauge.allCases.map { gauge in
            let help = switch gauge {
            case .pending: "Accepted ids or keys held until they may be published (ids still valid, keys before their day's end and delay)."
            case .liveBatches: "Batches recorded and not yet expired."
            }
            let name = Self.name("publication_" + gauge.rawValue, "", help)
            return (gauge, Dictionary(uniqueKeysWithValues: UploadKind.allCases.map {
                ($0, registry.makeGauge(descriptor: name, labels: [("kind", $0.rawValue)]))
            }))
        })
    }

    static func name(_ metric: String, _ unit: String, _ help: String) -> MetricNameDescriptor {
        MetricNameDescriptor(namespace: prefix, metricName: metric, unitName: unit, helpText: help)
    }

    // MARK: Uploads and codes

    package func upload(_ kind: UploadKind, outcome: String) { (uploads[kind]![outcome] ?? uploads[kind]!["other"]!).increment() }

    package func uploadCode(_ event: CodeEvent) { codes[event]!.increment() }

    // MARK: Publication and sync

    private func publicationGauge(_ gauge: PublicationGauge, _ kind: UploadKind) -> Gauge { publicationGauges[gauge]![kind]! }

    func publicationSucceeded(_ report: PublishReport, took duration: Duration) {
        publicationDuration.record(duration)
        publicationLastSuccess.set(Double(report.publishedAt))
        publicationGauge(.pending, .ids).set(Double(report.waitingIDs))
        publicationGauge(.pending, .keys).set(Double(report.waitingKeys))
        publicationGauge(.liveBatches, .ids).set(Double(report.liveBatches))
        publicationGauge(.liveBatches, .keys).set(Double(report.liveKeyBatches))
        if let log = report.log { logTreeSize.set(Double(log.treeSize)) }
    }

    func publicationFailed(took duration: Duration) {
        publicationDuration.record(duration)
        publicationFailures.increment()
    }

    func syncSucceeded(at time: Int64) {
        syncs.increment()
        syncLastSuccess.set(Double(time))
        unsyncedSince.withLock { $0 = nil }
    }

    /// A publication at `time` that the bucket must take: the lag counts from the first one after
    /// the last successful sync.
    func publishedForSync(at time: Int64) {
        unsyncedSince.withLock { since in if since == nil { since = time } }
    }

    /// Sets the sync's lag as of `now` (at a scrape).
    package func sampleSyncLag(now: Int64) {
        syncLag.set(Double(unsyncedSince.withLock { $0 }.map { max(now - $0, 0) } ?? 0))
    }

    func syncFailed() { syncFailures.increment() }

    // MARK: Connections, console, HTTP

    package func connectionShed(_ reason: ShedReason) { shed[reason]!.increment() }

    package func consoleSignIn(_ outcome: SignInOutcome) { signIns[outcome]!.increment() }

    /// The HTTP families' handles by label values, made on first use: routes (the router's
    /// patterns and "unmatched"), methods (`httpMethods` and "other") and status codes (100-599
    /// and "other") are all fixed sets, but their product is far more than ever occurs, and each
    /// handle made shows in every scrape. Looked up under this lock of its own, held for the
    /// lookup only; the registry's is taken once per new combination.
    private struct RequestKey: Hashable {
        var route: String
        var method: String
        var status: String
    }
    private struct RequestHandles {
        var counters: [RequestKey: Counter] = [:]
        /// By route and method (`status` empty).
        var durations: [RequestKey: DurationHistogram] = [:]
    }
    private let requestHandles = Mutex(RequestHandles())

    /// One API request: `route` is the router's pattern (nil when none matched), never the path.
    package func request(route: String?, method: HTTPRequest.Method, status: Int, took duration: Duration) {
        let key = RequestKey(
            route: route ?? Self.unmatchedRoute, method: Self.httpMethods.contains(method.rawValue) ? method.rawValue : "other",
            status: (100...599).contains(status) ? String(status) : "other")
        let durationKey = RequestKey(route: key.route, method: key.method, status: "")
        let (counter, histogram) = requestHandles.withLock { ($0.counters[key], $0.durations[durationKey]) }
        (counter ?? makeRequestCounter(key)).increment()
        (histogram ?? makeRequestDuration(durationKey)).record(duration)
    }

    private func makeRequestCounter(_ key: RequestKey) -> Counter {
        let counter = registry.makeCounter(
            descriptor: Self.name("http_requests", "total", "API requests answered, by route pattern, method and status code."),
            labels: [("route", key.route), ("method", key.method), ("status", key.status)])
        requestHandles.withLock { $0.counters[key] = counter }
        return counter
    }

    private func makeRequestDuration(_ key: RequestKey) -> DurationHistogram {
        let histogram = registry.makeDurationHistogram(
            descriptor: Self.name("http_request_duration", "seconds", "Time to answer API requests (to the response's head), by route pattern and method."),
            labels: [("route", key.route), ("method", key.method)], buckets: Self.httpBuckets)
        requestHandles.withLock { $0.durations[key] = histogram }
        return histogram
    }

    /// The pool's gauges, made at the first scrape of a store that has a pool (none for SQLite).
    private let poolGauges = Mutex<(idle: Gauge, busy: Gauge, waiters: Gauge)?>(nil)

    /// A PostgreSQL pool's connections: idle, busy, and requests waiting for one.
    package func databasePool(_ usage: ConnectionPoolUsage) {
        let gauges = poolGauges.withLock { gauges in
            if let gauges { return gauges }
            let connections = Self.name("database_pool_connections", "", "PostgreSQL pool connections by state (idle, busy).")
            let made = (
                idle: registry.makeGauge(descriptor: connections, labels: [("state", "idle")]),
                busy: registry.makeGauge(descriptor: connections, labels: [("state", "busy")]),
                waiters: registry.makeGauge(descriptor: Self.name("database_pool_waiters", "", "Requests waiting for a PostgreSQL pool connection.")))
            gauges = made
            return made
        }
        gauges.idle.set(Double(usage.idle))
        gauges.busy.set(Double(usage.size - usage.idle))
        gauges.waiters.set(Double(usage.waiting))
    }

    /// The exposition in Prometheus's text format (0.0.4).
    package func exposition() -> [UInt8] { registry.emitToBuffer() }
}
