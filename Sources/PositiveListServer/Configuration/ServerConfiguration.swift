import Foundation
import PositiveListFormat
import ServerStorage
import Settings
import TracerCore

/// The server's settings, read from a JSON file the operator writes.
///
/// Only `authorities` is required; every limit has a default that matches the rules
/// (28 days of 15-minute ids, 24-hour codes, hourly publication).
public struct ServerConfiguration: Sendable {
    public var authorities: [AuthorityConfiguration]
    public var retentionDays: Int = 28
    /// 28 days of ids at one per 15 minutes (2,688) plus slack for randomized rotation delays
    /// and a clock that ran ahead.
    public var maxIDsPerHistory: Int = 3_000
    public var maxRequestBodyBytes: Int = 1 << 20
    public var maxWindowSeconds: Int64 = 3_600
    public var clockSkewSeconds: Int64 = 300
    public var uploadCodeLifetimeSeconds: Int64 = 86_400
    public var publishIntervalSeconds: Int64 = 3_600
    /// The shortest time between two publications, scheduled or triggered: 5 minutes. Each
    /// publication that appends makes every node revalidating its list fetch a new checkpoint
    /// and the new entries, and leaves new partial tile and bundle files (docs/refresh.md). (It
    /// was the retired index's listing limit divided into 29 days; the log has no such limit, and
    /// a shorter floor would need measuring first.)
    public static let shortestPublishIntervalSeconds: Int64 = 300
    /// An accepted upload makes the server publish at once, unless the last publication that
    /// cut a batch was less than this long ago; then it publishes when it was. Bounds the
    /// batches a stream of uploads makes. The shortest allowed: a node following the log pays
    /// per publication only the checkpoint and the new entries, and 5 minutes keeps the p95 from
    /// upload to node under 10 at national load; a node following the indexes pays their whole
    /// size each time, which grows with the square of the rate (docs/refresh.md, its servers
    /// set 1,800). A quiet server (a campus) publishes each upload at once.
    public var publishSpacingSeconds: Int64 = 300
    /// The longest wait before trying again a publication or sync that failed (a full disk, the
    /// database or the object store down): the waits start at a second and double up to this,
    /// so the server catches up at most this long after the cause goes, however long it lasted.
    public var publishRetryMaxSeconds: Int64 = 60
    /// How long `GET /v1/generation` holds a request before answering 204; nil: the long poll is
    /// off (404), as for a national deployment whose nodes revalidate through a CDN.
    public var longPollSeconds: Int64?
    public var failedAttemptsPerMinute: Int = 10
    public var indexMaxAgeSeconds: Int = 60
    /// The age at which the next publication signs the index again although nothing changed;
    /// nodes refuse an index signed more than two days ago (`check.max_list_age`) as outdated.
    public var indexRefreshSeconds: Int64 = 86_400
    /// The log's origin (format version 3): the checkpoint's first line and its keys' name;
    /// nil: `tracer-list/` and 16 hex digits of SHA-256 of the public key (ListLogIdentity).
    public var logOrigin: String?
    /// The logs this server witnesses (C2SP tlog-witness, `POST /v1/add-checkpoint`); empty: it
    /// is no witness. Needs the witness key (`tracer-server witness-keygen`).
    public var witnessedLogs: [WitnessedLogSettings] = []
    /// The name of the witness's cosignature key; nil: `tracer-witness/` and 16 hex digits of
    /// SHA-256 of its public key (WitnessIdentity).
    public var witnessName: String?
    /// The witnesses this server's log asks to cosign each checkpoint; empty: none.
    public var witnesses: [WitnessEndpointSettings] = []
    /// How long one request to a witness may take, in seconds; a publication waits at most twice
    /// this for its witnesses (asked all at once, each at most twice).
    public var witnessTimeoutSeconds: Int64 = 5
    /// Behind a reverse proxy every request comes from the proxy's address; this takes the
    /// client address from `X-Forwarded-For` instead, as the proxies in `trustedProxies` and
    /// `trustedProxyHops` wrote it (see ForwardedFor).
    public var trustForwardedFor: Bool = false
    /// The peers whose `X-Forwarded-For` is believed: the proxy nearest the server. The default
    /// is loopback, for nginx on the same host as in deploy/.
    public var trustedProxies: [String] = ["127.0.0.1", "::1"]
    /// How many proxies in a chain each append (or, the first, set) one `X-Forwarded-For`
    /// entry; the client's address is this many entries from the right. One nginx: 1.
    public var trustedProxyHops: Int = 1
    /// A connection that sends nothing, or not a whole request head, for this long is closed;
    /// so is one idle this long between requests. A slow client cannot hold connections open.
    public var idleTimeoutSeconds: Int = 30
    /// A request whose body has not arrived whole this long after its head is cut off: the idle
    /// timeout restarts with every part of a body, so it alone cannot stop one sent a byte at a
    /// time. A node's upload (about 100 kB) needs a fraction of it on a slow link.
    public var requestReadTimeoutSeconds: Int = 60
    /// Connections open at once from all clients; nil: the descriptor limit (`ulimit -n`,
    /// `LimitNOFILE`) less a reserve of an eighth, at least 64 (see ConnectionLimits).
    public var maxConnections: Int?
    /// Connections open at once from one client address (trusted proxies excepted); nil: a
    /// sixteenth of maxConnections, between 8 and 256.
    public var maxConnectionsPerAddress: Int?
    /// The authority's choice of what a diagnosed person may upload: ids (unlinkable, 1.5 kB a
    /// day to every node), daily keys (about 16 bytes, linkable once published), or either.
    /// Published in `log/uploads` so nodes can follow it.
    public var acceptUploads: AcceptedUploads = .both
    /// 29 days (the retention period and today) at one interval, with room for a node that
    /// changed its interval during a day: every (day, interval) pair appears at most once.
    public var maxKeysPerHistory: Int = 64
    /// The rotation intervals (node.rotation_interval) daily keys are accepted for: those the
    /// deployment's nodes use. Each key makes every node derive 86,400 / interval ids, so the
    /// shortest listed interval bounds that cost (96 ids per key at the default 900 s).
    public var keyIntervalsSeconds: [Int64] = KeyHistoryRules.defaultIntervals
    /// How long after the end of a key's UTC day it may be published (GAEN's rule): a key
    /// published earlier would let anyone broadcast its ids while they are still valid.
    public var keyPublicationDelaySeconds: Int64 = 7_200
    /// Published keys per real key: 1.0 publishes none fake; 2.0 adds one random key per real
    /// one, hiding the number of uploads at the cost of twice the bytes for every node.
    public var keyPaddingMultiplier: Double = 1.0
    /// Due keys are held until at least this many are due, so that a key batch does not hold a
    /// single upload's keys (which would link them to each other); 1 holds nothing. One upload
    /// brings at most `maxKeysPerHistory` keys. The Corona-Warn-App holds keys until 140.
    public var keyBatchMinimumKeys: Int = 1
    /// Held keys are published anyway once the first of them has been due this long, so that a
    /// quiet server still warns contacts.
    public var keyBatchMaximumHoldSeconds: Int64 = 86_400
    /// PostgreSQL instead of the SQLite file in the data directory (see DatabaseConfiguration).
    public var database: DatabaseConfiguration?
    /// Where `tracer-server sync` mirrors the published directory (S3-compatible object storage);
    /// nil when the files are served from this host only.
    public var objectStore: ObjectStoreSettings?
    /// The staff's web console (see ConsoleSettings); nil or not enabled: no console.
    public var console: ConsoleSettings?
    /// Prometheus metrics on a listener of their own (see MetricsSettings); nil or not enabled: none.
    public var metrics: MetricsSettings?

