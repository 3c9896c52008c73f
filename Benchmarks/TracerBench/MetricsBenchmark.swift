import CurlHTTP
import Foundation
import Logging
import PositiveListFormat
import PositiveListServer
import ServerApplication
import SQLiteServerStore
import TracerCore
import TracerTestSupport

/// What metrics cost (issue 41), for BENCHMARKS.md:
/// - the server: ids/s accepted through POST /v1/histories (wrk, 4 connections, fresh 2,688-id
///   histories, as `server` measures them) with the metrics listener off and on, a fresh server
///   each time, the two alternating for `rounds` rounds; with it on, /metrics is scraped once a
///   second meanwhile, and each scrape is timed;
/// - the node: the CPU time of two `tracer run` on Bumble's virtual link for `nodeSeconds`, with
///   metrics off, and with `node.metrics_file` and `node.metrics_listen` on and the endpoint
///   scraped once a second (each scrape timed), alternating.
struct MetricsBenchmark {
    let directory: String
    let repository: URL
    let rounds: Int
    let nodeSeconds: Int

    private func say(_ text: String) {
        FileHandle.standardOutput.write(Data((text + "\n").utf8))
    }

    func run() async throws {
        say("# Metrics benchmark (\(Date())): \(ProcessInfo.processInfo.activeProcessorCount) cores, everything on 127.0.0.1")
        let server = ServerBenchmark(directory: directory, repository: repository)
        var rates: [Bool: [Double]] = [:]
        var scrapes: [Duration] = []
        var scrapeBytes = 0
        for round in 1...rounds {
            for metrics in [false, true] {
                let result = try await serverRound(server, metrics: metrics, round: round)
                rates[metrics, default: []].append(result.idsPerSecond)
                scrapes += result.scrapes
                scrapeBytes = max(scrapeBytes, result.bytes)
                say(String(format: "server round %d, metrics %@: %.0f ids/s accepted%@", round, metrics ? "on " : "off", result.idsPerSecond,
                           metrics ? String(format: ", %d scrapes of %d bytes", result.scrapes.count, result.bytes) : ""))
            }
        }
        let off = median(rates[false] ?? []), on = median(rates[true] ?? [])
        say(String(format: "server, median of %d rounds: %.0f ids/s with metrics off, %.0f ids/s on (%+.1f %%); /metrics scraped once a second during the uploads: %@ (%d bytes)",
                   rounds, off, on, (on - off) / off * 100, Self.describe(scrapes), scrapeBytes))

        var cpu: [Bool: [Double]] = [:]
        var nodeScrapes: [Duration] = []
        for round in 1...2 {
            for metrics in [false, true] {
                let result = try await nodeRound(metrics: metrics, round: round)
                cpu[metrics, default: []].append(contentsOf: result.cpuSeconds)
                nodeScrapes += result.scrapes
                say(String(format: "node round %d, metrics %@: CPU %@ s in %d s", round, metrics ? "on " : "off",
                           result.cpuSeconds.map { String(format: "%.2f", $0) }.joined(separator: ", "), nodeSeconds))
            }
        }
        func share(_ values: [Double]) -> Double { median(values) / Double(nodeSeconds) * 100 }
        say(String(format: "node, median per node over %d runs of %d s: CPU %.2f %% of a core with metrics off, %.2f %% with the file and the endpoint on and scraped once a second; scrapes %@",
                   (cpu[false] ?? []).count, nodeSeconds, share(cpu[false] ?? []), share(cpu[true] ?? []), Self.describe(nodeScrapes)))
    }

