import Foundation
import SQLiteServerStore
import Synchronization
import Logging
import Matching
import PositiveListFormat
import PositiveListServer
import TracerCore
import TracerTestSupport
import TransparencyLog

/// Issue 39's figures: every byte a node downloads to keep its list current from the log
/// (checkpoint and entry bundles), in fast time. (The signed indexes and batch files it was first
/// measured against are retired: the server no longer writes them, and BENCHMARKS.md keeps their
/// figures as history.) The real store and publisher write the log;
/// a simulated node revalidates every 300 s plus up to 60 s (the node's default), downloads what
/// the log makes it download (the log through `LogFollower`, from the held byte of a partial
/// bundle), and counts bodies plus HTTP response heads. The heads are measured once, at the end,
/// from Debian's nginx with the repository's configuration serving the published directory: one
/// request of each kind (200, 304, 206) by curl.
struct LogBytesBenchmark {
    let directory: String
    let repository: URL
    let uploadsPerDay: Int
    let spacings: [Int64]
    static let days = 28
    static let keysPerUpload = 14
    static let revalidation: Int64 = 300
    static let revalidationJitter: Int64 = 60

    /// The kinds of answer a node gets, whose heads differ in size.
    enum Answer: CaseIterable {
        case checkpoint200, checkpoint304, bundle200, bundle206
    }

    /// What a node downloaded over the counted days, and how late it learned of uploads.
    struct Tally {
        var bodies = 0
        var answers: [Answer: Int] = [:]
        var latencies: [Int64] = []

        mutating func count(_ answer: Answer, _ times: Int = 1) { answers[answer, default: 0] += times }
        var requests: Int { answers.values.reduce(0, +) }
        func bytes(heads: [Answer: Int]) -> Int { bodies + answers.reduce(0) { $0 + $1.value * heads[$1.key]! } }
    }

    func run() async throws {
        say("# List bytes with the log (\(Date()))")
        say("\(uploadsPerDay) key uploads a day of \(Self.keysPerUpload) days each, spread evenly; \(Self.days) days counted after one day of warm-up, then one idle day; node revalidation every \(Self.revalidation) s + up to \(Self.revalidationJitter) s")
        var lastPublished: String?
        var results: [(spacing: Int64, log: Tally, logIdle: Tally, wall: Double)] = []
        for spacing in spacings {
            let started = ContinuousClock.now
            let (log, logIdle, published) = try await simulate(spacing: spacing)
            results.append((spacing, log, logIdle, seconds(ContinuousClock.now - started)))
            if let lastPublished { try? FileManager.default.removeItem(atPath: (lastPublished as NSString).deletingLastPathComponent) }
            lastPublished = published
        }
        guard let lastPublished else { return }
        defer { try? FileManager.default.removeItem(atPath: (lastPublished as NSString).deletingLastPathComponent) }
        let heads = try await measureHeads(published: lastPublished)
        say("response heads measured from nginx (bytes): " + Answer.allCases.map { "\($0) \(heads[$0]!)" }.joined(separator: ", "))
        say("")
        say("| spacing | format | bytes per node per day | per diagnosed person-day | requests per day | idle day | upload to node p50 / p95 | simulated in |")
        say("|---|---|---|---|---|---|---|---|")
        let personDays = Double(uploadsPerDay * Self.keysPerUpload * Self.days)
        for result in results {
            for (name, tally, idle) in [("log (checkpoint and bundles)", result.log, result.logIdle)] {
                let total = Double(tally.bytes(heads: heads))
                let idleTotal = Double(idle.bytes(heads: heads))
                let latencies = tally.latencies.map(Double.init)
                say("| \(result.spacing) s | \(name) | \(format(total / Double(Self.days) / 1_000, 1)) kB | \(format(total / personDays, 1)) B | \(format(Double(tally.requests) / Double(Self.days), 0)) | \(format(idleTotal / 1_000, 1)) kB | "
                    + "\(format(RefreshBenchmark.percentile(latencies, 0.5) / 60, 1)) / \(format(RefreshBenchmark.percentile(latencies, 0.95) / 60, 1)) min | \(format(result.wall, 0)) s |")
            }
        }
        say("")
    }