    public init(authorities: [AuthorityConfiguration]) {
        self.authorities = authorities
    }

    public var retentionSeconds: Int64 { Int64(retentionDays) * UnixSeconds.secondsPerDay }

    /// The oldest an index may get between two signatures; nodes allow two days by default and
    /// at least 36 hours (`check.max_list_age`).
    public static let longestIndexAgeSeconds: Int64 = 129_600

    /// Reads and checks the file at `path`, with the settings given outside it laid over it.
    public static func load(path: String, overrides: ServerSettingOverrides = .none) throws(ConfigurationError) -> ServerConfiguration {
        try loadReport(path: path, overrides: overrides).configuration
    }

    /// Reads and checks the file at `path`, and tells where each setting came from (`tracer-server config`).
    public static func loadReport(path: String, overrides: ServerSettingOverrides = .none) throws(ConfigurationError) -> ServerSettingsReport {
        guard let data = FileManager.default.contents(atPath: path) else { throw .unreadable(path: path) }
        return try read(data, path: path, overrides: overrides)
    }

    public static func parse(_ data: Data, path: String) throws(ConfigurationError) -> ServerConfiguration {
        try read(data, path: path).configuration
    }

    /// The checked configuration, and where each setting came from.
    public static func read(_ data: Data, path: String, overrides: ServerSettingOverrides = .none) throws(ConfigurationError) -> ServerSettingsReport {
        let fields: [String: SettingInput]
        do {
            // A setting set to null is left out (its default), as before the settings kit.
            fields = try JSONDecoder().decode([String: SettingInput?].self, from: data).compactMapValues { $0 }
        } catch let error as DecodingError where !Self.isAboutTheWholeFile(error) {
            // Named by its place in the file ("trustedProxies[0] …"): no row has read it yet.
            throw .invalidValue(path: path, detail: String(SettingProblem(describing: error).named("").drop { $0 == "." }))
        } catch {
            // Not JSON, or JSON but not an object.
            throw .notJSONObject(path: path)
        }
        // A misspelt limit silently falling back to its default would be worse than refusing.
        if let unknown = Set(fields.keys).subtracting(ServerSettingRegistry.keys).sorted().first {
            throw .unknownSetting(path: path, name: unknown)
        }
        for (section, known) in [("database", DatabaseConfiguration.section.names), ("objectStore", ObjectStoreSettings.section.names), ("console", ConsoleSettings.section.names), ("metrics", MetricsSettings.section.names)] {
            if case .object(let entries)? = fields[section], let unknown = Set(entries.keys).subtracting(known).sorted().first {
                throw .unknownSetting(path: path, name: section + "." + unknown)
            }
        }
        for (list, known) in [("witnessedLogs", WitnessedLogSettings.knownKeys), ("witnesses", WitnessEndpointSettings.knownKeys)] {
            guard case .list(let entries)? = fields[list] else { continue }
            for (position, entry) in entries.enumerated() {
                if case .object(let entry) = entry, let unknown = Set(entry.keys).subtracting(known).sorted().first {
                    throw .unknownSetting(path: path, name: "\(list)[\(position)].\(unknown)")
                }
            }
        }
        // Every value the file gives is checked against its row first, so that a value of the
        // wrong type is reported before any other problem, even when a flag overrides it.
        var file: [String: SettingResolution<ServerConfiguration>.FileValue] = [:]
        let source = SettingSource.file(path: nil, line: nil)
        let paths = PathContext(baseDirectory: FileManager.default.currentDirectoryPath, home: nil)
        for row in ServerSettingRegistry.all {
            guard let input = fields[row.key] else { continue }
            switch row.kind.check(input, paths: paths) {
            case .success(let value): file[row.key] = .init(value: value, source: source)
            case .failure(let problem): throw .invalidValue(path: path, detail: problem.named(row.key))
            }
        }
        let start = ServerConfiguration(authorities: try authorities(fields["authorities"], path: path))
        do {
            let resolution = try SettingResolution(
                rows: ServerSettingRegistry.all, constraints: ServerSettingRegistry.constraints, start: start, file: file,
                flags: overrides.flags, environment: overrides.environment, paths: paths)
            return ServerSettingsReport(resolution)
        } catch {
            throw ConfigurationError(error, path: path)
        }
    }