    private func serverRound(_ bench: ServerBenchmark, metrics: Bool, round: Int) async throws -> (idsPerSecond: Double, scrapes: [Duration], bytes: Int) {
        let logger = Logger(label: "bench") { _ in SwiftLogNoOpLogHandler() }
        let paths = ServerPaths(dataDirectory: directory + "/server-\(round)-\(metrics ? "on" : "off")")
        try FileManager.default.createDirectory(atPath: paths.dataDirectory, withIntermediateDirectories: true)
        var configuration = ServerConfiguration(authorities: [AuthorityConfiguration(name: "Bench", token: ServerBenchmark.token)])
        configuration.maxRequestBodyBytes = 4 << 20
        let metricsPort = try LoopbackPort.free()
        if metrics {
            var settings = MetricsSettings()
            settings.port = metricsPort
            configuration.metrics = settings
        }
        let store = try ServerStore.open(path: paths.database, publishedDirectory: paths.published)
        let clock = SystemWallClock()
        let publisher = Publisher(
            store: store, directory: paths.published, signingKey: try SigningKeyFile.create(at: paths.signingKey),
            retentionSeconds: configuration.retentionSeconds, idPublicationDelaySeconds: 0, clock: clock, logger: logger)
        let port = try LoopbackPort.free()
        let components = ServerComponents(configuration: configuration, store: store, publisher: publisher, directory: paths.published, clock: clock)
        let application = PositiveListHTTPServer.makeApplication(
            components, address: .hostname("127.0.0.1", port: port), logger: logger, publishOnSchedule: false)
        let running = Task { try await application.run() }
        defer { running.cancel() }
        try await LoopbackPort.waitUntilListening(port)
        if metrics { try await LoopbackPort.waitUntilListening(metricsPort) }

        let scraper = metrics ? Task { await Self.scrapeEverySecond("http://127.0.0.1:\(metricsPort)/metrics") } : nil
        let script = directory + "/histories.lua"
        try ServerBenchmark.historyScript(now: clock.now()).write(toFile: script, atomically: true, encoding: .utf8)
        let append = try bench.wrk(
            port: port, path: "/v1/histories", connections: 4, script: script,
            headers: ["Authorization: Bearer \(ServerBenchmark.token)", "Content-Type: application/json"])
        scraper?.cancel()
        let scraped = await scraper?.value ?? ([], 0)
        guard append.non2xx == 0 else { throw BenchmarkError("\(append.non2xx) uploads refused") }
        return (append.requestsPerSecond * 2_688, scraped.0, scraped.1)
    }

    private func nodeRound(metrics: Bool, round: Int) async throws -> (cpuSeconds: [Double], scrapes: [Duration]) {
        let binary = try CrowdBenchmark.nodeBinary()
        let link = try VirtualLinkProcess.start(repository: repository, controllers: 2, onRootCanal: false)
        defer { _ = link.process.stop() }
        let folder = directory + "/nodes-\(round)-\(metrics ? "on" : "off")"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let ports = try [LoopbackPort.free(), LoopbackPort.free()]
        let nodes = try (0..<2).map { index in
            try CrowdBenchmark.startNode(
                binary: binary, database: folder + "/node\(index).db", port: link.ports[index], rotationInterval: nil, logLevel: "notice",
                logFile: folder + "/node\(index).log",
                environment: metrics ? ["TRACER_METRICS_FILE": folder + "/node\(index).prom", "TRACER_METRICS_LISTEN": "\(ports[index])"] : [:])
        }
        defer { for node in nodes { _ = node.stop() } }
        let scraper = metrics ? Task { await Self.scrapeEverySecond("http://127.0.0.1:\(ports[0])/metrics") } : nil
        try await Task.sleep(for: .seconds(nodeSeconds))
        let cpu = nodes.map { ProcessFigures.cpuSeconds($0.pid) }
        scraper?.cancel()
        let scraped = await scraper?.value ?? ([], 0)
        if metrics, scraped.0.isEmpty { throw BenchmarkError("the node's endpoint never answered") }
        return (cpu, scraped.0)
    }

    /// GET `url` once a second until cancelled: the time of each answered request, and the last body's size.
    private static func scrapeEverySecond(_ url: String) async -> ([Duration], Int) {
        var times: [Duration] = []
        var bytes = 0
        let client = CurlHTTPClient()
        while !Task.isCancelled {
            let start = ContinuousClock.now
            if case .success(let response) = await client.performOnce(HTTPRequest(url: url)), response.status == 200 {
                times.append(ContinuousClock.now - start)
                bytes = response.body.count
            }
            try? await Task.sleep(until: start + .seconds(1))
        }
        return (times, bytes)
    }

    static func describe(_ times: [Duration]) -> String {
        guard !times.isEmpty else { return "none" }
        let milliseconds = times.map { $0.seconds * 1_000 }.sorted()
        return String(format: "%d, p50 %.2f ms, p99 %.2f ms, max %.2f ms", times.count, milliseconds[milliseconds.count / 2],
                      milliseconds[min(milliseconds.count - 1, milliseconds.count * 99 / 100)], milliseconds.last ?? 0)
    }
}
