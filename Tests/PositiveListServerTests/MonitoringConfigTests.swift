import Foundation
import Testing
import TestTiers
import ServerTestSupport
import TracerTestSupport

/// Issue 41, item 3: deploy/monitoring/ works as shipped. promtool accepts the scrape
/// configuration and the rules, and its rule tests pass; every `tracer_server_` metric the rules
/// and the Grafana dashboard name is one a real `serve` (on PostgreSQL, so that the pool's
/// metrics show) exports; and a real Prometheus running the shipped configuration, pointed at that
/// server, loads every rule, evaluates it without error and finds nothing to alert about on a
/// healthy server (the sync alerts stay quiet without an object store).
@Suite(.tags(.integration)) struct MonitoringConfigTests {
    static let directory = RequiredTool.repositoryRoot + "/deploy/monitoring"
    static let configuration = directory + "/prometheus.yml"
    static let rules = directory + "/tracer-server.rules.yml"
    static let ruleTests = directory + "/tests/tracer-server.rules.test.yml"
    static let dashboard = directory + "/grafana-tracer-server.json"

    static func promtool(_ arguments: [String]) throws -> ProcessResult {
        try MetricsTests.requireTools()
        return try PrometheusTools.promtool(arguments)
    }

    /// The `tracer_server_...` identifiers in `text`.
    static func metricNames(in text: String) -> Set<String> {
        GrafanaDashboard.metricNames(in: text, prefix: "tracer_server_")
    }

    /// The rules of the group tracer-server as Prometheus's API has them (the shipped
    /// configuration names the nodes' rules too; no node runs here).
    static func serverRules(_ prometheus: PrometheusProcess) async -> [[String: Any]] {
        let groups = await prometheus.api("/api/v1/rules")?["groups"] as? [[String: Any]] ?? []
        return groups.filter { $0["name"] as? String == "tracer-server" }.flatMap { $0["rules"] as? [[String: Any]] ?? [] }
    }

    @Test(.timeLimit(.minutes(1))) func promtoolAcceptsTheConfigurationAndTheRulesAndTheirTestsPass() throws {
        let rules = try Self.promtool(["check", "rules", Self.rules])
        #expect(rules.exitCode == 0 && rules.output.contains("SUCCESS: 8 rules found"), "promtool check rules: \(rules)")
        // check config reads rule_files relative to the configuration: the rules beside it.
        let configuration = try Self.promtool(["check", "config", Self.configuration])
        // The server's rules and the nodes' (NodeMonitoringConfigTests checks theirs).
        #expect(configuration.exitCode == 0 && configuration.output.contains("SUCCESS: 2 rule files found"), "promtool check config: \(configuration)")
        let tests = try Self.promtool(["test", "rules", Self.ruleTests])
        #expect(tests.exitCode == 0 && tests.output.contains("SUCCESS"), "promtool test rules: \(tests)")
    }

    @Test(.timeLimit(.minutes(1))) func theDashboardIsAGrafanaModelWithValidQueries() throws {
        try MetricsTests.requireTools()
        let dashboard = try GrafanaDashboard(path: Self.dashboard)
        #expect(dashboard.problems.isEmpty, "\(dashboard.problems)")
        #expect(dashboard.queries.count >= 15)
        let checked = try dashboard.checkQueries()
        #expect(checked.exitCode == 0 && checked.output.contains("SUCCESS: \(dashboard.queries.count) rules found"), "the dashboard's queries: \(checked)")
    }

    @Test(.timeLimit(.minutes(3))) func everyMetricTheRulesAndDashboardUseIsExportedAndPrometheusEvaluatesTheRules() async throws {
        try MetricsTests.requireTools()
        let rulesText = try String(contentsOfFile: Self.rules, encoding: .utf8)
        let used = Self.metricNames(in: rulesText).union(try GrafanaDashboard(path: Self.dashboard).queries.flatMap(Self.metricNames(in:)))
        #expect(used.count >= 15, "the extraction found only \(used.sorted())")

        let postgres = try await PostgresFixture.make()
        defer { postgres.remove() }
        let server = try await MetricsTests.MetricsServerProcess(
            fixture: postgres.server, configuration: #", "database": {"url": "\#(postgres.url)", "poolSize": 3}"#)
        defer { server.stop() }
        // A request on the API, so that the HTTP families have a series.
        #expect(try await server.upload(seed: 1, credential: "Authorization: Bearer \(ServerFixture.authorityToken)").status == 201)
        let exposition = try await server.scrape()
        var exported = Set(exposition.samples.map(\.name))
        for line in exposition.text.split(separator: "\n") where line.hasPrefix("# TYPE ") {
            exported.insert(String(line.split(separator: " ")[2]))
        }
        let missing = used.subtracting(exported)
        #expect(missing.isEmpty, "in deploy/monitoring but not in a scrape of serve: \(missing.sorted())")

        // The shipped configuration, scraping this server every second and evaluating the shipped
        // rules as often; everything else as shipped.
        let shipped = try String(contentsOfFile: Self.configuration, encoding: .utf8)
        #expect(shipped.contains(#"targets: ["127.0.0.1:9464"]"#) && shipped.contains("scrape_interval: 30s"))
        let configuration = shipped.replacingOccurrences(of: "127.0.0.1:9464", with: "127.0.0.1:\(server.metricsPort)")
            .replacingOccurrences(of: ": 30s", with: ": 1s").replacingOccurrences(of: "scrape_timeout: 10s", with: "scrape_timeout: 1s")
        let prometheus = try await PrometheusProcess(configuration: configuration, files: [
            "tracer-server.rules.yml": rulesText,
            "tracer-node.rules.yml": try String(contentsOfFile: Self.directory + "/tracer-node.rules.yml", encoding: .utf8),
        ])
        defer { prometheus.stop() }
        let up = await eventually(timeout: .seconds(60), every: .milliseconds(250)) { await prometheus.value(#"up{job="tracer-server"}"#) == 1 }
        #expect(up, "Prometheus never scraped the server: \(prometheus.log.suffix(2_000))")

        // Every rule loaded, and evaluated against the live series without an error, a few
        // evaluations after the first scrape.
        var rules: [[String: Any]] = []
        let evaluated = await eventually(timeout: .seconds(60), every: .milliseconds(500)) {
            rules = await Self.serverRules(prometheus)
            return rules.count == 8 && rules.allSatisfy { ($0["lastEvaluation"] as? String).map { !$0.hasPrefix("0001") } ?? false }
        }
        try #require(evaluated, "Prometheus did not load and evaluate the 8 rules: \(rules); \(prometheus.log.suffix(2_000))")
        try await Task.sleep(for: .seconds(3))
        rules = await Self.serverRules(prometheus)
        for rule in rules {
            let name = rule["name"] as? String ?? "?"
            #expect(rule["type"] as? String == "alerting", "\(name) is not an alert")
            #expect(rule["health"] as? String == "ok", "\(name): \(rule["health"] ?? "?") \(rule["lastError"] ?? "")")
            #expect(((rule["duration"] as? NSNumber)?.doubleValue ?? 0) > 0, "\(name) has no for:")
            let labels = rule["labels"] as? [String: String] ?? [:]
            #expect(["critical", "warning"].contains(labels["severity"] ?? ""), "\(name) has no severity")
            let annotations = rule["annotations"] as? [String: String] ?? [:]
            #expect(!(annotations["summary"] ?? "").isEmpty && (annotations["description"] ?? "").count > 100, "\(name): \(annotations)")
            // A healthy server on PostgreSQL, without an object store, that just stored an upload:
            // nothing pending or firing.
            #expect(rule["state"] as? String == "inactive", "\(name) is \(rule["state"] ?? "?") on a healthy server: \(rule["alerts"] ?? "")")
        }
    }
}