    private static func isAboutTheWholeFile(_ error: DecodingError) -> Bool {
        switch error {
        case .typeMismatch(_, let context), .valueNotFound(_, let context), .dataCorrupted(let context): context.codingPath.isEmpty
        case .keyNotFound: false
        @unknown default: true
        }
    }

    /// The authorities the file lists, each checked: the one required setting.
    private static func authorities(_ input: SettingInput?, path: String) throws(ConfigurationError) -> [AuthorityConfiguration] {
        guard let input else { throw .invalidValue(path: path, detail: "authorities is missing") }
        let entries: [AuthorityFileEntry]
        do {
            entries = try input.decode(as: [AuthorityFileEntry].self)
        } catch {
            throw .invalidValue(path: path, detail: error.named("authorities"))
        }
        var authorities: [AuthorityConfiguration] = []
        for (position, entry) in entries.enumerated() {
            let authority = try AuthorityConfiguration(entry, position: position, path: path)
            guard !authorities.contains(where: { $0.name == authority.name }) else { throw .duplicateAuthority(path: path, name: authority.name) }
            authorities.append(authority)
        }
        guard !authorities.isEmpty else { throw .noAuthorities(path: path) }
        return authorities
    }

    /// The connection limits for a process allowed `descriptorLimit` open files.
    public func connectionLimits(descriptorLimit: Int = ConnectionLimits.currentDescriptorLimit()) throws(ConnectionLimitError) -> ConnectionLimits {
        try ConnectionLimits.resolve(
            descriptorLimit: descriptorLimit, configuredTotal: maxConnections, configuredPerAddress: maxConnectionsPerAddress)
    }
}

