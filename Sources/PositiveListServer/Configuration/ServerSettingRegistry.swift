import Foundation
import Settings
import TracerCore

/// Every setting of the server's configuration file. Adding a setting is one row here plus its
/// `ServerConfiguration` property (which holds the default); the file reader, its checks and
/// `tracer-server config` all follow this table. Rows are read, applied and checked in this
/// order, so a row may depend on the rows above it.
enum ServerSettingRegistry {
    static let all: [ServerSettingDefinition] = [
        authorities,
        .integer("retentionDays", \.retentionDays, SettingBounds(1, 28), help: "Days an uploaded id or key is kept and listed."),
        .integer("maxIDsPerHistory", \.maxIDsPerHistory, SettingBounds(1), help: "Ids one upload may hold (28 days of 15-minute ids plus slack)."),
        .integer("maxRequestBodyBytes", \.maxRequestBodyBytes, SettingBounds(1_024), help: "Largest request body accepted, in bytes."),
        .integer("maxWindowSeconds", \.maxWindowSeconds, SettingBounds(60), help: "Longest validity window of one uploaded id, in seconds."),
        .integer(
            "clockSkewSeconds", \.clockSkewSeconds, SettingBounds(0, 3_600),
            help: "Clock difference allowed between a node and the server, in seconds; ids are published this long after they expire."),
        .integer(
            "uploadCodeLifetimeSeconds", \.uploadCodeLifetimeSeconds, SettingBounds(60, 30 * 86_400),
            help: "How long an issued upload code stays valid, in seconds."),
        // Every publication that appends costs every node a new checkpoint and entries
        // (ServerConfiguration.shortestPublishIntervalSeconds).
        .integer(
            "publishIntervalSeconds", \.publishIntervalSeconds,
            SettingBounds(
                ServerConfiguration.shortestPublishIntervalSeconds,
                lowerNote: "5 minutes: every publication makes every node fetch the list's new checkpoint and entries"),
            help: "Seconds between scheduled publications."),
        .integer(
            "publishSpacingSeconds", \.publishSpacingSeconds,
            SettingBounds(ServerConfiguration.shortestPublishIntervalSeconds, hint: "and at most publishIntervalSeconds"),
            help: "Shortest time between two publications that uploads trigger, in seconds."),
        .integer(
            "publishRetryMaxSeconds", \.publishRetryMaxSeconds, SettingBounds(1, 3_600),
            help: "Longest wait before retrying a failed publication or object store sync, in seconds (from 1 s, doubling)."),
        // A held request must end before the proxies in front give up on it (nginx's
        // proxy_read_timeout is 60 s unless raised).
        .optionalInteger(
            "longPollSeconds", \.longPollSeconds, SettingBounds(1, 300, hint: "leave it out to turn the long poll off"),
            absent: "no long poll (404)", help: "How long GET /v1/generation holds a request before answering 204, in seconds."),
        .integer(
            "failedAttemptsPerMinute", \.failedAttemptsPerMinute, SettingBounds(1),
            help: "Failed upload attempts allowed per client address and minute."),
        .integer("indexMaxAgeSeconds", \.indexMaxAgeSeconds, SettingBounds(0), help: "Cache-Control max-age of the published index, in seconds."),
        .integer(
            "indexRefreshSeconds", \.indexRefreshSeconds, SettingBounds(60, 86_400),
            help: "Age at which the index is signed again although nothing changed, in seconds."),
        .name(
            "logOrigin", \.logOrigin, describe: "a name without spaces or +, such as example.org/tracer-list",
            absent: "tracer-list/ and 16 hex digits of the public key's SHA-256",
            help: "The published log's origin (its checkpoint's first line and its key name); never change it once published.",
            problem: { ListLogIdentity.problem(origin: $0) }),
        .structured(
            "witnessedLogs", [WitnessedLogSettings.File].self,
            describe: #"a list of {"key": the log's verifier key, "origin": its origin if not the key's name}"#,
            help: "The logs this server witnesses: it cosigns their checkpoints at POST /v1/add-checkpoint (C2SP tlog-witness).",
            show: { configuration in
                configuration.witnessedLogs.isEmpty ? "(unset: not a witness)" : configuration.witnessedLogs.map(\.origin).joined(separator: ", ")
            },
            apply: { (value, configuration) throws(SettingProblem) in configuration.witnessedLogs = try WitnessedLogSettings.list(value) }),
        .name(
            "witnessName", \.witnessName, describe: "a name without spaces or +, such as witness.example.org/w1",
            absent: "tracer-witness/ and 16 hex digits of the witness key's SHA-256",
            help: "The witness's key name in its cosignatures; never change it once logs and nodes use its key.",
            problem: { WitnessIdentity.problem(name: $0) }),
        .structured(
            "witnesses", [WitnessEndpointSettings.File].self,
            describe: #"a list of at most 16 {"url": the witness's submission prefix, "key": its verifier key}"#,
            help: "The witnesses this server's log asks to cosign each checkpoint; the checkpoint is published with the cosignatures obtained.",
            show: { configuration in
                configuration.witnesses.isEmpty ? "(unset: no witnesses)" : configuration.witnesses.map { "\($0.key.name) at \($0.url)" }.joined(separator: ", ")
            },
            apply: { (value, configuration) throws(SettingProblem) in configuration.witnesses = try WitnessEndpointSettings.list(value) }),
        .integer(
            "witnessTimeoutSeconds", \.witnessTimeoutSeconds, SettingBounds(1, 60),
            help: "How long one request to a witness may take, in seconds; a publication waits at most twice this for its witnesses."),
        .boolean(
            "trustForwardedFor", \.trustForwardedFor,
            help: "Take the client address from X-Forwarded-For as the trusted proxies wrote it (behind a reverse proxy)."),
        .textList(
            "trustedProxies", \.trustedProxies,
            .textList(describe: "a list of IP addresses", problem: { addresses in
                addresses.first { ForwardedFor.canonicalAddress($0) == nil }.map { "must list IP addresses; \"\($0)\" is not one" }
            }),
            env: ServerSettingNames.environmentVariable("trustedProxies"), flag: ServerSettingNames.flag("trustedProxies"),
            help: "The peers whose X-Forwarded-For is believed: the proxy nearest the server.", show: { $0.trustedProxies.joined(separator: ", ") }),
        .integer("trustedProxyHops", \.trustedProxyHops, SettingBounds(1, 10), help: "Proxies in the chain that each append one X-Forwarded-For entry."),
        .integer(
            "idleTimeoutSeconds", \.idleTimeoutSeconds, SettingBounds(1, 3_600),
            help: "A connection idle or without a whole request head this long is closed, in seconds."),
        .integer(
            "requestReadTimeoutSeconds", \.requestReadTimeoutSeconds, SettingBounds(1, 3_600),
            help: "A request body not arrived whole this long after its head is cut off, in seconds."),
        .optionalInteger(
            "maxConnections", \.maxConnections, SettingBounds(16), absent: "the descriptor limit less an eighth",
            help: "Connections open at once from all clients."),
        .optionalInteger(
            "maxConnectionsPerAddress", \.maxConnectionsPerAddress, SettingBounds(1), absent: "a sixteenth of maxConnections, 8 to 256",
            help: "Connections open at once from one client address."),
        .text(
            "acceptUploads", \.acceptUploads, .choice(["ids", "keys", "both"]), env: ServerSettingNames.environmentVariable("acceptUploads"),
            flag: ServerSettingNames.flag("acceptUploads"),
            help: "What a diagnosed person may upload: ids, daily keys, or either (published in log/uploads).",
            show: { $0.acceptUploads == .both ? "both" : $0.acceptUploads == .keys ? "keys" : "ids" },
            convert: { $0 == "ids" ? .ids : $0 == "keys" ? .keys : .both }),
        .integer("maxKeysPerHistory", \.maxKeysPerHistory, SettingBounds(1, 1_000), help: "Daily keys one upload may hold."),
        .integerList(
            "keyIntervalsSeconds", \.keyIntervalsSeconds,
            .integerList(describe: "a list of rotation intervals, 5 to 86400 seconds each", problem: { intervals in
                !intervals.isEmpty && intervals.allSatisfy { (try? RotationSchedule(intervalSeconds: $0)) != nil } ? nil
                    : "must list rotation intervals between 5 and 86400 seconds, as node.rotation_interval"
            }),
            env: ServerSettingNames.environmentVariable("keyIntervalsSeconds"), flag: ServerSettingNames.flag("keyIntervalsSeconds"),
            help: "The rotation intervals (node.rotation_interval) daily keys are accepted for.",
            show: { $0.keyIntervalsSeconds.map(String.init).joined(separator: ", ") }),
        .integer(
            "keyPublicationDelaySeconds", \.keyPublicationDelaySeconds, SettingBounds(0, 86_400),
            help: "How long after the end of a key's UTC day it may be published, in seconds."),
        .number(
            "keyPaddingMultiplier", \.keyPaddingMultiplier, SettingBounds(1.0, 10.0, lowerNote: "no fake keys"),
            help: "Published keys per real key; above 1.0 adds random fake keys."),
        .integer(
            "keyBatchMinimumKeys", \.keyBatchMinimumKeys, SettingBounds(1, 100_000, lowerNote: "hold nothing"),
            help: "Due keys are held until at least this many are due."),
        .integer(
            "keyBatchMaximumHoldSeconds", \.keyBatchMaximumHoldSeconds, SettingBounds(0, 7 * 86_400, upperNote: "a week"),
            help: "Held keys are published anyway once the first has been due this long, in seconds."),
        .section(
            "database", \.database, DatabaseConfiguration.section, start: DatabaseConfiguration(url: ""),
            help: "PostgreSQL instead of the SQLite file in the data directory.",
            show: { $0.database.map { "\($0.url), pool of \($0.poolSize)" } ?? "(unset: SQLite in the data directory)" },
            finish: { (database, _) throws(SettingProblem) in try database.finish() }),
        .section(
            "objectStore", \.objectStore, ObjectStoreSettings.section, start: ObjectStoreSettings.unread,
            help: "Where `tracer-server sync` mirrors the published directory (S3-compatible).",
            show: { $0.objectStore.map { "bucket \($0.location.bucket) at \($0.location.endpoint)" } ?? "(unset: no mirror)" },
            finish: { (objectStore, _) throws(SettingProblem) in try objectStore.finish() }),
        .section(
            "console", \.console, ConsoleSettings.section, start: ConsoleSettings.unread, help: "The staff's web console.",
            show: { $0.console.map { $0.enabled ? "enabled on \($0.host):\($0.port)" : "disabled" } ?? "(unset: no console)" },
            finish: { (console, configuration) throws(SettingProblem) in try console.finish(authorities: configuration.authorities) }),
        .section(
            "metrics", \.metrics, MetricsSettings.section, start: MetricsSettings(),
            help: "Prometheus metrics (GET /metrics) on a listener of their own, never the API's; nothing personal in them.",
            show: { $0.metrics.map { $0.enabled ? "enabled on \($0.host):\($0.port)" : "disabled" } ?? "(unset: no metrics)" },
            finish: { _, _ in }),
    ]

