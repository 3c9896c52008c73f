import Foundation
import Matching
import Testing
import TestTiers
import TracerTestSupport
@testable import TracerNode

/// Issue 41, item 3, for nodes: deploy/monitoring/'s node rules and node dashboard work as
/// shipped. promtool accepts the rules and their tests pass; the dashboard is a Grafana model whose
/// queries Prometheus parses; and every `tracer_node_` name they use is one the node renders
/// (NodeMetrics itself, not a copied list), and every family the node renders is on the dashboard.
/// (NodeMetricsEndpoints has a real Prometheus evaluate these rules against two running nodes.)
@Suite(.tags(.integration)) struct NodeMonitoringConfigTests {
    static let directory = RequiredTool.repositoryRoot + "/deploy/monitoring"
    static let rules = directory + "/tracer-node.rules.yml"
    static let ruleTests = directory + "/tests/tracer-node.rules.test.yml"
    static let dashboard = directory + "/grafana-tracer-nodes.json"

    /// The metric names a node renders with every family present (a check made, so that the
    /// verdict shows), from the `# TYPE` lines of its own exposition.
    static func exportedNames() -> Set<String> {
        let status = NodeRuntimeStatus(pid: 7, startedAt: 1_700_000_000, updatedAt: 1_700_000_500, transport: "hci0", state: .running)
        let metrics = NodeMetrics(
            status: status, version: "0.1.0", transportKind: "hci", listLastUpdated: 1_700_000_300,
            lastCheck: .init(checkedAt: 1_700_000_310, level: .none), placeSource: .none, placeInForce: false)
        return Set(metrics.exposition().split(separator: "\n").filter { $0.hasPrefix("# TYPE ") }.map { String($0.split(separator: " ")[2]) })
    }

    @Test(.timeLimit(.minutes(1))) func promtoolAcceptsTheNodeRulesAndTheirTestsPass() throws {
        try RequiredTool.prometheus.require()
        let rules = try PrometheusTools.promtool(["check", "rules", Self.rules])
        #expect(rules.exitCode == 0 && rules.output.contains("SUCCESS: 9 rules found"), "promtool check rules: \(rules)")
        let tests = try PrometheusTools.promtool(["test", "rules", Self.ruleTests])
        #expect(tests.exitCode == 0 && tests.output.contains("SUCCESS"), "promtool test rules: \(tests)")
    }

    @Test(.timeLimit(.minutes(1))) func theNodeDashboardIsAGrafanaModelWithValidQueries() throws {
        try RequiredTool.prometheus.require()
        let dashboard = try GrafanaDashboard(path: Self.dashboard)
        #expect(dashboard.problems.isEmpty, "\(dashboard.problems)")
        #expect(dashboard.queries.count >= 12)
        let checked = try dashboard.checkQueries()
        #expect(checked.exitCode == 0 && checked.output.contains("SUCCESS: \(dashboard.queries.count) rules found"), "the dashboard's queries: \(checked)")
    }

    @Test func everyNodeMetricTheRulesAndDashboardUseIsOneTheNodeRenders() throws {
        let exported = Self.exportedNames()
        #expect(exported.count >= 13, "the node renders only \(exported.sorted())")
        let rulesText = try String(contentsOfFile: Self.rules, encoding: .utf8)
        let dashboard = try GrafanaDashboard(path: Self.dashboard)
        let inRules = GrafanaDashboard.metricNames(in: rulesText, prefix: "tracer_node_")
        let onDashboard = Set(dashboard.queries.flatMap { GrafanaDashboard.metricNames(in: $0, prefix: "tracer_node_") })
        #expect(inRules.count >= 8, "the extraction found only \(inRules.sorted())")
        #expect(inRules.subtracting(exported).isEmpty, "in tracer-node.rules.yml but not rendered by the node: \(inRules.subtracting(exported).sorted())")
        #expect(onDashboard.subtracting(exported).isEmpty, "on the dashboard but not rendered by the node: \(onDashboard.subtracting(exported).sorted())")
        #expect(exported.subtracting(onDashboard).isEmpty, "rendered by the node but on no panel: \(exported.subtracting(onDashboard).sorted())")
    }
}