/// One health authority: a display name (used in logs and the audit table) and the SHA-256 of
/// its bearer token. The file may hold the token itself or only its digest.
public struct AuthorityConfiguration: Sendable, Equatable {
    public static let minimumTokenLength = 24

    public let name: String
    public let tokenDigest: [UInt8]

    public init(name: String, token: String) {
        self.name = name
        self.tokenDigest = TokenDigest.of(token)
    }

    public init(name: String, tokenDigest: [UInt8]) {
        self.name = name
        self.tokenDigest = tokenDigest
    }

    init(_ entry: AuthorityFileEntry, position: Int, path: String) throws(ConfigurationError) {
        let name = entry.name.trimmingCharacters(in: .whitespaces)
        guard !name.isEmpty, name.count <= 100 else {
            throw .invalidValue(path: path, detail: "authorities[\(position)].name must be 1 to 100 characters")
        }
        switch (entry.token, entry.tokenSHA256) {
        case (let token?, nil):
            guard token.count >= Self.minimumTokenLength else {
                throw .weakToken(path: path, authority: name, minimumLength: Self.minimumTokenLength)
            }
            self.init(name: name, token: token)
        case (nil, let digest?):
            guard let bytes = Hex.decode(digest), bytes.count == 32 else {
                throw .invalidValue(path: path, detail: "authorities[\(position)].tokenSHA256 must be 64 hexadecimal characters")
            }
            self.init(name: name, tokenDigest: bytes)
        default:
            throw .invalidValue(path: path, detail: "authorities[\(position)] needs exactly one of token or tokenSHA256")
        }
    }
}

public enum ConfigurationError: Error, Sendable, Equatable, CustomStringConvertible {
    case unreadable(path: String)
    case notJSONObject(path: String)
    case unknownSetting(path: String, name: String)
    case invalidValue(path: String, detail: String)
    case noAuthorities(path: String)
    case duplicateAuthority(path: String, name: String)
    case weakToken(path: String, authority: String, minimumLength: Int)
    /// A value given by an environment variable or a flag instead of the file.
    case invalidOverride(key: String, source: SettingSource, detail: String)

    public var description: String {
        switch self {
        case .unreadable(let path):
            return "Cannot read the configuration file \(path); create it (see docs/positive-list-format.md, section Configuration) or pass --config."
        case .notJSONObject(let path):
            return "The configuration file \(path) is not a JSON object; fix its syntax."
        case .unknownSetting(let path, let name):
            return "The configuration file \(path) has an unknown setting \"\(name)\"; check its spelling."
        case .invalidValue(let path, let detail):
            return "The configuration file \(path) is invalid: \(detail)."
        case .noAuthorities(let path):
            return "The configuration file \(path) lists no authorities; add at least one with a name and a token."
        case .duplicateAuthority(let path, let name):
            return "The configuration file \(path) lists the authority \"\(name)\" twice; give each authority its own name."
        case .weakToken(let path, let authority, let minimumLength):
            return "The token of authority \"\(authority)\" in \(path) is shorter than \(minimumLength) characters; use a long random token (for example `openssl rand -base64 32`)."
        case .invalidOverride(_, let source, let detail):
            return "The value of \(source.location) is invalid: \(detail); \(source.remedy)."
        }
    }
}

extension ConfigurationError {
    /// A refusal of the settings kit, pointed at the file or at the variable or flag that gave the value.
    init(_ error: SettingError, path: String) {
        func blaming(_ source: SettingSource, key: String, detail: String) -> ConfigurationError {
            switch source {
            case .environment, .flag: .invalidOverride(key: key, source: source, detail: detail)
            case .file, .builtIn: .invalidValue(path: path, detail: detail)
            }
        }
        switch error {
        case .invalidValue(let key, let source, let problem): self = blaming(source, key: key, detail: problem.named(key))
        case .conflict(let key, let source, let problem): self = blaming(source, key: key, detail: problem)
        // No server setting has a default found from the environment.
        case .noDefault(let key, _): self = .invalidValue(path: path, detail: "\(key) is missing")
        }
    }
}