    static let keys: Set<String> = Set(all.map(\.key))

    /// The rules between settings, checked once each has its effective value.
    static let constraints: [SettingConstraint<ServerConfiguration>] = [
        SettingConstraint(blamed: "publishSpacingSeconds", other: "publishIntervalSeconds") { configuration in
            configuration.publishSpacingSeconds <= configuration.publishIntervalSeconds ? nil
                : "publishSpacingSeconds (\(configuration.publishSpacingSeconds)) must be at most publishIntervalSeconds (\(configuration.publishIntervalSeconds))"
        },
        SettingConstraint(blamed: "trustedProxies", other: "trustForwardedFor") { configuration in
            configuration.trustForwardedFor && configuration.trustedProxies.isEmpty
                ? "trustedProxies must not be empty when trustForwardedFor is true" : nil
        },
        // The index is re-signed at the first publication once it is indexRefreshSeconds old, so
        // it can reach the sum; nodes call a list signed more than two days ago outdated.
        SettingConstraint(blamed: "indexRefreshSeconds", other: "publishIntervalSeconds") { configuration in
            configuration.publishIntervalSeconds + configuration.indexRefreshSeconds <= ServerConfiguration.longestIndexAgeSeconds ? nil
                : "publishIntervalSeconds + indexRefreshSeconds must be at most \(ServerConfiguration.longestIndexAgeSeconds) (36 hours), so nodes never see an index older than that"
        },
    ]

