import CurlHTTP
import BLEHostTestSupport
import Foundation
import Testing
import TestTiers
import TracerTestSupport
@testable import TracerNode

extension TracerNodeTests {
    /// Issue 41, items 2 and 4, at the process level: a real `tracer run --metrics-listen` on a
    /// virtual controller answers on its port with the text of its metrics file, a port it cannot
    /// have stops it with a plain message, and Debian's Prometheus scrapes two nodes' endpoints and
    /// gives their values back through its query API once they met.
    @Suite(.tags(.endToEnd)) struct NodeMetricsEndpoints {
        typealias Node = StreamingProcess

        /// GET `path` on 127.0.0.1:`port`: the status, content type and body, or nil when nothing answers.
        static func get(_ path: String, port: Int) async -> (status: Int, contentType: String?, body: String)? {
            guard case .success(let response) = await CurlHTTPClient().performOnce(HTTPRequest(url: "http://127.0.0.1:\(port)" + path)) else { return nil }
            return (response.status, response.headers["content-type"], String(decoding: response.body, as: UTF8.self))
        }

        @Test(.timeLimit(.minutes(5)))
        func aRunningNodeAnswersOnItsPortWithItsMetricsFilesText() async throws {
            let scratch = try Scratch()
            defer { scratch.remove() }
            let metricsFile = scratch.file("tracer.prom")
            let port = try LoopbackPort.free()
            let radio = try await VirtualRadio.launch(.bumble, controllers: 1)
            defer { radio.stop() }
            let tracer = try Products.path(of: "tracer")
            let node = try Node.readingLog(tracer, NodeResilience.runArguments(
                scratch.file("a.db"), port: radio.ports[0], extra: ["--metrics-file", metricsFile, "--metrics-listen", "\(port)"]), home: scratch.path)
            defer { node.ensureStopped() }

            var last: (status: Int, contentType: String?, body: String)?
            let advertising = await eventually(timeout: .seconds(30), every: .milliseconds(200)) {
                last = await Self.get("/metrics", port: port)
                return last?.body.contains("\ntracer_node_advertising 1.0\n") == true
            }
            try #require(advertising, "the endpoint never showed advertising 1: \(String(describing: last)); node: \(node.lines.suffix(8))")
            #expect(last?.status == 200)
            #expect(last?.contentType == "text/plain; version=0.0.4; charset=utf-8")
            // One rendering for both: a scrape between two reads of an unchanged file is that file.
            var file = "", scraped = ""
            let same = await eventually(timeout: .seconds(20), every: .milliseconds(100)) {
                let before = (try? String(contentsOfFile: metricsFile, encoding: .utf8)) ?? ""
                scraped = await Self.get("/metrics", port: port)?.body ?? ""
                file = (try? String(contentsOfFile: metricsFile, encoding: .utf8)) ?? ""
                return before == file && scraped == file
            }
            #expect(same, "the endpoint's text is not the file's:\n\(scraped)\n---\n\(file)")
            #expect(await Self.get("/", port: port)?.status == 404)
            #expect(await Self.get("/metrics/../status", port: port)?.status == 404)
            let listening = node.entry(message: "metrics endpoint listening")
            #expect(listening?["address"] == "http://127.0.0.1:\(port)/metrics", "\(node.lines.suffix(8))")

            // A second node asked for the same port does not start, and says what to do.
            let second = try Node.readingLog(tracer, NodeResilience.runArguments(
                scratch.file("b.db"), port: radio.ports[0], extra: ["--metrics-listen", "127.0.0.1:\(port)"]), home: scratch.path)
            defer { second.ensureStopped() }
            let exit = second.waitForExit(timeout: .seconds(20))
            #expect(exit?.status == 1 && exit?.signaled == false, "\(String(describing: exit))")
            let said = second.lines.joined(separator: "\n")
            #expect(said.contains("error: The node's metrics endpoint cannot listen on 127.0.0.1:\(port) (node.metrics_listen): another program already uses that port"), "\(said)")
            #expect(await Self.get("/metrics", port: port)?.status == 200, "the first node stopped answering")

            // Stopped: the port is closed.
            node.stopCleanly("the node")
            #expect(!LoopbackPort.isListening(port))
        }

        /// Two nodes on one virtual radio, each with its endpoint, scraped by a real Prometheus
        /// with deploy/monitoring's configuration and rules (job tracer-node, both targets): once
        /// they met, the query API gives both as running, advertising, scanning and controller
        /// working, with their transport kind, and every node rule evaluates and stays quiet.
        @Test(.timeLimit(.minutes(5)))
        func prometheusScrapesTwoNodesThatMet() async throws {
            try RequiredTool.prometheus.require()
            let scratch = try Scratch()
            defer { scratch.remove() }
            let radio = try await VirtualRadio.launch(.bumble, controllers: 2)
            defer { radio.stop() }
            let tracer = try Products.path(of: "tracer")
            let ports = try [LoopbackPort.free(), LoopbackPort.free()]
            let databases = [scratch.file("a.db"), scratch.file("b.db")]
            let nodes = try (0..<2).map { index in
                try Node.readingLog(tracer, NodeResilience.runArguments(databases[index], port: radio.ports[index], extra: ["--metrics-listen", "\(ports[index])"]),
                         home: scratch.path)
            }
            defer { nodes.forEach { $0.ensureStopped() } }

            // The shipped configuration and rules, the tracer-node job on these two nodes, every
            // interval 1 s.
            let monitoring = RequiredTool.repositoryRoot + "/deploy/monitoring"
            let shipped = try String(contentsOfFile: monitoring + "/prometheus.yml", encoding: .utf8)
            #expect(shipped.contains(#"- targets: ["127.0.0.1:9465"]"#))
            let configuration = shipped
                .replacingOccurrences(of: #""127.0.0.1:9465""#, with: #""127.0.0.1:\#(ports[0])", "127.0.0.1:\#(ports[1])""#)
                .replacingOccurrences(of: ": 30s", with: ": 1s").replacingOccurrences(of: "scrape_timeout: 10s", with: "scrape_timeout: 1s")
            let prometheus = try await PrometheusProcess(configuration: configuration, files: [
                "tracer-node.rules.yml": try String(contentsOfFile: monitoring + "/tracer-node.rules.yml", encoding: .utf8),
                "tracer-server.rules.yml": try String(contentsOfFile: monitoring + "/tracer-server.rules.yml", encoding: .utf8),
            ])
            defer { prometheus.stop() }

            // The known action: the two nodes meet (each logs the other).
            let met = await eventually(timeout: .seconds(90), every: .milliseconds(500)) {
                databases.allSatisfy { (try? NodeResilience.rows($0, home: scratch.path).isEmpty) == false }
            }
            try #require(met, "the nodes did not meet: \(nodes.map { $0.lines.suffix(6) })")

            var values: [String: Double?] = [:]
            let queries = [
                #"count(up{job="tracer-node"} == 1)"#: 2.0,
                #"sum(tracer_node_running{job="tracer-node"})"#: 2,
                #"sum(tracer_node_controller_working{job="tracer-node"})"#: 2,
                #"sum(tracer_node_advertising{job="tracer-node"})"#: 2,
                #"sum(tracer_node_scanning{job="tracer-node"})"#: 2,
                #"sum(tracer_node_reconnecting{job="tracer-node"})"#: 0,
                #"count(tracer_node_info{job="tracer-node",transport="tcp"})"#: 2,
                #"sum(tracer_node_store_problem{job="tracer-node"})"#: 0,
            ]
            let seen = await eventually(timeout: .seconds(60), every: .milliseconds(500)) {
                for query in queries.keys { values[query] = await prometheus.value(query) }
                return queries.allSatisfy { values[$0.key] == $0.value }
            }
            #expect(seen, "Prometheus gave \(values), expected \(queries); its log: \(prometheus.log.suffix(2_000))")

            // Every node rule loaded and evaluated against the two healthy nodes without an error,
            // and none pending or firing.
            var rules: [[String: Any]] = []
            let evaluated = await eventually(timeout: .seconds(30), every: .milliseconds(500)) {
                let groups = await prometheus.api("/api/v1/rules")?["groups"] as? [[String: Any]] ?? []
                rules = groups.filter { $0["name"] as? String == "tracer-node" }.flatMap { $0["rules"] as? [[String: Any]] ?? [] }
                return rules.count == 9 && rules.allSatisfy { ($0["lastEvaluation"] as? String).map { !$0.hasPrefix("0001") } ?? false }
            }
            #expect(evaluated, "Prometheus did not load and evaluate the 9 node rules: \(rules)")
            for rule in rules {
                let name = rule["name"] as? String ?? "?"
                #expect(rule["health"] as? String == "ok", "\(name): \(rule["health"] ?? "?") \(rule["lastError"] ?? "")")
                #expect(rule["state"] as? String == "inactive", "\(name) is \(rule["state"] ?? "?") on two healthy nodes: \(rule["alerts"] ?? "")")
                let annotations = rule["annotations"] as? [String: String] ?? [:]
                #expect(!(annotations["summary"] ?? "").isEmpty && (annotations["description"] ?? "").count > 100, "\(name): \(annotations)")
                #expect(((rule["duration"] as? NSNumber)?.doubleValue ?? 0) > 0, "\(name) has no for:")
            }
            for node in nodes { node.stopCleanly("a node") }
        }
    }
}
