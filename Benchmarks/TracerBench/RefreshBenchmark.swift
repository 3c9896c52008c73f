import Foundation
import IDRotation
import PositiveListFormat
import TracerCore
import TracerTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// Issue 29's figures: the time from an accepted upload to the exposed node's verdict, across
/// real processes (`tracer-server serve`, `tracer report`, `tracer run` on a Bumble controller
/// with its on-exposure command), over `runs` fresh worlds, with the node's revalidation
/// schedule divided by `scale` (300 s + 60 s jitter becomes 5 s + 1 s at 60); and what a node
/// spends per day while nothing changes (two conditional requests per revalidation, measured
/// on the wire by curl with the node's headers against the same `serve`).
struct RefreshBenchmark {
    let repository: URL
    let directory: String
    let runs: Int
    let scale: Int64
    static let refreshInterval: Int64 = 300
    static let refreshJitter: Int64 = 60

    private func say(_ text: String) { FileHandle.standardOutput.write(Data((text + "\n").utf8)) }

    private var binaries: URL { URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent() }

    func run() async throws {
        let interval = Self.refreshInterval / scale, jitter = Self.refreshJitter / scale
        say("# Upload to verdict (\(Date()))")
        say("\(runs) runs; node revalidation every \(interval) s + up to \(jitter) s (the defaults \(Self.refreshInterval) s + \(Self.refreshJitter) s divided by \(scale)); full checks hourly")
        var total: [Double] = []
        var published: [Double] = []
        for number in 0..<runs {
            let (latency, publication) = try runOnce(number, interval: interval, jitter: jitter)
            total.append(latency)
            published.append(publication)
            say(String(format: "run %2d: published %.2f s, verdict %.2f s after the upload", number + 1, publication, latency))
        }
        let waits = zip(total, published).map { $0 - $1 }
        say(String(format: "upload to published checkpoint: p50 %.2f s, p95 %.2f s", Self.percentile(published, 0.5), Self.percentile(published, 0.95)))
        say(String(format: "upload to verdict, measured: p50 %.2f s, p95 %.2f s", Self.percentile(total, 0.5), Self.percentile(total, 0.95)))
        // The wait for the next revalidation (and the check after it) scales with the schedule;
        // the publication does not. The check's own second or less is scaled too: an upper bound.
        let scaled = zip(published, waits).map { $0 + $1 * Double(scale) }
        say(String(
            format: "upload to verdict at the defaults (publication + wait x %d): p50 %.0f s, p95 %.0f s",
            scale, Self.percentile(scaled, 0.5), Self.percentile(scaled, 0.95)))
        try measureIdleTraffic()
    }

    static func percentile(_ values: [Double], _ fraction: Double) -> Double {
        let sorted = values.sorted()
        guard !sorted.isEmpty else { return .nan }
        // Nearest rank.
        let rank = Int((fraction * Double(sorted.count)).rounded(.up))
        return sorted[max(0, min(sorted.count - 1, rank - 1))]
    }

    // MARK: One world

    final class Server {
        let data: String
        let publicKey: String
        let port: Int
        let process: Process
        static let token = "bench-authority-token-0123456789"

        init(_ data: String, binary: String) throws {
            self.data = data
            try FileManager.default.createDirectory(atPath: data, withIntermediateDirectories: true)
            try #"{"authorities": [{"name": "Bench Authority", "token": "\#(Self.token)"}]}"#
                .write(toFile: data + "/config.json", atomically: true, encoding: .utf8)
            publicKey = try RefreshBenchmark.output(binary, ["keygen", "--data-dir", data]).trimmingCharacters(in: .whitespacesAndNewlines)
            port = try LoopbackPort.free()
            process = Process()
            process.executableURL = URL(fileURLWithPath: binary)
            process.arguments = ["serve", "--data-dir", data, "--bind", "127.0.0.1:\(port)"]
            process.standardOutput = FileHandle(forWritingAtPath: "/dev/null")
            process.standardError = FileHandle(forWritingAtPath: "/dev/null")
            try process.run()
            let deadline = ContinuousClock.now + .seconds(20)
            while !(LoopbackPort.isListening(port) && FileManager.default.fileExists(atPath: checkpointPath)) {
                guard process.isRunning, ContinuousClock.now < deadline else { throw BenchmarkError("tracer-server serve did not start") }
                usleep(20_000)
            }
        }

        var url: String { "http://127.0.0.1:\(port)" }
        /// The list log's checkpoint, replaced by each publication that appends.
        var checkpointPath: String { data + "/public/log/checkpoint" }

        func stop() {
            process.terminate()
            process.waitUntilExit()
        }
    }

    /// A Bumble virtual controller (Tests/Support/bumble/virtual_link.py), for `tracer run`.
    final class Controller {
        let process: Process
        let input = Pipe()
        let port: UInt16

