import Foundation
import Hummingbird
import Logging
import PositiveListFormat
import PositiveListServer
import ServerApplication
import ServerStorage
import SQLiteServerStore
import TracerCore
import TracerTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// Positive list server figures for BENCHMARKS.md, all on 127.0.0.1 in one run, with wrk from
/// Debian as the load generator:
/// - the log's largest entry bundle (after a 10 MB batch) and its checkpoint served by
///   tracer-server and by nginx over the same directory;
/// - 304 revalidation of the checkpoint with 100 connections (requests/s, p99);
/// - ids/s accepted through POST /v1/histories with 2,688-id histories;
/// - time to publish a batch of 1,000,000 ids.
struct ServerBenchmark {
    let directory: String
    let repository: URL
    let seconds = 5
    static let token = "benchmark-authority-token-0123456789"

    /// Unbuffered, so figures already measured survive a later failure.
    private func say(_ text: String) {
        FileHandle.standardOutput.write(Data((text + "\n").utf8))
    }

    func run() async throws {
        for tool in ["/usr/bin/wrk", "/usr/sbin/nginx"] where !FileManager.default.isExecutableFile(atPath: tool) {
            throw BenchmarkFailure("\(tool) is missing; run ./scripts/setup (it installs nginx and wrk).")
        }
        say("# Positive list server benchmark (\(Date()))")
        say("\(ProcessInfo.processInfo.activeProcessorCount) cores; wrk \(seconds) s per case; everything on 127.0.0.1")

        let logger = Logger(label: "bench") { _ in SwiftLogNoOpLogHandler() }
        let paths = ServerPaths(dataDirectory: directory + "/server")
        try FileManager.default.createDirectory(atPath: paths.dataDirectory, withIntermediateDirectories: true)
        chmod(directory, 0o755)
        chmod(paths.dataDirectory, 0o755)
        var configuration = ServerConfiguration(authorities: [AuthorityConfiguration(name: "Bench", token: Self.token)])
        configuration.maxRequestBodyBytes = 4 << 20
        let store = try ServerStore.open(path: paths.database, publishedDirectory: paths.published)
        let key = try SigningKeyFile.create(at: paths.signingKey)
        let clock = SystemWallClock()
        let publisher = Publisher(
            store: store, directory: paths.published, signingKey: key,
            retentionSeconds: configuration.retentionSeconds,
            // The histories end at the clock's now; this measures publication, not the wait for it.
            idPublicationDelaySeconds: 0, clock: clock, logger: logger)
        let now = clock.now()

        try await appendBreakdown(configuration: configuration, now: now, logger: logger)

        let serverPort = try LoopbackPort.free()
        let components = ServerComponents(configuration: configuration, store: store, publisher: publisher, directory: paths.published, clock: clock)
        let application = PositiveListHTTPServer.makeApplication(
            components, address: .hostname("127.0.0.1", port: serverPort), logger: logger, publishOnSchedule: false)
        let server = Task { try await application.run() }
        defer { server.cancel() }
        // One worker per core, as a production nginx would run here.
        let nginx = try await NginxProcess(
            prefix: directory + "/nginx", publishedDirectory: paths.published.path, upstreamPort: serverPort,
            repositoryRoot: repository.path, workerProcesses: "auto", captureErrors: false)
        defer { nginx.stop() }
        try await LoopbackPort.waitUntilListening(serverPort)

        // Appending into an empty store; the ids go into a first batch of their own.
        try await measureAppend(port: serverPort, store: store, now: now, label: "empty store")
        try await publisher.publish()

        // A 10 MB batch: 655,000 entries of 16 bytes.
        try await appendDirectly(655_000, to: store, now: now, seed: 1)
        let tenMegabytes = try await publisher.publish().newBatch!
        say("batch \(tenMegabytes.number): \(tenMegabytes.idCount) ids")

        // Publishing 1,000,000 ids (appended beforehand, not timed).
        try await appendDirectly(1_000_000, to: store, now: now, seed: 2)
        let publishStart = ContinuousClock.now
        let million = try await publisher.publish()
        let publishSeconds = (ContinuousClock.now - publishStart).seconds
        say(String(format: "publish: batch %d with %d ids in %.3f s", million.newBatch!.number, million.newBatch!.idCount, publishSeconds))

        let bundlePath = try Self.largestBundle(in: paths.published)
        say("\n| case | tracer-server | nginx | ratio |")
        say("| --- | --- | --- | --- |")
        for (name, path, connections) in [("largest entry bundle, 8 connections", bundlePath, 8), ("checkpoint, 100 connections", "/log/checkpoint", 100)] {
            let ours = try wrk(port: serverPort, path: path, connections: connections)
            let theirs = try wrk(port: nginx.port, path: path, connections: connections)
            say(String(format: "| %@ (req/s) | %.0f | %.0f | %.2f |", name, ours.requestsPerSecond, theirs.requestsPerSecond, ours.requestsPerSecond / theirs.requestsPerSecond))
        }
        let ourTag = try entityTag(port: serverPort, path: "/log/checkpoint")
        let nginxTag = try entityTag(port: nginx.port, path: "/log/checkpoint")
        // wrk counts only 4xx and 5xx as errors, so check once that these requests get 304.
        for (port, tag) in [(serverPort, ourTag), (nginx.port, nginxTag)] {
            let status = try ProcessResult.run("/usr/bin/curl", ["-s", "-o", "/dev/null", "-w", "%{http_code}", "-H", "If-None-Match: \(tag)", "http://127.0.0.1:\(port)/log/checkpoint"]).output
            guard status == "304" else { throw BenchmarkFailure("revalidation on port \(port) answered \(status), not 304") }
        }
        let ours304 = try wrk(port: serverPort, path: "/log/checkpoint", connections: 100, headers: ["If-None-Match: \(ourTag)"])
        let nginx304 = try wrk(port: nginx.port, path: "/log/checkpoint", connections: 100, headers: ["If-None-Match: \(nginxTag)"])
        say(String(format: "| checkpoint 304, 100 connections (req/s) | %.0f | %.0f | %.2f |", ours304.requestsPerSecond, nginx304.requestsPerSecond, ours304.requestsPerSecond / nginx304.requestsPerSecond))
        say(String(format: "| checkpoint 304, 100 connections (p99) | %@ | %@ | |", ours304.p99, nginx304.p99))

        // Appending again, into a store holding the ids of the runs above (2 to 4 million,
        // depending on how many the first append run got in).
        try await measureAppend(port: serverPort, store: store, now: now, label: "full store")
        say(String(format: "publish 1,000,000 ids: %.3f s", publishSeconds))
        try await measureRestart(paths: paths, store: store, publisher: publisher, now: now)
    }

