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

    static let section = SettingSection<ConsoleSettings>([
        .boolean("enabled", \.enabled, env: nil, flag: nil, help: ""),
        ListenAddress.field(\.host, \.port, example: "127.0.0.1:8081"),
        .text("authority", \.authority, .text(describe: "the name of one of the authorities", problem: { _ in nil }), env: nil, flag: nil, help: "", convert: { $0 }),
        .integer("sessionIdleSeconds", \.sessionIdleSeconds, .integer(minimum: 1, maximum: 86_400), env: nil, flag: nil, help: ""),
        .integer(
            "sessionLifetimeSeconds", \.sessionLifetimeSeconds, .integer(SettingBounds(1, 7 * 86_400, upperNote: "a week")), env: nil, flag: nil,
            help: ""),
        .field("timeZone", .text(describe: "a time zone name such as Europe/Berlin", problem: { name in
            TimeZone(identifier: name) == nil ? "\(name.quotedForMessage) is not a time zone name such as Europe/Berlin" : nil
        })) { console, value in
            if case .text(let name) = value, let zone = TimeZone(identifier: name) { console.timeZone = zone }
        },
        .integer("auditRetentionDays", \.auditRetentionDays, .integer(SettingBounds(1, 3_650, upperNote: "ten years")), env: nil, flag: nil, help: ""),
    ])

    /// Before the fields are read: the authority is chosen by ``finish(authorities:)``.
    static let unread = ConsoleSettings(authority: "")

    /// Checks what concerns several fields, or the authorities: with one authority there is
    /// nothing to choose; with several the console must be told which.
    mutating func finish(authorities: [AuthorityConfiguration]) throws(SettingProblem) {
        if authority.isEmpty, authorities.count == 1 { authority = authorities[0].name }
        guard !authority.isEmpty else {
            throw SettingProblem(
                "must name the authority the console issues codes for (one of: \(authorities.map(\.name).joined(separator: ", ")))", field: "authority")
        }
        guard authorities.contains(where: { $0.name == authority }) else {
            throw SettingProblem("\"\(authority)\" is not one of the configured authorities", field: "authority")
        }
        guard sessionLifetimeSeconds >= sessionIdleSeconds else {
            throw SettingProblem("must be between sessionIdleSeconds and 604800 (a week)", field: "sessionLifetimeSeconds")
        }
    }
}