        init(repository: URL) throws {
            let python = ProcessInfo.processInfo.environment["TRACER_BUMBLE_PYTHON"]
                ?? repository.appendingPathComponent(".venv-bumble/bin/python").path
            process = Process()
            process.executableURL = URL(fileURLWithPath: python)
            process.arguments = [repository.appendingPathComponent("Tests/Support/bumble/virtual_link.py").path, "1"]
            let output = Pipe()
            process.standardInput = input
            process.standardOutput = output
            process.standardError = FileHandle(forWritingAtPath: "/dev/null")
            try process.run()
            var line: [UInt8] = []
            while let byte = try output.fileHandleForReading.read(upToCount: 1)?.first, byte != UInt8(ascii: "\n") { line.append(byte) }
            let words = String(decoding: line, as: UTF8.self).split(separator: " ")
            guard words.first == "READY", let port = words.dropFirst().first.flatMap({ UInt16($0) }) else {
                throw BenchmarkError("the Bumble controller did not start: \(String(decoding: line, as: UTF8.self))")
            }
            self.port = port
        }

        func stop() {
            try? input.fileHandleForWriting.close()
            process.waitUntilExit()
        }
    }

    /// One fresh world: returns seconds from the start of the upload to the published checkpoint and
    /// to the on-exposure command's time stamp.
    private func runOnce(_ number: Int, interval: Int64, jitter: Int64) throws -> (Double, Double) {
        let world = directory + "/run\(number)"
        let tracer = binaries.appendingPathComponent("tracer").path
        let server = try Server(world + "/server", binary: binaries.appendingPathComponent("tracer-server").path)
        defer { server.stop() }
        let now = UnixSeconds(Date().timeIntervalSince1970)
        let day = now - now % 86_400 - 86_400
        // The diagnosed person's hourly ids since yesterday, all past their validity (and the
        // server's 300 s allowance); the node met the one of 10:00 for 20 minutes, close.
        let reporterIDs = stride(from: day, through: now - 3_600 - 300, by: 3_600).map {
            OwnID(id: UserID.random(), window: IDWindow(start: $0, end: $0 + 3_600))
        }
        let reporter = try NodeStore.open(StoreLocation(path: world + "/a.db", source: .flag, ownsDirectory: false))
        for id in reporterIDs { try reporter.recordOwnID(id) }
        let met = reporterIDs.first { $0.window.contains(day + 36_000) }!.id
        let exposed = try NodeStore.open(StoreLocation(path: world + "/b.db", source: .flag, ownsDirectory: false))
        var sightings = SightingBatch()
        for (time, rssi) in zip([day + 36_300, day + 36_900, day + 37_440], [-48, -50, -52] as [Int8]) {
            sightings.add(Sighting(peer: met, ownWindowStart: day + 36_000, time: time, rssi: rssi, txPower: nil, learnedBy: .read))
        }
        try exposed.write(sightings)

        let controller = try Controller(repository: repository)
        defer { controller.stop() }
        let warned = world + "/warned"
        let log = world + "/b.log"
        FileManager.default.createFile(atPath: log, contents: nil)
        let node = Process()
        node.executableURL = URL(fileURLWithPath: tracer)
        node.arguments = [
            "run", "--db", world + "/b.db", "--transport", "tcp:127.0.0.1:\(controller.port)",
            "--server", server.url, "--server-key", server.publicKey, "--cache-dir", world + "/b-cache",
            "--check-interval", "3600", "--check-jitter", "0", "--refresh-interval", "\(interval)", "--refresh-jitter", "\(jitter)",
            "--on-exposure", "date +%s.%N > '\(warned)'", "--log-format", "json",
        ]
        var environment = ProcessInfo.processInfo.environment
        environment["HOME"] = world
        environment["XDG_CONFIG_HOME"] = world + "/xdg-config"
        node.environment = environment
        node.standardOutput = FileHandle(forWritingAtPath: "/dev/null")
        node.standardError = FileHandle(forWritingAtPath: log)
        try node.run()
        defer {
            node.terminate()
            node.waitUntilExit()
        }
        // The first full check (at start) finds nothing: the person has not reported yet.
        let started = ContinuousClock.now
        while !((try? String(contentsOfFile: log, encoding: .utf8))?.contains("exposure check done") ?? false) {
            guard ContinuousClock.now - started < .seconds(30), node.isRunning else { throw BenchmarkError("the node made no first check") }
            usleep(20_000)
        }
        // A random moment in the node's revalidation cycle, as a real upload would come.
        usleep(UInt32.random(in: 0...UInt32(interval * 1_000_000)))

        let code = try Self.json(try Self.output("/usr/bin/curl", [
            "-sS", "--fail", "-X", "POST", "-H", "Authorization: Bearer \(Server.token)", server.url + "/v1/codes",
        ]))["code"] as? String ?? ""
        let checkpointBefore = try FileManager.default.attributesOfItem(atPath: server.checkpointPath)[.modificationDate] as? Date
        let uploadStart = Date().timeIntervalSince1970
        _ = try Self.output(tracer, ["report", "--db", world + "/a.db", "--server", server.url, "--code", code, "--yes"], environment: environment)
        var publishedAt: Double?
        let deadline = Date().timeIntervalSince1970 + Double(interval + jitter) + 30
        while !FileManager.default.fileExists(atPath: warned) || (try? String(contentsOfFile: warned, encoding: .utf8))?.hasSuffix("\n") != true {
            if publishedAt == nil,
               let modified = try? FileManager.default.attributesOfItem(atPath: server.checkpointPath)[.modificationDate] as? Date,
               modified != checkpointBefore
            {
                publishedAt = modified.timeIntervalSince1970
            }
            guard Date().timeIntervalSince1970 < deadline else { throw BenchmarkError("no verdict within \(interval + jitter + 30) s (run \(number))") }
            usleep(5_000)
        }
        let warnedAt = Double(try String(contentsOfFile: warned, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)) ?? .nan
        if publishedAt == nil, let modified = try FileManager.default.attributesOfItem(atPath: server.checkpointPath)[.modificationDate] as? Date {
            publishedAt = modified.timeIntervalSince1970
        }
        return (warnedAt - uploadStart, (publishedAt ?? .nan) - uploadStart)
    }