    /// A restarted server reads the ids of every live batch before it listens (`serve`) or
    /// before its first upload: how long that takes, and the memory the index holds.
    private func measureRestart(paths: ServerPaths, store: ServerStore, publisher: Publisher, now: UnixSeconds) async throws {
        try await publisher.publish()
        let live = try await store.liveBatches()
        let restarted = try ServerStore.open(path: paths.database, publishedDirectory: paths.published)
        let start = ContinuousClock.now
        let loaded = try await restarted.loadPublishedIDs()
        let loadSeconds = (ContinuousClock.now - start).seconds
        let uploadStart = ContinuousClock.now
        try await appendDirectly(2_688, to: restarted, now: now, seed: 3)
        let uploadSeconds = (ContinuousClock.now - uploadStart).seconds
        say(String(format: "restart: %d published ids of %d live batches read in %.3f s; index %.1f MB (%.1f bytes per id); the first 2,688-id upload then took %.4f s; peak resident set of the whole benchmark %.0f MB",
                   loaded.ids, live.count, loadSeconds, Double(loaded.bytes) / 1_048_576, Double(loaded.bytes) / Double(max(1, loaded.ids)),
                   uploadSeconds, Double(Self.residentKilobytes("VmHWM")) / 1_024))
    }

    /// The URL path of the largest file under the log's entry bundles.
    private static func largestBundle(in published: PublishedDirectory) throws -> String {
        let root = published.logPath + "/tile/entries"
        let sized = try FileManager.default.subpathsOfDirectory(atPath: root).compactMap { name -> (String, Int)? in
            let attributes = try? FileManager.default.attributesOfItem(atPath: root + "/" + name)
            guard attributes?[.type] as? FileAttributeType == .typeRegular, let size = attributes?[.size] as? Int else { return nil }
            return (name, size)
        }
        guard let largest = sized.max(by: { $0.1 < $1.1 }) else { throw BenchmarkFailure("the log holds no entry bundle") }
        return "/log/tile/entries/" + largest.0
    }

