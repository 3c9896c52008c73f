import Foundation

/// A Grafana dashboard of deploy/monitoring/ as its JSON model, for the tests that check the
/// server's (MonitoringConfigTests) and the nodes' (NodeMonitoringConfigTests) dashboards the same way.
public struct GrafanaDashboard {
    public let model: [String: Any]
    /// Every panel's targets' `expr`.
    public let queries: [String]

    public init(path: String) throws {
        let data = try Data(contentsOf: URL(fileURLWithPath: path))
        guard let model = try JSONSerialization.jsonObject(with: data) as? [String: Any], let panels = model["panels"] as? [[String: Any]] else {
            throw HarnessFailure(description: "\(path) is not a Grafana JSON model with panels")
        }
        self.model = model
        queries = panels.flatMap { ($0["targets"] as? [[String: Any]] ?? []).compactMap { $0["expr"] as? String } }
    }

    /// What keeps it from importing as shipped: a schemaVersion outside Grafana 10/11's, no
    /// DS_PROMETHEUS input, a panel with a data source of its own or without a query. Empty when none.
    public var problems: [String] {
        var found: [String] = []
        if !((model["schemaVersion"] as? Int).map { (36...41).contains($0) } ?? false) { found.append("schemaVersion \(model["schemaVersion"] ?? "none")") }
        let inputs = model["__inputs"] as? [[String: Any]] ?? []
        if !inputs.contains(where: { $0["name"] as? String == "DS_PROMETHEUS" && $0["pluginId"] as? String == "prometheus" }) {
            found.append("no DS_PROMETHEUS input")
        }
        for panel in model["panels"] as? [[String: Any]] ?? [] where panel["type"] as? String != "row" {
            let datasource = panel["datasource"] as? [String: Any]
            if datasource?["uid"] as? String != "${DS_PROMETHEUS}" { found.append("panel \(panel["title"] ?? "?") has its own datasource") }
            if (panel["targets"] as? [Any] ?? []).isEmpty { found.append("panel \(panel["title"] ?? "?") has no query") }
        }
        return found
    }

    /// `promtool check rules` on every query as a recording rule, Grafana's variables replaced by
    /// what they stand for: its exit code and output ("SUCCESS: N rules found" when Prometheus
    /// parses them all). Requires promtool (`RequiredTool.prometheus`).
    public func checkQueries() throws -> ProcessResult {
        let directory = NSTemporaryDirectory() + "/tracer-dashboard-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        var file = "groups:\n  - name: dashboard\n    rules:\n"
        for (number, query) in queries.enumerated() {
            let expression = query.replacingOccurrences(of: "$__rate_interval", with: "2m")
                .replacingOccurrences(of: "$job", with: ".*").replacingOccurrences(of: "$instance", with: ".*")
            let quoted = String(decoding: try JSONSerialization.data(withJSONObject: [expression], options: [.withoutEscapingSlashes]), as: UTF8.self)
            file += "      - record: dashboard_query_\(number)\n        expr: \(quoted.dropFirst().dropLast())\n"
        }
        try file.write(toFile: directory + "/dashboard.rules.yml", atomically: true, encoding: .utf8)
        return try PrometheusTools.promtool(["check", "rules", directory + "/dashboard.rules.yml"])
    }

    /// The identifiers in `text` that start with `prefix` (such as "tracer_node_") and go on.
    public static func metricNames(in text: String, prefix: String) -> Set<String> {
        var names: Set<String> = []
        var rest = Substring(text)
        while let range = rest.range(of: prefix) {
            let name = rest[range.lowerBound...].prefix { $0.isLetter && $0.isASCII && $0.isLowercase || $0 == "_" || $0.isNumber }
            // A bare prefix ("every tracer_node_ name" in a comment) names no metric.
            if name.count > prefix.count { names.insert(String(name)) }
            rest = rest[range.upperBound...]
        }
        return names
    }
}