    /// The one required setting. It is read apart, before every other row (the console's names one
    /// of its authorities), with typed errors of its own: none listed, one twice, a weak token.
    private static let authorities = ServerSettingDefinition(
        key: "authorities", kind: .structured(describe: #"a list of {"name", "token" or "tokenSHA256"}"#), environmentVariable: nil, flag: nil,
        help: "The health authorities that may upload, each with its bearer token or the token's SHA-256.",
        show: { $0.authorities.map(\.name).joined(separator: ", ") },
        assign: { _, _ in })
}

/// How the file spells one authority.
struct AuthorityFileEntry: Decodable, Sendable {
    var name: String
    var token: String?
    var tokenSHA256: String?
}

/// Every setting of the registry with its effective value and where it came from, as
/// `tracer-server config` shows them.
public struct ServerSettingsReport: Sendable {
    public struct Row: Sendable, Equatable, Encodable {
        public var key: String
        public var value: String
        /// "flag --retention-days", "env TRACER_SERVER_RETENTION_DAYS", "file" or "default".
        public var source: String
    }

    public let configuration: ServerConfiguration
    public let rows: [Row]

    init(_ resolution: SettingResolution<ServerConfiguration>) {
        configuration = resolution.settings
        rows = resolution.entries.map { entry in
            Row(key: entry.row.key, value: entry.shown(in: resolution.settings), source: entry.source.description)
        }
    }

    /// One paragraph per setting: its name, what it accepts, what it does, and its environment
    /// variable and flag (or that only the file gives it).
    public static var help: String {
        ServerSettingRegistry.all.map { definition in
            let outside = definition.environmentVariable.map { variable in
                " Environment \(variable), flag \(definition.flag ?? "")."
            } ?? " Only in the file."
            let absent = definition.absent.map { "; left out: \($0)" } ?? ""
            return "\(definition.key): \(definition.help) Accepts \(definition.kind.expected)\(absent).\(outside)"
        }.joined(separator: "\n\n")
    }
}
