import Foundation
import PositiveListFormat
import PositiveListServer
import PostgresServerStore
import ServerStorage
import SQLiteServerStore
import TracerCore
import TracerTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// Appends per second into the server's store, SQLite against PostgreSQL with one and with two
/// instances (two stores, each with its own pool, as two `serve` processes would have), on this
/// machine. Straight into the store, without HTTP or JSON, so the figures are the stores' own:
/// each append is one 2,688-id history (28 days of 15-minute ids) from an authority, with
/// `appendersPerInstance` appending at once per instance. PostgreSQL is a throwaway server
/// started by the benchmark (PostgresProcess: fsync off, as in the tests; see BENCHMARKS.md).
///
/// Where the time goes: this process's CPU time (id sorting, parameter encoding, libpq; for
/// SQLite all of the store's work) against the PostgreSQL processes' CPU time, from /proc.
struct StoreBackendBenchmark {
    let directory: String
    let seconds: Int
    let appendersPerInstance = 4
    let idsPerHistory = 2_688

    func run() async throws {
        say("# Store backends: appends/s, SQLite against PostgreSQL (\(Date()))")
        say("\(ProcessInfo.processInfo.activeProcessorCount) cores; \(seconds) s per case; \(appendersPerInstance) appenders per instance; \(idsPerHistory)-id histories")
        let now = SystemWallClock().now()

        let sqlitePaths = ServerPaths(dataDirectory: directory + "/sqlite")
        try FileManager.default.createDirectory(atPath: sqlitePaths.dataDirectory, withIntermediateDirectories: true)
        let sqlite = try ServerStore.open(path: sqlitePaths.database, publishedDirectory: sqlitePaths.published)
        let baseline = try await measure("SQLite, 1 instance", stores: [sqlite], now: now)

        let postgres = try PostgresProcess(directory: directory + "/postgres")
        defer { postgres.stop() }
        let settings = { (name: String) in PostgresSettings(connection: try postgres.createDatabase(name), password: nil) }
        let oneSettings = try settings("one")
        let one = try await PostgresServerStore.open(settings: oneSettings, publishedDirectory: sqlitePaths.published, poolSize: appendersPerInstance)
        let single = try await measure("PostgreSQL, 1 instance", stores: [one], now: now)
        let twoSettings = try settings("two")
        let first = try await PostgresServerStore.open(settings: twoSettings, publishedDirectory: sqlitePaths.published, poolSize: appendersPerInstance)
        let second = try await PostgresServerStore.open(settings: twoSettings, publishedDirectory: sqlitePaths.published, poolSize: appendersPerInstance)
        let double = try await measure("PostgreSQL, 2 instances", stores: [first, second], now: now)

        say(String(format: "ratios: PostgreSQL 1 instance / SQLite = %.2f; PostgreSQL 2 instances / SQLite = %.2f; 2 instances / 1 instance = %.2f",
                   single / baseline, double / baseline, double / single))
    }

    /// Appends from every store at once for `seconds`; returns appends per second.
    private func measure(_ label: String, stores: [any SubmissionStore], now: UnixSeconds) async throws -> Double {
        let clientBefore = processCPUSeconds()
        let serverBefore = Self.postgresCPUSeconds()
        let start = ContinuousClock.now
        let deadline = start + .seconds(seconds)
        let idsPerHistory = self.idsPerHistory
        let (appends, latencySeconds) = try await withThrowingTaskGroup(of: (Int, Double).self) { group in
            for (instance, store) in stores.enumerated() {
                for appender in 0..<appendersPerInstance {
                    group.addTask {
                        var generator = SplitMix(state: UInt64(1_000 * instance + appender + 1) &* 0x9E37_79B9)
                        var count = 0
                        var latency = 0.0
                        while ContinuousClock.now < deadline {
                            let entries = (0..<idsPerHistory).map { position in
                                let until = now - UnixSeconds(position) * 900
                                return PositiveListEntry(id: UserID(rawValue: generator.next()), validFrom: until - 900, validUntil: until)
                            }
                            let began = ContinuousClock.now
                            let outcome = try await store.appendHistory(entries, credential: .authority(name: "Bench"), idempotencyKey: nil, now: now)
                            guard case .stored(let receipt) = outcome, receipt.stored == idsPerHistory else {
                                throw BenchmarkFailure("append not stored whole: \(outcome)")
                            }
                            latency += (ContinuousClock.now - began).seconds
                            count += 1
                        }
                        return (count, latency)
                    }
                }
            }
            return try await group.reduce(into: (0, 0.0)) { $0.0 += $1.0; $0.1 += $1.1 }
        }
        let elapsed = (ContinuousClock.now - start).seconds
        let rate = Double(appends) / elapsed
        let client = processCPUSeconds() - clientBefore
        let server = Self.postgresCPUSeconds() - serverBefore
        say(String(format: "%@: %.1f appends/s = %.0f ids/s (%d appends in %.1f s), mean append %.1f ms; CPU: this process %.1f s, PostgreSQL %.1f s (%.1f ms + %.1f ms per append)",
                   label, rate, rate * Double(idsPerHistory), appends, elapsed,
                   latencySeconds * 1_000 / Double(max(appends, 1)),
                   client, server, client * 1_000 / Double(max(appends, 1)), server * 1_000 / Double(max(appends, 1))))
        return rate
    }

    /// The CPU time of every process named `postgres` on the machine (only the benchmark's own
    /// server should be running).
    private static func postgresCPUSeconds() -> Double {
        let ticks = Double(sysconf(Int32(_SC_CLK_TCK)))
        var total = 0.0
        for name in (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? [] where Int(name) != nil {
            guard let comm = try? String(contentsOfFile: "/proc/\(name)/comm", encoding: .utf8), comm.hasPrefix("postgres"),
                  let stat = try? String(contentsOfFile: "/proc/\(name)/stat", encoding: .utf8),
                  let close = stat.lastIndex(of: ")")
            else { continue }
            // Fields after the command's closing parenthesis: state is field 3; utime and stime 14 and 15.
            let fields = stat[stat.index(after: close)...].split(separator: " ")
            guard fields.count > 13, let user = Double(fields[11]), let system = Double(fields[12]) else { continue }
            total += (user + system) / ticks
        }
        return total
    }
}
