import Foundation
import IDRotation
import Settings

/// Every setting of the server's configuration file. Adding a setting is one row here plus its
/// `ServerConfiguration` property (which holds the default); the file reader, its checks and
/// `tracer-server config` all follow this table. Rows are read, applied and checked in this
/// order, so a row may depend on the rows above it.
enum ServerSettingRegistry {
    static let all: [ServerSettingDefinition] = [
        authorities,
        .number("retentionDays", \.retentionDays, SettingBounds(lower: 1, upper: 28), help: "Days an uploaded id or key is kept and listed."),
        .number(
            "maxIDsPerHistory", \.maxIDsPerHistory, SettingBounds(lower: 1, upper: nil),
            help: "Ids one upload may hold (28 days of 15-minute ids plus slack)."),
        .number("maxRequestBodyBytes", \.maxRequestBodyBytes, SettingBounds(lower: 1_024, upper: nil), help: "Largest request body accepted, in bytes."),
        .number("maxWindowSeconds", \.maxWindowSeconds, SettingBounds(lower: 60, upper: nil), help: "Longest validity window of one uploaded id, in seconds."),
        .number(
            "clockSkewSeconds", \.clockSkewSeconds, SettingBounds(lower: 0, upper: 3_600),
            help: "Clock difference allowed between a node and the server, in seconds; ids are published this long after they expire."),
        .number(
            "uploadCodeLifetimeSeconds", \.uploadCodeLifetimeSeconds, SettingBounds(lower: 60, upper: 30 * 86_400),
            help: "How long an issued upload code stays valid, in seconds."),
        .converted(
            "publishIntervalSeconds", Int64.self, accepts: "an integer, at least \(ServerConfiguration.shortestPublishIntervalSeconds)",
            help: "Seconds between scheduled publications.",
            apply: { value, configuration, _ in configuration.publishIntervalSeconds = value },
            // Nodes read at most PositiveListIndex.maximumListingCount listings (29 days of one batch
            // every 5 minutes): publishing more often could list batches that nodes refuse.
            problem: { configuration in
                configuration.publishIntervalSeconds >= ServerConfiguration.shortestPublishIntervalSeconds ? nil
                    : "publishIntervalSeconds must be at least \(ServerConfiguration.shortestPublishIntervalSeconds) (5 minutes): nodes accept an index of at most 29 days of batches published that often"
            },
            show: { "\($0.publishIntervalSeconds)" }, textForm: .integer),
        publishSpacing,
        .number(
            "publishRetryMaxSeconds", \.publishRetryMaxSeconds, SettingBounds(lower: 1, upper: 3_600),
            help: "Longest wait before retrying a failed publication or object store sync, in seconds (from 1 s, doubling)."),
        // A held request must end before the proxies in front give up on it (nginx's
        // proxy_read_timeout is 60 s unless raised).
        .optionalNumber(
            "longPollSeconds", \.longPollSeconds, SettingBounds(lower: 1, upper: 300, hint: "leave it out to turn the long poll off"),
            absent: "no long poll (404)", help: "How long GET /v1/generation holds a request before answering 204, in seconds."),
        .number(
            "failedAttemptsPerMinute", \.failedAttemptsPerMinute, SettingBounds(lower: 1, upper: nil),
            help: "Failed upload attempts allowed per client address and minute."),
        .number(
            "indexMaxAgeSeconds", \.indexMaxAgeSeconds, SettingBounds(lower: 0, upper: nil),
            help: "Cache-Control max-age of the published index, in seconds."),
        .number(
            "indexRefreshSeconds", \.indexRefreshSeconds, SettingBounds(lower: 60, upper: 86_400),
            help: "Age at which the index is signed again although nothing changed, in seconds."),
        .converted(
            "logOrigin", String.self, accepts: "a name without spaces or +, such as example.org/tracer-list",
            help: "The published log's origin (its checkpoint's first line and its key name); never change it once published.",
            apply: { (value, configuration, path) throws(ConfigurationError) in
                if let problem = ListLogIdentity.problem(origin: value) { throw .invalidValue(path: path, detail: problem) }
                configuration.logOrigin = value
            },
            show: { $0.logOrigin ?? "(unset: tracer-list/ and 16 hex digits of the public key's SHA-256)" }, textForm: .string),
        .converted(
            "witnessedLogs", [WitnessedLogSettings.File].self,
            accepts: #"a list of {"key": the log's verifier key, "origin": its origin if not the key's name}"#,
            help: "The logs this server witnesses: it cosigns their checkpoints at POST /v1/add-checkpoint (C2SP tlog-witness).",
            apply: { (value, configuration, path) throws(ConfigurationError) in
                configuration.witnessedLogs = try WitnessedLogSettings.list(value, path: path)
            },
            show: { configuration in
                configuration.witnessedLogs.isEmpty ? "(unset: not a witness)" : configuration.witnessedLogs.map(\.origin).joined(separator: ", ")
            }),
        .converted(
            "witnessName", String.self, accepts: "a name without spaces or +, such as witness.example.org/w1",
            help: "The witness's key name in its cosignatures; never change it once logs and nodes use its key.",
            apply: { (value, configuration, path) throws(ConfigurationError) in
                if let problem = WitnessIdentity.problem(name: value) { throw .invalidValue(path: path, detail: problem) }
                configuration.witnessName = value
            },
            show: { $0.witnessName ?? "(unset: tracer-witness/ and 16 hex digits of the witness key's SHA-256)" }, textForm: .string),
        .converted(
            "witnesses", [WitnessEndpointSettings.File].self,
            accepts: #"a list of at most 16 {"url": the witness's submission prefix, "key": its verifier key}"#,
            help: "The witnesses this server's log asks to cosign each checkpoint; the checkpoint is published with the cosignatures obtained.",
            apply: { (value, configuration, path) throws(ConfigurationError) in
                configuration.witnesses = try WitnessEndpointSettings.list(value, path: path)
            },
            show: { configuration in
                configuration.witnesses.isEmpty ? "(unset: no witnesses)" : configuration.witnesses.map { "\($0.key.name) at \($0.url)" }.joined(separator: ", ")
            }),
        .number(
            "witnessTimeoutSeconds", \.witnessTimeoutSeconds, SettingBounds(lower: 1, upper: 60),
            help: "How long one request to a witness may take, in seconds; a publication waits at most twice this for its witnesses."),
        .plain(
            "trustForwardedFor", \.trustForwardedFor, accepts: "true or false",
            help: "Take the client address from X-Forwarded-For as the trusted proxies wrote it (behind a reverse proxy)."),
        .plain(
            "trustedProxies", \.trustedProxies, accepts: "a list of IP addresses",
            help: "The peers whose X-Forwarded-For is believed: the proxy nearest the server.",
            problem: { configuration in
                if let notAnAddress = configuration.trustedProxies.first(where: { ForwardedFor.canonicalAddress($0) == nil }) {
                    return "trustedProxies must list IP addresses; \"\(notAnAddress)\" is not one"
                }
                return configuration.trustForwardedFor && configuration.trustedProxies.isEmpty
                    ? "trustedProxies must not be empty when trustForwardedFor is true" : nil
            },
            show: { $0.joined(separator: ", ") }),
        .number(
            "trustedProxyHops", \.trustedProxyHops, SettingBounds(lower: 1, upper: 10),
            help: "Proxies in the chain that each append one X-Forwarded-For entry."),
        .number(
            "idleTimeoutSeconds", \.idleTimeoutSeconds, SettingBounds(lower: 1, upper: 3_600),
            help: "A connection idle or without a whole request head this long is closed, in seconds."),
        .number(
            "requestReadTimeoutSeconds", \.requestReadTimeoutSeconds, SettingBounds(lower: 1, upper: 3_600),
            help: "A request body not arrived whole this long after its head is cut off, in seconds."),
        .optionalNumber(
            "maxConnections", \.maxConnections, SettingBounds(lower: 16, upper: nil),
            absent: "the descriptor limit less an eighth", help: "Connections open at once from all clients."),
        .optionalNumber(
            "maxConnectionsPerAddress", \.maxConnectionsPerAddress, SettingBounds(lower: 1, upper: nil),
            absent: "a sixteenth of maxConnections, 8 to 256", help: "Connections open at once from one client address."),
        .converted(
            "acceptUploads", String.self, accepts: #""ids", "keys" or "both""#,
            help: "What a diagnosed person may upload: ids, daily keys, or either (published in the key index).",
            apply: { (value, configuration, path) throws(ConfigurationError) in
                switch value {
                case "ids": configuration.acceptUploads = .ids
                case "keys": configuration.acceptUploads = .keys
                case "both": configuration.acceptUploads = .both
                default: throw .invalidValue(path: path, detail: #"acceptUploads must be "ids", "keys" or "both""#)
                }
            },
            problem: { $0.acceptUploads.isEmpty ? #"acceptUploads must be "ids", "keys" or "both""# : nil },
            show: { $0.acceptUploads == .both ? "both" : $0.acceptUploads == .keys ? "keys" : "ids" }, textForm: .string),
        .number(
            "maxKeysPerHistory", \.maxKeysPerHistory, SettingBounds(lower: 1, upper: 1_000),
            help: "Daily keys one upload may hold."),
        .plain(
            "keyIntervalsSeconds", \.keyIntervalsSeconds, accepts: "a list of rotation intervals, 5 to 86400 seconds each",
            help: "The rotation intervals (node.rotation_interval) daily keys are accepted for.",
            problem: { configuration in
                !configuration.keyIntervalsSeconds.isEmpty
                    && configuration.keyIntervalsSeconds.allSatisfy { (try? RotationSchedule(intervalSeconds: $0)) != nil } ? nil
                    : "keyIntervalsSeconds must list rotation intervals between 5 and 86400 seconds, as node.rotation_interval"
            },
            show: { $0.map(String.init).joined(separator: ", ") }),
        .number(
            "keyPublicationDelaySeconds", \.keyPublicationDelaySeconds, SettingBounds(lower: 0, upper: 86_400),
            help: "How long after the end of a key's UTC day it may be published, in seconds."),
        .number(
            "keyPaddingMultiplier", \.keyPaddingMultiplier, SettingBounds(lower: 1.0, upper: 10.0, lowerNote: "no fake keys"),
            help: "Published keys per real key; above 1.0 adds random fake keys."),
        .number(
            "keyBatchMinimumKeys", \.keyBatchMinimumKeys, SettingBounds(lower: 1, upper: 100_000, lowerNote: "hold nothing"),
            help: "Due keys are held until at least this many are due."),
        .number(
            "keyBatchMaximumHoldSeconds", \.keyBatchMaximumHoldSeconds, SettingBounds(lower: 0, upper: 7 * 86_400, upperNote: "a week"),
            help: "Held keys are published anyway once the first has been due this long, in seconds."),
        .converted(
            "database", DatabaseConfiguration.File.self, accepts: "an object: url, passwordFile, passwordEnvironment, poolSize",
            help: "PostgreSQL instead of the SQLite file in the data directory.",
            apply: { (value, configuration, path) throws(ConfigurationError) in configuration.database = try DatabaseConfiguration(value, path: path) },
            show: { $0.database.map { "\($0.url), pool of \($0.poolSize)" } ?? "(unset: SQLite in the data directory)" }),
        .converted(
            "objectStore", ObjectStoreSettings.File.self, accepts: "an object: \(ObjectStoreSettings.knownKeys.sorted().joined(separator: ", "))",
            help: "Where `tracer-server sync` mirrors the published directory (S3-compatible).",
            apply: { (value, configuration, path) throws(ConfigurationError) in configuration.objectStore = try ObjectStoreSettings(value, path: path) },
            show: { $0.objectStore.map { "bucket \($0.location.bucket) at \($0.location.endpoint)" } ?? "(unset: no mirror)" }),
        .converted(
            "console", ConsoleSettings.File.self, accepts: "an object: \(ConsoleSettings.knownKeys.sorted().joined(separator: ", "))",
            help: "The staff's web console.",
            apply: { (value, configuration, path) throws(ConfigurationError) in
                configuration.console = try ConsoleSettings(value, authorities: configuration.authorities, path: path)
            },
            show: { $0.console.map { $0.enabled ? "enabled on \($0.host):\($0.port)" : "disabled" } ?? "(unset: no console)" }),
        .converted(
            "metrics", MetricsSettings.File.self, accepts: "an object: \(MetricsSettings.knownKeys.sorted().joined(separator: ", "))",
            help: "Prometheus metrics (GET /metrics) on a listener of their own, never the API's; nothing personal in them.",
            apply: { (value, configuration, path) throws(ConfigurationError) in configuration.metrics = try MetricsSettings(value, path: path) },
            show: { $0.metrics.map { $0.enabled ? "enabled on \($0.host):\($0.port)" : "disabled" } ?? "(unset: no metrics)" }),
    ]

    static let keys: Set<String> = Set(all.map(\.key))

    /// Applied even when absent: unset, the spacing never exceeds the interval, which publishes anyway.
    private static let publishSpacing = ServerSettingDefinition(
        key: "publishSpacingSeconds",
        accepts: "an integer, from \(ServerConfiguration.shortestPublishIntervalSeconds) to publishIntervalSeconds; left out: \(ServerConfiguration(authorities: []).publishSpacingSeconds) or publishIntervalSeconds if shorter",
        help: "Shortest time between two publications that uploads trigger, in seconds.",
        read: { container in
            let value = try container.decodeIfPresent(Int64.self, forKey: ServerSettingKey("publishSpacingSeconds"))
            return { configuration, _ in
                configuration.publishSpacingSeconds = value ?? min(configuration.publishSpacingSeconds, configuration.publishIntervalSeconds)
            }
        },
        problem: { configuration in
            let shortest = ServerConfiguration.shortestPublishIntervalSeconds
            return configuration.publishSpacingSeconds >= shortest && configuration.publishSpacingSeconds <= configuration.publishIntervalSeconds ? nil
                : "publishSpacingSeconds must be between \(shortest) (5 minutes: nodes accept at most 29 days of batches cut that often) and publishIntervalSeconds"
        },
        show: { "\($0.publishSpacingSeconds)" }, textForm: .integer)

    /// The one required setting; its typed errors (no authority, a duplicate, a weak token) are
    /// checked apart, before every row's problem.
    private static let authorities = ServerSettingDefinition(
        key: "authorities", accepts: #"a list of {"name", "token" or "tokenSHA256"}"#,
        help: "The health authorities that may upload, each with its bearer token or the token's SHA-256.",
        read: { container in
            let entries = try container.decode([AuthorityFileEntry].self, forKey: ServerSettingKey("authorities"))
            return { (configuration, path) throws(ConfigurationError) in
                for (position, entry) in entries.enumerated() {
                    configuration.authorities.append(try AuthorityConfiguration(entry, position: position, path: path))
                }
            }
        },
        problem: { _ in nil },
        show: { $0.authorities.map(\.name).joined(separator: ", ") })
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

    public init(configuration: ServerConfiguration, keysInFile: Set<String>, overrides: ServerSettingOverrides = .none) {
        self.configuration = configuration
        rows = ServerSettingRegistry.all.map { definition in
            let source: SettingSource = overrides.values[definition.key]?.source
                ?? (keysInFile.contains(definition.key) ? .file(path: nil, line: nil) : .builtIn(detail: nil))
            return Row(key: definition.key, value: definition.show(configuration), source: source.description)
        }
    }

    /// One paragraph per setting: its name, what it accepts, what it does, and its environment
    /// variable and flag (or that only the file gives it).
    public static var help: String {
        ServerSettingRegistry.all.map { definition in
            let outside = definition.environmentVariable.map { variable in
                " Environment \(variable), flag \(definition.flag ?? "")."
            } ?? " Only in the file."
            return "\(definition.key): \(definition.help) Accepts \(definition.accepts).\(outside)"
        }.joined(separator: "\n\n")
    }
}