    /// A line of /proc/self/status, in kB.
    private static func residentKilobytes(_ field: String) -> Int {
        let status = (try? String(contentsOfFile: "/proc/self/status", encoding: .utf8)) ?? ""
        let line = status.split(separator: "\n").first { $0.hasPrefix(field + ":") } ?? ""
        return Int(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "") ?? 0
    }

    /// ids/s accepted through POST /v1/histories: each wrk request carries a fresh 2,688-id
    /// history generated in Lua, so every id is new to the server.
    private func measureAppend(port: Int, store: ServerStore, now: UnixSeconds, label: String) async throws {
        let script = directory + "/histories.lua"
        try Self.historyScript(now: now).write(toFile: script, atomically: true, encoding: .utf8)
        let before = try await store.summary(now: now).storedIDs
        let append = try wrk(
            port: port, path: "/v1/histories", connections: 4, script: script,
            headers: ["Authorization: Bearer \(Self.token)", "Content-Type: application/json"])
        let stored = try await store.summary(now: now).storedIDs - before
        say(String(format: "append (%@, %d ids before): %.1f histories/s = %.0f ids/s accepted (%d ids stored, %d error responses, 4 connections)",
                   label, before, append.requestsPerSecond, append.requestsPerSecond * 2_688, stored, append.non2xx))
    }

    /// Where the time of one 2,688-id upload goes, without HTTP: JSON decoding, validation,
    /// and the store's part (into an empty database: the known-id checks and the transaction).
    private func appendBreakdown(configuration: ServerConfiguration, now: UnixSeconds, logger: Logger) async throws {
        let store = try ServerStore.open(path: directory + "/breakdown.db", publishedDirectory: PublishedDirectory(path: directory + "/breakdown-public"))
        var generator = SplitMix(state: 99)
        let rounds = 50
        let bodies = (0..<rounds).map { _ in
            try! JSONEncoder().encode(SubmittedHistory(ids: (0..<2_688).map { position in
                let until = now - UnixSeconds(position) * 900
                return SubmittedEntry(id: UserID(rawValue: generator.next()).hex, validFrom: until - 900, validUntil: until)
            }))
        }
        var foundationDecode = Duration.zero, decode = Duration.zero, validate = Duration.zero, insert = Duration.zero
        let rules = HistoryRules(configuration)
        for body in bodies {
            // Foundation's decoder, which the server used before, for comparison only.
            var start = ContinuousClock.now
            _ = try JSONDecoder().decode(SubmittedHistory.self, from: body)
            foundationDecode += ContinuousClock.now - start
            start = ContinuousClock.now
            let history = try SubmittedHistory(json: body)
            decode += ContinuousClock.now - start
            start = ContinuousClock.now
            let entries = try rules.validate(history, now: now)
            validate += ContinuousClock.now - start
            start = ContinuousClock.now
            _ = try await store.appendHistory(entries, credential: .authority(name: "Bench"), idempotencyKey: nil, now: now)
            insert += ContinuousClock.now - start
        }
        func perUpload(_ total: Duration) -> Double { total.seconds * 1_000 / Double(rounds) }
        say(String(format: "append breakdown per 2,688-id upload: JSON decode %.2f ms (Foundation's JSONDecoder: %.2f ms), validation %.2f ms, store (known-id checks and SQLite) %.2f ms",
                   perUpload(decode), perUpload(foundationDecode), perUpload(validate), perUpload(insert)))
    }