    /// The stdout of a process that must exit 0.
    static func output(_ executable: String, _ arguments: [String], environment: [String: String]? = nil) throws -> String {
        let result = try ProcessResult.run(executable, arguments, environment: environment)
        guard result.exitCode == 0 else { throw BenchmarkError("\(executable) \(arguments.first ?? "") exited \(result.exitCode)") }
        return result.stdout
    }

    static func json(_ text: String) throws -> [String: Any] {
        guard let object = try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any] else { throw BenchmarkError("not JSON: \(text)") }
        return object
    }

    // MARK: Idle traffic

    /// Bytes of the conditional request of one revalidation (the list log's checkpoint) and its
    /// 304 answer, as curl counts them on the wire (HTTP/1.1 over TCP, no TLS), with the node's
    /// User-Agent. (The two conditional requests, id index and key index, a node made while it
    /// followed the signed index are retired with those files: BENCHMARKS.md keeps their figure.)
    private func measureIdleTraffic() throws {
        let server = try Server(directory + "/idle", binary: binaries.appendingPathComponent("tracer-server").path)
        defer { server.stop() }
        let log = try conditionalTraffic(server, paths: ["log/checkpoint"])
        // A revalidation confirms the held files: anything but 304 is not what a node meets while nothing changes.
        guard log.statuses.allSatisfy({ $0 == "304" }) else {
            throw BenchmarkError("the conditional requests were answered \(log.statuses.joined(separator: ", ")), not 304")
        }
        let meanInterval = Double(Self.refreshInterval) + Double(Self.refreshJitter) / 2
        let perDay = 86_400 / meanInterval
        say("# While nothing changes (answers \(log.statuses.joined(separator: ", ")))")
        say(String(format: "one revalidation: 1 request, %d bytes (request + 304 head, HTTP/1.1 without TLS)", log.bytes))
        say(String(format: "per node per day at %d s + up to %d s: %.0f revalidations, %.0f requests, %.1f kB", Self.refreshInterval, Self.refreshJitter, perDay, perDay, perDay * Double(log.bytes) / 1_000))
        say(String(format: "10 million nodes: %.0f requests/s at the CDN, %.1f GB/day", 10e6 * perDay / 86_400, 10e6 * perDay * Double(log.bytes) / 1e9))
    }

    /// One conditional request per path with the ETag the server gives it: the answers' statuses
    /// and the bytes of the requests and their heads.
    private func conditionalTraffic(_ server: Server, paths: [String]) throws -> (statuses: [String], bytes: Int) {
        var bytes = 0
        var statuses: [String] = []
        for path in paths {
            let etag = try Self.output("/usr/bin/curl", ["-sS", "-o", "/dev/null", "-D", "-", server.url + "/" + path])
                .split(separator: "\r\n").first { $0.lowercased().hasPrefix("etag:") }
                .map { String($0.dropFirst(5)).trimmingCharacters(in: .whitespaces) } ?? ""
            let measured = try Self.output("/usr/bin/curl", [
                "-sS", "-o", "/dev/null", "-A", "tracer/0.1", "-H", "If-None-Match: \(etag)",
                "-w", "%{http_code} %{size_request} %{size_header} %{size_download}", server.url + "/" + path,
            ]).split(separator: " ").map(String.init)
            statuses.append(measured[0])
            bytes += measured.dropFirst().compactMap { Int($0) }.reduce(0, +)
        }
        return (statuses, bytes)
    }
}
