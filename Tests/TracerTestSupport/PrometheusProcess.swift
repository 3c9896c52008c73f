import CurlHTTP
import Foundation
import TestTiers

/// promtool, for the metrics tests of the server (MetricsTests) and the node (NodeMetricsTests).
/// Their callers require it first (`RequiredTool.prometheus`).
public enum PrometheusTools {
    /// `promtool ARGUMENTS`, given `input` on its standard input: its exit code and what it said.
    public static func promtool(_ arguments: [String], input: String? = nil) throws -> ProcessResult {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/promtool")
        process.arguments = arguments
        if let input { return try ProcessResult.collect(process, input: input) }
        return try ProcessResult.collect(process)
    }

    /// `promtool check metrics` on `exposition`: its exit code and what it said (nothing when it
    /// found nothing wrong).
    public static func checkMetrics(_ exposition: String) throws -> ProcessResult {
        try promtool(["check", "metrics"], input: exposition)
    }
}

/// A child process on a free loopback port whose output goes to a log file in its own temporary
/// directory, removed when it stops.
public class LoopbackDaemon {
    public let port: Int
    public let directory: String
    private let process: Process
    private let logPath: String

    /// Starts `executable` with `arguments(port, directory)` and waits until it listens.
    public init(_ name: String, executable: String, arguments: (Int, String) -> [String], files: [String: String] = [:]) async throws {
        port = try LoopbackPort.free()
        directory = NSTemporaryDirectory() + "/tracer-\(name)-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: directory + "/data", withIntermediateDirectories: true)
        for (file, contents) in files { try contents.write(toFile: directory + "/" + file, atomically: true, encoding: .utf8) }
        logPath = directory + "/\(name).log"
        _ = FileManager.default.createFile(atPath: logPath, contents: nil)
        process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments(port, directory)
        process.currentDirectoryURL = URL(fileURLWithPath: directory)
        let log = try FileHandle(forWritingTo: URL(fileURLWithPath: logPath))
        process.standardOutput = log
        process.standardError = log
        try process.run()
        do {
            try await LoopbackPort.waitUntilListening(port, timeout: .seconds(60), orExit: process)
        } catch {
            let text = self.log
            stop()
            throw HarnessFailure(description: "\(name) did not start: \(error); its log: \(text)")
        }
    }

    deinit { stop() }

    public var log: String { (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "" }

    public func stop() {
        if process.isRunning {
            process.terminate()
            process.waitUntilExit()
        }
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// The body of GET `path` on the daemon's port when it answers 200, else nil.
    public func get(_ path: String) async -> String? {
        guard case .success(let response) = await CurlHTTPClient().performOnce(HTTPRequest(url: "http://127.0.0.1:\(port)" + path)),
              response.status == 200 else { return nil }
        return String(decoding: response.body, as: UTF8.self)
    }
}

/// Prometheus on a free loopback port with a temporary configuration and store. Never
/// /etc/prometheus or port 9090.
public final class PrometheusProcess: LoopbackDaemon {
    /// One job, `job`, scraping 127.0.0.1:`target` every second.
    public convenience init(scraping target: Int, job: String = "tracer-server") async throws {
        try await self.init(configuration: """
            global:
              scrape_interval: 1s
              scrape_timeout: 1s
              evaluation_interval: 1s
            scrape_configs:
              - job_name: \(job)
                static_configs:
                  - targets: ["127.0.0.1:\(target)"]
            """)
    }

    /// With `configuration` as its prometheus.yml and `files` (name: contents, such as rule files
    /// the configuration names) beside it.
    public init(configuration: String, files: [String: String] = [:]) async throws {
        try await super.init("prometheus", executable: "/usr/bin/prometheus", arguments: { port, directory in
            ["--config.file=\(directory)/prometheus.yml", "--storage.tsdb.path=\(directory)/data",
             "--web.listen-address=127.0.0.1:\(port)", "--log.level=warn"]
        }, files: files.merging(["prometheus.yml": configuration]) { $1 })
    }

    /// The `data` of a successful answer of the HTTP API at `path` (such as `/api/v1/rules`) with
    /// `query`, or nil.
    public func api(_ path: String, query: [URLQueryItem] = []) async -> [String: Any]? {
        var components = URLComponents(string: "http://127.0.0.1:\(port)" + path)!
        if !query.isEmpty { components.queryItems = query }
        // URLComponents leaves + unescaped, which a query string reads as a space.
        let url = components.url!.absoluteString.replacingOccurrences(of: "+", with: "%2B")
        guard case .success(let response) = await CurlHTTPClient().performOnce(HTTPRequest(url: url)), response.status == 200,
              let object = try? JSONSerialization.jsonObject(with: Data(response.body)) as? [String: Any]
        else { return nil }
        return object["data"] as? [String: Any]
    }

    /// The value of `query`'s one result through the HTTP query API, or nil while it has none.
    public func value(_ query: String) async -> Double? {
        guard let data = await api("/api/v1/query", query: [URLQueryItem(name: "query", value: query)]),
              let results = data["result"] as? [[String: Any]], results.count == 1,
              let pair = results[0]["value"] as? [Any], pair.count == 2, let text = pair[1] as? String
        else { return nil }
        return Double(text)
    }
}

/// Debian's node_exporter with only its textfile collector, reading `directory`'s *.prom files, on
/// a free loopback port.
public final class NodeExporterProcess: LoopbackDaemon {
    public init(textfileDirectory: String) async throws {
        try await super.init("node-exporter", executable: "/usr/bin/prometheus-node-exporter", arguments: { port, _ in
            ["--collector.disable-defaults", "--collector.textfile", "--collector.textfile.directory=\(textfileDirectory)",
             "--web.listen-address=127.0.0.1:\(port)", "--log.level=warn"]
        })
    }
}
