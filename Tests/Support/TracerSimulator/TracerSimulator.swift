import ArgumentParser
import Foundation
import IDRotation
import Logging
import Synchronization
import TracerCore

/// Makes synthetic data through the node's real rotation and logging code. Nothing it writes
/// came from a radio; it exists for tests, benchmarks and the demo.
@main
struct TracerSimulator: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "tracer-simulator",
        abstract: "Synthetic encounter data for tests and demos (not a radio).",
        subcommands: [Seed.self, CrashWriter.self])
}

/// A clock the simulator moves by hand.
final class ManualClock: WallClock {
    private let time: Mutex<UnixSeconds>
    init(_ start: UnixSeconds) { time = Mutex(start) }
    func now() -> UnixSeconds { time.withLock { $0 } }
    func set(_ value: UnixSeconds) { time.withLock { $0 = value } }
    func sleep(until time: UnixSeconds) async throws { set(max(now(), time)) }
}

struct Seed: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Fill a database with made-up encounters over the past days.")

    @Option var db: String
    @Option(help: "How many past days to fill, ending now.") var days = 3
    @Option(help: "Distinct peer ids met per day.") var peersPerDay = 40
    @Option(help: "Rotation interval in seconds.") var interval: Int64 = 900
    @Option(help: "Seed for the random generator (same seed, same data).") var seed: UInt64 = 1

    func run() async throws {
        var random = SplitMix64(seed: seed)
        let store = try NodeStore.open(try StoreLocation.resolve(flag: db, environment: [:]))
        let now = SystemWallClock().now()
        let clock = ManualClock(now - Int64(days) * .secondsPerDay)
        let rotator = IDRotator(
            schedule: try RotationSchedule(intervalSeconds: interval), history: store, clock: clock, logger: quietLogger)
        var batch = SightingBatch()
        let windowsPerDay = max(1, Int(Int64.secondsPerDay / interval))
        while clock.now() + interval <= now {
            let own = try await rotator.currentID()
            // Each window meets a share of the day's peers, each for a random stretch of the window.
            let meetings = Int(Double(peersPerDay) / Double(windowsPerDay) + Double.random(in: 0..<1, using: &random))
            for _ in 0..<meetings {
                let peer = UserID.random(using: &random)
                let start = own.window.start + Int64.random(in: 0..<interval, using: &random)
                let length = Int64.random(in: 1...max(1, own.window.end - start), using: &random)
                let closeness = Int8.random(in: -90 ... -45, using: &random)
                var time = start
                var first = true
                while time < min(start + length, now) {
                    batch.add(Sighting(
                        peer: peer, ownWindowStart: own.window.start, time: time,
                        rssi: closeness + Int8.random(in: -4...4, using: &random), txPower: 0,
                        learnedBy: first ? .read : []))
                    first = false
                    time += 10
                }
            }
            clock.set(own.window.end)
        }
        try store.write(batch)
        let counts = try store.counts()
        print("seeded \(counts.ownIDs) own ids and \(counts.encounters) encounters (\(batch.sightingCount) sightings)")
    }
}

/// Writes sightings at a steady rate through `EncounterLog` and reports progress on stdout, until
/// killed. The crash-safety test kills it with SIGKILL at random moments.
struct CrashWriter: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Write sightings until killed, printing what was generated and committed.")

    @Option var db: String
    @Option(help: "Sightings generated per second.") var rate = 20_000
    @Option(help: "Distinct peers.") var peers = 500

    func run() async throws {
        let store = try NodeStore.open(try StoreLocation.resolve(flag: db, environment: [:]))
        let log = EncounterLog(store: store)
        let rotator = IDRotator(schedule: try RotationSchedule(intervalSeconds: 5), history: store, logger: quietLogger)
        let peerIDs = (0..<peers).map { _ in UserID.random() }
        let start = ContinuousClock.now
        var generated = 0
        var committedAtLastFlush = 0
        var lastFlush = start
        emit("started")
        while true {
            let own = try await rotator.currentID()
            // Generate what the rate calls for since the start, so the count is a function of time.
            let elapsed = ContinuousClock.now - start
            let due = Int(Double(rate) * (Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18))
            let now = SystemWallClock().now()
            while generated < due {
                await log.record(Sighting(
                    peer: peerIDs[generated % peerIDs.count], ownWindowStart: own.window.start, time: now,
                    rssi: Int8(-40 - generated % 50), learnedBy: []))
                generated += 1
            }
            // Printed before any flush, so the database never holds more than the last line says.
            emit("generated \(generated)")
            if ContinuousClock.now - lastFlush >= .seconds(1) {
                try await log.flush()
                committedAtLastFlush = generated
                lastFlush = ContinuousClock.now
                emit("committed \(committedAtLastFlush)")
            }
            try await Task.sleep(for: .milliseconds(20))
        }
    }
}

let quietLogger: Logger = {
    var logger = Logger(label: "tracer.simulator")
    logger.logLevel = .warning
    return logger
}()

/// Writes a line straight to the file descriptor: a killed process must not leave it in a buffer.
func emit(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}