    private func appendDirectly(_ count: Int, to store: ServerStore, now: UnixSeconds, seed: UInt64) async throws {
        var generator = SplitMix(state: seed)
        var remaining = count
        while remaining > 0 {
            let size = min(2_688, remaining)
            let entries = (0..<size).map { position in
                let until = now - UnixSeconds(position) * 900
                return PositiveListEntry(id: UserID(rawValue: generator.next()), validFrom: until - 900, validUntil: until)
            }
            _ = try await store.appendHistory(entries, credential: .authority(name: "Bench"), idempotencyKey: nil, now: now)
            remaining -= size
        }
    }

    static func historyScript(now: UnixSeconds) -> String {
        """
        local counter = 0
        function setup(thread)
          counter = counter + 1
          thread:set("seed", counter)
        end
        function init(args)
          math.randomseed(seed * 7919 + os.time())
        end
        wrk.method = "POST"
        function request()
          local parts = {}
          for i = 0, 2687 do
            local untilTime = \(now) - i * 900
            parts[#parts + 1] = string.format('{"id":"%08x%08x","validFrom":%d,"validUntil":%d}',
              math.random(0, 4294967295), math.random(0, 4294967295), untilTime - 900, untilTime)
          end
          return wrk.format(nil, nil, nil, '{"ids":[' .. table.concat(parts, ",") .. ']}')
        end
        """
    }

    struct WrkResult {
        var requestsPerSecond: Double
        var requests: Int
        var non2xx: Int
        var p99: String
    }

    func wrk(port: Int, path: String, connections: Int, script: String? = nil, headers: [String] = []) throws -> WrkResult {
        var arguments = ["-t2", "-c\(connections)", "-d\(seconds)s", "--latency"]
        for header in headers { arguments += ["-H", header] }
        if let script { arguments += ["-s", script] }
        arguments.append("http://127.0.0.1:\(port)\(path)")
        let output = try ProcessResult.run("/usr/bin/wrk", arguments).output
        func capture(_ pattern: String) -> String? {
            guard let regex = try? NSRegularExpression(pattern: pattern),
                  let match = regex.firstMatch(in: output, range: NSRange(output.startIndex..., in: output)),
                  let range = Range(match.range(at: 1), in: output)
            else { return nil }
            return String(output[range])
        }
        guard let rate = capture(#"Requests/sec:\s+([0-9.]+)"#).flatMap(Double.init),
              let requests = capture(#"(\d+) requests in"#).flatMap(Int.init)
        else { throw BenchmarkFailure("unexpected wrk output:\n\(output)") }
        return WrkResult(
            requestsPerSecond: rate, requests: requests,
            // wrk's "Non-2xx or 3xx" line counts responses with status 400 and above.
            non2xx: capture(#"Non-2xx or 3xx responses:\s+(\d+)"#).flatMap(Int.init) ?? 0,
            p99: capture(#"99%\s+([0-9.]+\w+)"#) ?? "?")
    }

    private func entityTag(port: Int, path: String) throws -> String {
        let output = try ProcessResult.run("/usr/bin/curl", ["-sI", "http://127.0.0.1:\(port)\(path)"]).output
        guard let line = output.split(separator: "\r\n").first(where: { $0.lowercased().hasPrefix("etag:") }) else {
            throw BenchmarkFailure("no ETag from port \(port):\n\(output)")
        }
        return line.dropFirst(5).trimmingCharacters(in: .whitespaces)
    }
}

struct BenchmarkFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

struct SplitMix {
    var state: UInt64
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var value = state
        value = (value ^ (value >> 30)) &* 0xBF58_476D_1CE4_E5B9
        value = (value ^ (value >> 27)) &* 0x94D0_49BB_1331_11EB
        return value ^ (value >> 31)
    }
}

extension Duration {
    var seconds: Double { Double(components.seconds) + Double(components.attoseconds) / 1e18 }
}
