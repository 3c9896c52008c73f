import Foundation
import Settings

/// The configuration's `console` section: the web console where the authority's staff sign in
/// and issue upload codes. Off unless `enabled` is true; it listens on its own address, apart
/// from the API, so that a reverse proxy can keep it off the public internet.
public struct ConsoleSettings: Sendable, Equatable {
    public var enabled: Bool = false
    public var host: String = "127.0.0.1"
    public var port: Int = 8081
    /// The authority (a name from `authorities`) the console's codes are issued for.
    public var authority: String
    /// A session unused this long ends; so does any session this old.
    public var sessionIdleSeconds: Int64 = 1_800
    public var sessionLifetimeSeconds: Int64 = 43_200
    /// Times on the pages are shown in this zone (an IANA name such as "Europe/Berlin").
    public var timeZone: TimeZone = TimeZone(identifier: "UTC")!
    /// Audit entries older than this are removed. 400 days: a year's events and the weeks after
    /// it that a yearly review or an inquiry about last year's codes needs, and not more, since
    /// the log names staff and their addresses (data minimisation).
    public var auditRetentionDays: Int64 = 400

    public init(authority: String) {
        self.authority = authority
    }

    static let knownKeys: Set<String> = ["enabled", "listen", "authority", "sessionIdleSeconds", "sessionLifetimeSeconds", "timeZone", "auditRetentionDays"]

    /// How the configuration file spells the section.
    struct File: Decodable {
        var enabled: Bool?
        var listen: String?
        var authority: String?
        var sessionIdleSeconds: Int64?
        var sessionLifetimeSeconds: Int64?
        var timeZone: String?
        var auditRetentionDays: Int64?
    }

    init(_ file: File, authorities: [AuthorityConfiguration]) throws(SettingProblem) {
        func invalid(_ detail: String) -> SettingProblem { SettingProblem(namingItsSetting: "console." + detail) }
        // With one authority there is nothing to choose; with several the console must be told.
        guard let authority = file.authority ?? (authorities.count == 1 ? authorities[0].name : nil) else {
            throw invalid("authority must name the authority the console issues codes for (one of: \(authorities.map(\.name).joined(separator: ", ")))")
        }
        guard authorities.contains(where: { $0.name == authority }) else {
            throw invalid("authority \"\(authority)\" is not one of the configured authorities")
        }
        self.init(authority: authority)
        enabled = file.enabled ?? false
        if let listen = file.listen {
            guard let (host, port) = ListenAddress.parse(listen) else { throw invalid("listen must be HOST:PORT, for example 127.0.0.1:8081") }
            self.host = host
            self.port = port
        }
        if let value = file.sessionIdleSeconds { sessionIdleSeconds = value }
        if let value = file.sessionLifetimeSeconds { sessionLifetimeSeconds = value }
        guard (1...86_400).contains(sessionIdleSeconds) else { throw invalid("sessionIdleSeconds must be between 1 and 86400") }
        guard (sessionIdleSeconds...7 * 86_400).contains(sessionLifetimeSeconds) else {
            throw invalid("sessionLifetimeSeconds must be between sessionIdleSeconds and 604800 (a week)")
        }
        if let days = file.auditRetentionDays {
            guard (1...3_650).contains(days) else { throw invalid("auditRetentionDays must be between 1 and 3650 (ten years)") }
            auditRetentionDays = days
        }
        if let name = file.timeZone {
            guard let zone = TimeZone(identifier: name) else { throw invalid("timeZone \"\(name)\" is not a time zone name such as Europe/Berlin") }
            timeZone = zone
        }
    }
}
