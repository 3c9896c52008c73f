import Foundation
import Settings

/// The configuration's `metrics` section: Prometheus's `GET /metrics` on a listener of its own,
/// never the API's, so that the public address never answers it and a firewall or the reverse
/// proxy need not know about it. Absent: no metrics and no listener. Present: on, at `listen`
/// (loopback by default), unless `"enabled": false` keeps the section but turns it off.
public struct MetricsSettings: Sendable, Equatable {
    public var enabled: Bool = true
    public var host: String = "127.0.0.1"
    /// 9464: the port the OpenTelemetry Prometheus exporter uses, free of the well-known ones.
    public var port: Int = 9_464

    public init() {}

    static let section = SettingSection<MetricsSettings>([
        .boolean("enabled", \.enabled, env: nil, flag: nil, help: ""),
        ListenAddress.field(\.host, \.port, example: "127.0.0.1:9464"),
    ])

    /// Whether this listener would take the address `host`:`port` (the API's, or the console's):
    /// the same port on the same host, or either on every address.
    public func overlaps(host other: String, port otherPort: Int) -> Bool {
        let everywhere: Set<String> = ["", "0.0.0.0", "::", "*"]
        return port == otherPort && (host == other || everywhere.contains(host) || everywhere.contains(other))
    }
}

/// `HOST:PORT` as the console's and the metrics' `listen` spell it (an IPv6 host in brackets).
enum ListenAddress {
    /// The `listen` field of a section, stored in its `host` and `port`.
    static func field<Section>(
        _ host: WritableKeyPath<Section, String> & Sendable, _ port: WritableKeyPath<Section, Int> & Sendable, example: String
    ) -> SettingRow<Section> {
        .field("listen", .text(describe: "HOST:PORT", problem: { parse($0) == nil ? "must be HOST:PORT, for example \(example)" : nil })) { section, value in
            guard case .text(let text) = value, let (parsedHost, parsedPort) = parse(text) else { return }
            section[keyPath: host] = parsedHost
            section[keyPath: port] = parsedPort
        }
    }

    static func parse(_ text: String) -> (host: String, port: Int)? {
        guard let colon = text.lastIndex(of: ":"), colon != text.startIndex, let port = Int(text[text.index(after: colon)...]),
              (0...65_535).contains(port)
        else { return nil }
        return (String(text[..<colon]).trimmingCharacters(in: CharacterSet(charactersIn: "[]")), port)
    }
}
