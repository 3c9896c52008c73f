import Foundation
import IDRotation
import PositiveListFormat

/// The server's settings, read from a JSON file the operator writes.
///
/// Only `authorities` is required; every limit has a default that matches the issue's rules
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
    /// The node's index limit (`PositiveListIndex.maximumListingCount`) divided into the
    /// retention period plus a day: one batch every 5 minutes.
    public static let shortestPublishIntervalSeconds: Int64 = 29 * 86_400 / Int64(PositiveListIndex.maximumListingCount)
    /// An accepted upload makes the server publish at once, unless the last publication that
    /// cut a batch was less than this long ago; then it publishes when it was. Bounds the
    /// batches a stream of uploads makes, and so the index every node downloads at each
    /// generation: its bytes per node per day grow with the square of the publication rate
    /// (docs/refresh.md). A quiet server (a campus) publishes each upload at once.
    public var publishSpacingSeconds: Int64 = 1_800
    /// How long `GET /v1/generation` holds a request before answering 204; nil: the long poll is
    /// off (404), as for a national deployment whose nodes revalidate through a CDN.
    public var longPollSeconds: Int64?
    public var failedAttemptsPerMinute: Int = 10
    public var indexMaxAgeSeconds: Int = 60
    /// The age at which the next publication signs the index again although nothing changed;
    /// nodes refuse an index signed more than two days ago (`check.max_list_age`) as outdated.
    public var indexRefreshSeconds: Int64 = 86_400
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
    /// Published in the signed key index so nodes can follow it.
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

    public init(authorities: [AuthorityConfiguration]) {
        self.authorities = authorities
    }

    public var retentionSeconds: Int64 { Int64(retentionDays) * UnixSeconds.secondsPerDay }

    /// The oldest an index may get between two signatures; nodes allow two days by default and
    /// at least 36 hours (`check.max_list_age`).
    public static let longestIndexAgeSeconds: Int64 = 129_600

    private static let knownKeys: Set<String> = [
        "authorities", "retentionDays", "maxIDsPerHistory", "maxRequestBodyBytes", "maxWindowSeconds",
        "clockSkewSeconds", "uploadCodeLifetimeSeconds", "publishIntervalSeconds", "publishSpacingSeconds", "longPollSeconds", "failedAttemptsPerMinute",
        "indexMaxAgeSeconds", "indexRefreshSeconds", "trustForwardedFor", "trustedProxies", "trustedProxyHops",
        "idleTimeoutSeconds", "requestReadTimeoutSeconds", "maxConnections", "maxConnectionsPerAddress", "acceptUploads", "maxKeysPerHistory", "keyIntervalsSeconds",
        "keyPublicationDelaySeconds", "keyPaddingMultiplier", "keyBatchMinimumKeys", "keyBatchMaximumHoldSeconds",
        "database", "objectStore", "console",
    ]

    /// Reads and checks the file at `path`.
    public static func load(path: String) throws(ConfigurationError) -> ServerConfiguration {
        guard let data = FileManager.default.contents(atPath: path) else { throw .unreadable(path: path) }
        return try parse(data, path: path)
    }

    public static func parse(_ data: Data, path: String) throws(ConfigurationError) -> ServerConfiguration {
        guard let object = try? JSONSerialization.jsonObject(with: data), let fields = object as? [String: Any] else {
            throw .notJSONObject(path: path)
        }
        // A misspelt limit silently falling back to its default would be worse than refusing.
        if let unknown = Set(fields.keys).subtracting(knownKeys).sorted().first {
            throw .unknownSetting(path: path, name: unknown)
        }
        if let section = fields["objectStore"] as? [String: Any],
           let unknown = Set(section.keys).subtracting(ObjectStoreSettings.knownKeys).sorted().first
        {
            throw .unknownSetting(path: path, name: "objectStore." + unknown)
        }
        if let section = fields["console"] as? [String: Any],
           let unknown = Set(section.keys).subtracting(ConsoleSettings.knownKeys).sorted().first
        {
            throw .unknownSetting(path: path, name: "console." + unknown)
        }
        let file: ConfigurationFile
        do {
            file = try JSONDecoder().decode(ConfigurationFile.self, from: data)
        } catch {
            throw .invalidValue(path: path, detail: Self.describe(error))
        }
        var configuration = ServerConfiguration(authorities: [])
        for (position, entry) in file.authorities.enumerated() {
            configuration.authorities.append(try AuthorityConfiguration(entry, position: position, path: path))
        }
        if let value = file.retentionDays { configuration.retentionDays = value }
        if let value = file.maxIDsPerHistory { configuration.maxIDsPerHistory = value }
        if let value = file.maxRequestBodyBytes { configuration.maxRequestBodyBytes = value }
        if let value = file.maxWindowSeconds { configuration.maxWindowSeconds = value }
        if let value = file.clockSkewSeconds { configuration.clockSkewSeconds = value }
        if let value = file.uploadCodeLifetimeSeconds { configuration.uploadCodeLifetimeSeconds = value }
        if let value = file.publishIntervalSeconds { configuration.publishIntervalSeconds = value }
        // Unset, the spacing never exceeds the interval: the interval publishes anyway.
        configuration.publishSpacingSeconds = file.publishSpacingSeconds
            ?? min(configuration.publishSpacingSeconds, configuration.publishIntervalSeconds)
        if let value = file.longPollSeconds { configuration.longPollSeconds = value }
        if let value = file.failedAttemptsPerMinute { configuration.failedAttemptsPerMinute = value }
        if let value = file.indexMaxAgeSeconds { configuration.indexMaxAgeSeconds = value }
        if let value = file.indexRefreshSeconds { configuration.indexRefreshSeconds = value }
        if let value = file.trustForwardedFor { configuration.trustForwardedFor = value }
        if let value = file.trustedProxies { configuration.trustedProxies = value }
        if let value = file.trustedProxyHops { configuration.trustedProxyHops = value }
        if let value = file.idleTimeoutSeconds { configuration.idleTimeoutSeconds = value }
        if let value = file.requestReadTimeoutSeconds { configuration.requestReadTimeoutSeconds = value }
        if let value = file.maxConnections { configuration.maxConnections = value }
        if let value = file.maxConnectionsPerAddress { configuration.maxConnectionsPerAddress = value }
        if let value = file.acceptUploads {
            switch value {
            case "ids": configuration.acceptUploads = .ids
            case "keys": configuration.acceptUploads = .keys
            case "both": configuration.acceptUploads = .both
            default: throw .invalidValue(path: path, detail: #"acceptUploads must be "ids", "keys" or "both""#)
            }
        }
        if let value = file.maxKeysPerHistory { configuration.maxKeysPerHistory = value }
        if let value = file.keyIntervalsSeconds { configuration.keyIntervalsSeconds = value }
        if let value = file.keyPublicationDelaySeconds { configuration.keyPublicationDelaySeconds = value }
        if let value = file.keyPaddingMultiplier { configuration.keyPaddingMultiplier = value }
        if let value = file.keyBatchMinimumKeys { configuration.keyBatchMinimumKeys = value }
        if let value = file.keyBatchMaximumHoldSeconds { configuration.keyBatchMaximumHoldSeconds = value }
        if let value = file.database { configuration.database = try DatabaseConfiguration(value, path: path) }
        if let value = file.objectStore { configuration.objectStore = try ObjectStoreSettings(value, path: path) }
        if let value = file.console { configuration.console = try ConsoleSettings(value, authorities: configuration.authorities, path: path) }
        try configuration.validate(path: path)
        return configuration
    }

    func validate(path: String) throws(ConfigurationError) {
        guard !authorities.isEmpty else { throw .noAuthorities(path: path) }
        var names = Set<String>()
        for authority in authorities where !names.insert(authority.name).inserted {
            throw .duplicateAuthority(path: path, name: authority.name)
        }
        func require(_ condition: Bool, _ detail: String) throws(ConfigurationError) {
            if !condition { throw .invalidValue(path: path, detail: detail) }
        }
        try require((1...28).contains(retentionDays), "retentionDays must be between 1 and 28")
        try require(maxIDsPerHistory >= 1, "maxIDsPerHistory must be at least 1")
        try require(maxRequestBodyBytes >= 1_024, "maxRequestBodyBytes must be at least 1024")
        try require(maxWindowSeconds >= 60, "maxWindowSeconds must be at least 60")
        try require((0...3_600).contains(clockSkewSeconds), "clockSkewSeconds must be between 0 and 3600")
        try require((60...30 * 86_400).contains(uploadCodeLifetimeSeconds), "uploadCodeLifetimeSeconds must be between 60 and 2592000")
        // Nodes read at most PositiveListIndex.maximumListingCount listings (29 days of one batch
        // every 5 minutes): publishing more often could list batches that nodes refuse.
        try require(
            publishIntervalSeconds >= Self.shortestPublishIntervalSeconds,
            "publishIntervalSeconds must be at least \(Self.shortestPublishIntervalSeconds) (5 minutes): nodes accept an index of at most 29 days of batches published that often")
        try require(
            (Self.shortestPublishIntervalSeconds...publishIntervalSeconds).contains(publishSpacingSeconds),
            "publishSpacingSeconds must be between \(Self.shortestPublishIntervalSeconds) (5 minutes: nodes accept at most 29 days of batches cut that often) and publishIntervalSeconds")
        // A held request must end before the proxies in front give up on it (nginx's
        // proxy_read_timeout is 60 s unless raised).
        try require(
            longPollSeconds.map { (1...300).contains($0) } ?? true,
            "longPollSeconds must be between 1 and 300 (leave it out to turn the long poll off)")
        try require(failedAttemptsPerMinute >= 1, "failedAttemptsPerMinute must be at least 1")
        try require(indexMaxAgeSeconds >= 0, "indexMaxAgeSeconds must not be negative")
        try require((60...86_400).contains(indexRefreshSeconds), "indexRefreshSeconds must be between 60 and 86400")
        if let notAnAddress = trustedProxies.first(where: { ForwardedFor.canonicalAddress($0) == nil }) {
            throw .invalidValue(path: path, detail: "trustedProxies must list IP addresses; \"\(notAnAddress)\" is not one")
        }
        try require(!trustForwardedFor || !trustedProxies.isEmpty, "trustedProxies must not be empty when trustForwardedFor is true")
        try require((1...10).contains(trustedProxyHops), "trustedProxyHops must be between 1 and 10")
        try require((1...3_600).contains(idleTimeoutSeconds), "idleTimeoutSeconds must be between 1 and 3600")
        try require((1...3_600).contains(requestReadTimeoutSeconds), "requestReadTimeoutSeconds must be between 1 and 3600")
        try require(maxConnections.map { $0 >= 16 } ?? true, "maxConnections must be at least 16")
        try require(maxConnectionsPerAddress.map { $0 >= 1 } ?? true, "maxConnectionsPerAddress must be at least 1")
        try require(!acceptUploads.isEmpty, #"acceptUploads must be "ids", "keys" or "both""#)
        try require((1...1_000).contains(maxKeysPerHistory), "maxKeysPerHistory must be between 1 and 1000")
        try require(
            !keyIntervalsSeconds.isEmpty && keyIntervalsSeconds.allSatisfy { (try? RotationSchedule(intervalSeconds: $0)) != nil },
            "keyIntervalsSeconds must list rotation intervals between 5 and 86400 seconds, as node.rotation_interval")
        try require((0...86_400).contains(keyPublicationDelaySeconds), "keyPublicationDelaySeconds must be between 0 and 86400")
        try require((1.0...10.0).contains(keyPaddingMultiplier), "keyPaddingMultiplier must be between 1.0 (no fake keys) and 10.0")
        try require((1...100_000).contains(keyBatchMinimumKeys), "keyBatchMinimumKeys must be between 1 (hold nothing) and 100000")
        try require(
            (0...7 * 86_400).contains(keyBatchMaximumHoldSeconds), "keyBatchMaximumHoldSeconds must be between 0 and 604800 (a week)")
        // The index is re-signed at the first publication once it is indexRefreshSeconds old, so
        // it can reach the sum; nodes call a list signed more than two days ago outdated.
        try require(
            publishIntervalSeconds + indexRefreshSeconds <= Self.longestIndexAgeSeconds,
            "publishIntervalSeconds + indexRefreshSeconds must be at most \(Self.longestIndexAgeSeconds) (36 hours), so nodes never see an index older than that")
    }

    /// The connection limits for a process allowed `descriptorLimit` open files.
    public func connectionLimits(descriptorLimit: Int = ConnectionLimits.currentDescriptorLimit()) throws(ConnectionLimitError) -> ConnectionLimits {
        try ConnectionLimits.resolve(
            descriptorLimit: descriptorLimit, configuredTotal: maxConnections, configuredPerAddress: maxConnectionsPerAddress)
    }

    private static func describe(_ error: any Error) -> String {
        switch error {
        case DecodingError.typeMismatch(_, let context), DecodingError.valueNotFound(_, let context),
             DecodingError.dataCorrupted(let context):
            let path = context.codingPath.map(\.stringValue).joined(separator: ".")
            return "\(path.isEmpty ? "the file" : path): \(context.debugDescription)"
        case DecodingError.keyNotFound(let key, let context):
            let path = (context.codingPath + [key]).map(\.stringValue).joined(separator: ".")
            return "\(path) is missing"
        default:
            return String(describing: error)
        }
    }
}

/// How the file spells the settings; optional fields fall back to the defaults above.
private struct ConfigurationFile: Decodable {
    struct Authority: Decodable {
        var name: String
        var token: String?
        var tokenSHA256: String?
    }

    var authorities: [Authority]
    var retentionDays: Int?
    var maxIDsPerHistory: Int?
    var maxRequestBodyBytes: Int?
    var maxWindowSeconds: Int64?
    var clockSkewSeconds: Int64?
    var uploadCodeLifetimeSeconds: Int64?
    var publishIntervalSeconds: Int64?
    var publishSpacingSeconds: Int64?
    var longPollSeconds: Int64?
    var failedAttemptsPerMinute: Int?
    var indexMaxAgeSeconds: Int?
    var indexRefreshSeconds: Int64?
    var trustForwardedFor: Bool?
    var trustedProxies: [String]?
    var trustedProxyHops: Int?
    var idleTimeoutSeconds: Int?
    var requestReadTimeoutSeconds: Int?
    var maxConnections: Int?
    var maxConnectionsPerAddress: Int?
    var acceptUploads: String?
    var maxKeysPerHistory: Int?
    var keyIntervalsSeconds: [Int64]?
    var keyPublicationDelaySeconds: Int64?
    var keyPaddingMultiplier: Double?
    var keyBatchMinimumKeys: Int?
    var keyBatchMaximumHoldSeconds: Int64?
    var database: DatabaseConfiguration.File?
    var objectStore: ObjectStoreSettings.File?
    var console: ConsoleSettings.File?
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

    fileprivate init(_ entry: ConfigurationFile.Authority, position: Int, path: String) throws(ConfigurationError) {
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
        }
    }
}