        private func simulate(spacing: Int64) async throws -> (Tally, Tally, String) {
        let logger = Logger(label: "bench") { _ in SwiftLogNoOpLogHandler() }
        let paths = ServerPaths(dataDirectory: directory + "/log-bytes-\(UUID().uuidString)")
        try FileManager.default.createDirectory(atPath: paths.dataDirectory, withIntermediateDirectories: true)
        var configuration = ServerConfiguration(authorities: [AuthorityConfiguration(name: "Bench", token: "benchmark-authority-token-0123456789")])
        configuration.publishSpacingSeconds = spacing
        let store = try ServerStore.open(path: paths.database, publishedDirectory: paths.published)
        let signingKey = try SigningKeyFile.create(at: paths.signingKey)
        let start = UTCDay(containing: 1_800_000_000).start
        let clock = SteppedClock(start)
        let publisher = Publisher(
            store: store, directory: paths.published, signingKey: signingKey, retentionSeconds: configuration.retentionSeconds,
            indexRefreshSeconds: configuration.indexRefreshSeconds, keySettings: KeyPublicationSettings(configuration),
            idPublicationDelaySeconds: configuration.clockSkewSeconds, clock: clock, logger: logger, logOrigin: nil)
        let source = FollowedLogSource(origin: publisher.logIdentity.origin, logKey: publisher.logIdentity.verifierKey)
        let files = DiskLogFiles(root: paths.published.logPath)

        var log = Tally(), logIdle = Tally()
        var heldLog: FollowedLogState?
        var heldCheckpoint = Data()
        var generator = SplitMix64(seed: 39)
        let countedFrom = start + 86_400
        let uploadsEnd = countedFrom + Int64(Self.days) * 86_400
        let end = uploadsEnd + 86_400
        let uploadGap = 86_400 / Int64(uploadsPerDay)
        var nextUpload = start + uploadGap / 2
        var nextPublication = start
        var nextPoll = start + Int64(generator.next() % UInt64(Self.revalidation))
        // Uploads not yet seen by the node, by upload time, with the time their keys were published.
        var unseen: [(uploaded: UnixSeconds, published: UnixSeconds?)] = []
        var time = start
        while time < end {
            time = min(nextUpload < uploadsEnd ? nextUpload : .max, nextPublication, nextPoll)
            clock.set(time)
            if time == nextUpload && nextUpload < uploadsEnd {
                // Fourteen days of keys ending yesterday: due at once (today's key would wait for
                // the day's end; a person reporting from a test taken today uploads the days before).
                let today = UTCDay(containing: time).number
                let records = (1...Int64(Self.keysPerUpload)).map {
                    DailyKeyRecord(day: UTCDay(number: today - $0), intervalSeconds: 900, key: DailyKey.random())
                }
                _ = try await store.appendKeyHistory(records, credential: .authority(name: "Bench"), idempotencyKey: nil, now: time)
                if time >= countedFrom { unseen.append((time, nil)) }
                nextUpload += uploadGap
            }
            if time == nextPublication {
                let report = try await publisher.publish()
                if report.newKeyBatch != nil {
                    for index in unseen.indices where unseen[index].published == nil { unseen[index].published = time }
                }
                nextPublication += spacing
            }
            if time == nextPoll {
                let counted = time >= countedFrom && time < uploadsEnd
                let idle = time >= uploadsEnd
                if counted || idle {
                    // The log: one conditional request for the checkpoint; the new entries if it grew.
                    var logTally = idle ? logIdle : log
                    let checkpoint = try files.read("checkpoint")
                    if checkpoint == heldCheckpoint {
                        logTally.count(.checkpoint304)
                    } else {
                        logTally.count(.checkpoint200)
                        logTally.bodies += checkpoint.count
                        let before = files.fetched
                        let advance = try await LogFollower.advance(heldLog, source: source, fetcher: files)
                        heldLog = advance.state
                        heldCheckpoint = checkpoint
                        logTally.bodies += files.fetched.bytes - before.bytes
                        logTally.count(.bundle206, files.fetched.ranges - before.ranges)
                        logTally.count(.bundle200, files.fetched.wholes - before.wholes)
                    }
                    // The node learns of a published upload at this poll.
                    // Both formats learn of a published upload at the same poll.
                    let learned = unseen.filter { $0.published != nil }.map { time - $0.uploaded }
                    unseen.removeAll { $0.published != nil }
                    if counted { logTally.latencies += learned }
                    if idle { logIdle = logTally } else { log = logTally }
                } else {
                    // Warm-up: the node follows without counting.
                    if let advance = try? await LogFollower.advance(heldLog, source: source, fetcher: files) {
                        heldLog = advance.state
                        heldCheckpoint = try files.read("checkpoint")
                    }
                }
                nextPoll += Self.revalidation + Int64(generator.next() % UInt64(Self.revalidationJitter + 1))
            }
        }
        return (log, logIdle, paths.published.path)
    }

    /// One request of each kind against nginx serving `published`, by curl: the size of each
    /// response head.
    private func measureHeads(published: String) async throws -> [Answer: Int] {
        let prefix = directory + "/log-bytes-nginx-\(UUID().uuidString)"
        let nginx = try await NginxProcess(
            prefix: prefix, publishedDirectory: published, upstreamPort: 9, repositoryRoot: repository.path,
            workerProcesses: "1", captureErrors: true)
        defer { nginx.stop(); try? FileManager.default.removeItem(atPath: prefix) }
        let base = "http://127.0.0.1:\(nginx.port)/"
        func head(_ path: String, _ headers: [String] = []) throws -> Int {
            let arguments = ["-s", "-o", "/dev/null", "-w", "%{size_header}"] + headers.flatMap { ["-H", $0] } + [base + path]
            let output = try RefreshBenchmark.output("/usr/bin/curl", arguments)
            guard let size = Int(output.trimmingCharacters(in: .whitespacesAndNewlines)) else { throw HarnessFailure(description: "curl printed \(output)") }
            return size
        }
        func etag(_ path: String) throws -> String {
            let output = try RefreshBenchmark.output("/usr/bin/curl", ["-s", "-o", "/dev/null", "-D", "-", base + path])
            return output.split(separator: "\r\n").first { $0.lowercased().hasPrefix("etag:") }.map { String($0.dropFirst(5)).trimmingCharacters(in: .whitespaces) } ?? ""
        }
        let bundles = try FileManager.default.subpathsOfDirectory(atPath: published + "/log/tile/entries").filter {
            !((published + "/log/tile/entries/" + $0) as NSString).lastPathComponent.hasPrefix(".")
        }.filter { (try? FileManager.default.attributesOfItem(atPath: published + "/log/tile/entries/" + $0)[.type] as? FileAttributeType) == .typeRegular }
        let bundle = "log/tile/entries/" + (bundles.sorted().last ?? "000")
        return [
            .checkpoint200: try head("log/checkpoint"), .checkpoint304: try head("log/checkpoint", ["If-None-Match: \(try etag("log/checkpoint"))"]),
            .bundle200: try head(bundle), .bundle206: try head(bundle, ["Range: bytes=2-"]),
        ]
    }
}

/// The published log read from disk as a node would fetch it, counting what it takes.
final class DiskLogFiles: LogFileFetching {
    let root: String
    struct Fetched { var bytes = 0, ranges = 0, wholes = 0 }
    private let counts = Mutex(Fetched())
    var fetched: Fetched { counts.withLock { $0 } }

    init(root: String) { self.root = root }

    func read(_ path: String) throws -> Data { try Data(contentsOf: URL(fileURLWithPath: root + "/" + path)) }

    func checkpoint() async throws -> Data { try read("checkpoint") }

    func file(_ path: String, fromByte offset: Int) async throws -> Data {
        let bytes = try read(path)
        let served = bytes.count > offset ? bytes.subdata(in: offset..<bytes.count) : Data()
        counts.withLock { counts in
            counts.bytes += served.count
            if offset > 0 { counts.ranges += 1 } else { counts.wholes += 1 }
        }
        return served
    }
}
