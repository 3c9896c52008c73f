import BLEHostTestSupport
import Foundation
import IDRotation
import Testing
import TestTiers
import TracerTestSupport
#if canImport(Glibc)
import Glibc
#endif

extension TracerNodeTests {
    /// Issue 38, at the process level: node A's database is on a small tmpfs that fills while it
    /// exchanges with node B. A must stop advertising when it cannot record its next id, say so in
    /// `tracer status` (first line, exit 1) and `tracer doctor`, and once space returns meet B
    /// again by itself, with nothing it recorded lost.
    @Suite(.tags(.endToEnd)) struct NodeDiskFull {
        typealias Node = StreamingProcess

        static let interval: Int64 = 10

        /// The encounters of a database by peer id: (last seen, sightings).
        static func encounters(_ database: String, home: String) throws -> [String: (lastSeen: Int64, sightings: Int)] {
            Dictionary(try NodeResilience.rows(database, home: home).map { ($0.peer, ($0.lastSeen, $0.sightings)) }) {
                (max($0.lastSeen, $1.lastSeen), $0.sightings + $1.sightings)
            }
        }

        /// The latest sighting each of two databases logged (0 before any).
        static func latestSightings(_ dbA: String, _ dbB: String, home: String) throws -> (a: Int64, b: Int64) {
            (try encounters(dbA, home: home).values.map(\.lastSeen).max() ?? 0,
             try encounters(dbB, home: home).values.map(\.lastSeen).max() ?? 0)
        }

        /// `tracer status` of `database`, asked again every 200 ms until `done` holds of its answer
        /// or `timeout` passes; the last answer.
        static func status(_ database: String, home: String, within timeout: Duration, until done: (ProcessResult) -> Bool) throws -> ProcessResult {
            var status = try Products.tracer(["status", "--db", database], home: home)
            _ = eventuallyBlocking(timeout: timeout, every: .milliseconds(200)) {
                status = (try? Products.tracer(["status", "--db", database], home: home)) ?? status
                return done(status)
            }
            return status
        }

        /// Waits (up to `timeout`) until each of two databases logged a sighting after `second`:
        /// whether they did, and the latest sightings then.
        static func meetAgain(_ dbA: String, _ dbB: String, after second: Int64, home: String, within timeout: Duration)
            throws -> (met: Bool, seen: (a: Int64, b: Int64))
        {
            var seen = (a: Int64(0), b: Int64(0))
            let met = try eventuallyBlocking(timeout: timeout, every: .milliseconds(100)) {
                seen = try latestSightings(dbA, dbB, home: home)
                return seen.a > second && seen.b > second
            }
            return (met, seen)
        }

        /// The peers of `before` of which `after` holds fewer sightings: encounters lost.
        static func lost(from before: [String: (lastSeen: Int64, sightings: Int)], in after: [String: (lastSeen: Int64, sightings: Int)])
            -> [String: (lastSeen: Int64, sightings: Int)]
        {
            before.filter { peer, old in (after[peer]?.sightings ?? 0) < old.sightings }
        }

        /// Waits (up to 40 s) until it is 2-4 s into a window of `interval` in which both databases
        /// logged a sighting, so that a fault begun then spans the window's end with the nodes
        /// already met; that window's start, or nil.
        static func windowMetEarlyIn(_ dbA: String, _ dbB: String, interval: Int64, home: String) throws -> Int64? {
            var windowStart: Int64 = 0
            let met = try eventuallyBlocking(timeout: .seconds(40), every: .milliseconds(200)) {
                let now = Int64(NodeResilience.now())
                windowStart = now - now % interval
                guard now - windowStart >= 2, now - windowStart <= 4 else { return false }
                let seen = try latestSightings(dbA, dbB, home: home)
                return seen.a >= windowStart && seen.b >= windowStart
            }
            return met ? windowStart : nil
        }

        @Test(.timeLimit(.minutes(2)))
        func aNodeWhoseDiskFillsGoesDarkSaysSoAndComesBackByItself() async throws {
            let scratch = try Scratch()
            defer { scratch.remove() }
            let disk = try Tmpfs(at: scratch.file("a-disk"), megabytes: 2)
            defer { if let problem = disk.unmount() { Issue.record(Comment(rawValue: problem)) } }
            let radio = try await VirtualRadio.launch(.bumble, controllers: 2)
            defer { radio.stop() }
            let tracer = try Products.path(of: "tracer")
            let dbA = disk.path + "/a.db", dbB = scratch.file("b.db")
            let extra = ["--rotation-interval", "\(Self.interval)"]
            let a = try Node.readingLog(tracer, NodeResilience.runArguments(dbA, port: radio.ports[0], extra: extra), home: scratch.path)
            defer { a.ensureStopped() }
            let b = try Node.readingLog(tracer, NodeResilience.runArguments(dbB, port: radio.ports[1], extra: extra), home: scratch.path)
            defer { b.ensureStopped() }
            let home = scratch.path

            // The fill begins 2 s into a window in which the two have met, so that A hears B for
            // several seconds with its disk full before its window ends and the next id is due.
            let windowStart = try #require(try Self.windowMetEarlyIn(dbA, dbB, interval: Self.interval, home: home), "A and B did not meet early in a window within 40 s; A: \(a.lines.suffix(5)); B: \(b.lines.suffix(5))")
            let before = try Self.encounters(dbA, home: home)

            let filled = try disk.fill("fill")
            let fillSecond = Int64(NodeResilience.now())
            print("disk full: \(filled) bytes of filler at \(fillSecond), window \(windowStart)")

            // The window ends; A cannot record the next id and goes off the air.
            let dark = eventuallyBlocking(timeout: .seconds(Double(Self.interval) + 10), every: .milliseconds(100)) {
                a.entry(message: "not advertising: the next id could not be recorded; retrying") != nil
            }
            try #require(dark, "A did not report an id it could not record: \(a.lines.suffix(8))")
            let darkAt = NodeResilience.now()
            #expect(a.entry(message: "not advertising: the next id could not be recorded; retrying")?["level"] == "error")

            // `tracer status` leads with it and exits 1; `tracer doctor` names the fix.
            let status = try Self.status(dbA, home: home, within: .seconds(5)) { $0.stdout.contains("not advertising since") }
            print("tracer status with the disk full (exit \(status.exitCode)):\n\(status.stdout)\(status.stderr)")
            #expect(status.exitCode == 1 && !status.signaled, "\(status)")
            let firstLine = status.stdout.split(separator: "\n").first.map(String.init) ?? ""
            #expect(firstLine.hasPrefix("Node:           degraded — not advertising since "), "\(status)")
            #expect(firstLine.contains("the disk holding \(dbA) is full; free some space. The node advertises again once it can record its next id."), "\(status)")
            let doctor = try Products.tracer(["doctor", "--db", dbA, "--transport", "tcp:127.0.0.1:\(radio.ports[0])"], home: home)
            #expect(doctor.exitCode == 1, "\(doctor)")
            #expect(doctor.stdout.contains("[FAIL] ids: the running node (pid \(a.pid)) cannot record its next id"), "\(doctor)")
            #expect(doctor.stdout.contains("fix: The disk holding \(dbA) is full; free some space."), "\(doctor)")
            #expect(a.isRunning, "A exited with its disk full: \(a.lines.suffix(6))")

            // A few seconds dark (TRACER_DISK_FULL_SECONDS more, for BENCHMARKS.md's figure), then space returns.
            try await Task.sleep(for: .seconds(Double(ProcessInfo.processInfo.environment["TRACER_DISK_FULL_SECONDS"] ?? "") ?? 2))
            disk.remove("fill")
            let freedSecond = Int64(NodeResilience.now())
            let freed = ContinuousClock.now
            let (metAgain, seen) = try Self.meetAgain(dbA, dbB, after: freedSecond, home: home, within: .seconds(30))
            let recovery = ContinuousClock.now - freed
            try #require(metAgain, "A and B did not meet within 30 s of the space returning (A saw B at \(seen.a), B saw A at \(seen.b), freed at \(freedSecond)); A: \(a.lines.suffix(8))")
            // The status follows: the session's start writes it; the encounter log's recovery
            // (reported on its next flush) may come a little later.
            let healthy = try Self.status(dbA, home: home, within: .seconds(10)) { $0.exitCode == 0 }
            #expect(healthy.exitCode == 0 && healthy.stdout.hasPrefix("Node:           running since"), "\(healthy)")

            a.stopCleanly("node A")
            b.stopCleanly("node B")
            let storeA = try Check.openStore(dbA)
            #expect(try storeA.integrityCheck() == ["ok"])
            let after = try Self.encounters(dbA, home: home)
            // Nothing A had logged before the fill is lost, and the sightings A held in memory
            // while its disk was full (after the fill, before it went dark) were written.
            let lost = Self.lost(from: before, in: after)
            #expect(lost.isEmpty, "encounters lost: \(lost)")
            let heldInMemory = after.values.filter { $0.lastSeen >= fillSecond && $0.lastSeen < freedSecond }
            #expect(!heldInMemory.isEmpty, "no sighting from the time the disk was full was written: \(after)")
            #expect(a.entry(message: "cannot write encounters; keeping them in memory") != nil && a.entry(message: "encounter log writes again") != nil,
                    "A's encounter log did not fail and recover: \(a.lines.filter { $0.contains("encounter") }.suffix(4))")
            // Every own id A recorded is one it could record: one per window, none from the dark time.
            let idsOfA = try storeA.ownIDs()
            #expect(!idsOfA.contains { $0.window.start > Int64(darkAt) + 1 && $0.window.start + Self.interval <= freedSecond },
                    "A recorded an id for a window it was dark in: \(idsOfA.map(\.window))")
            #expect(Set(try Check.openStore(dbB).encounters().map(\.peer)).isSubset(of: Set(idsOfA.map(\.id))), "B logged an id A did not record")
            print(String(format: "disk full: dark %.1f s after the fill, for %.1f s; space freed → met again after %.2f s; encounters lost: %d; held in memory and written: %d rows",
                         darkAt - Double(fillSecond), Double(freedSecond) - darkAt, Double(recovery.components.seconds) + Double(recovery.components.attoseconds) / 1e18,
                         lost.count, heldInMemory.count))
            // The figure belongs in BENCHMARKS.md; the bound here only catches a node that waits
            // far longer than its retries (every 5 s) explain, without failing a loaded CI machine.
            #expect(recovery < .seconds(25), "recovery took \(recovery)")
        }

        /// Issue 38 review: a reason that no longer holds must not hide the real one. A node whose
        /// controller is gone (nothing listens at its transport) takes an id before each attempt:
        /// with its disk full that fails, and status says so; once space returns, the next attempt
        /// records the id and fails at the transport, and status no longer says the disk is full.
        /// An older node's small unpadded status file is replaced by a padded one at the start.
        @Test(.timeLimit(.minutes(2)))
        func aStoreThatWorksAgainNoLongerHidesTheControllersAbsence() throws {
            let scratch = try Scratch()
            defer { scratch.remove() }
            let disk = try Tmpfs(at: scratch.file("a-disk"), megabytes: 2)
            defer { if let problem = disk.unmount() { Issue.record(Comment(rawValue: problem)) } }
            let tracer = try Products.path(of: "tracer")
            let home = scratch.path
            let db = disk.path + "/a.db", statusPath = disk.path + "/a.db-status.json"
            try Data(#"{"pid":1,"startedAt":1,"updatedAt":1,"transport":"hci0","state":"stopped"}"#.utf8)
                .write(to: URL(fileURLWithPath: statusPath))
            let port = UInt16(try LoopbackPort.free())
            let a = try Node.readingLog(tracer, NodeResilience.runArguments(db, port: port, extra: ["--rotation-interval", "5", "--rotation-jitter", "0"]), home: home)
            defer { a.ensureStopped() }
            func status() -> ProcessResult? { try? Products.tracer(["status", "--db", db], home: home) }

            let reconnecting = eventuallyBlocking(timeout: .seconds(20), every: .milliseconds(100)) {
                status()?.stdout.hasPrefix("Node:           reconnecting to tcp:127.0.0.1:\(port)") == true
            }
            try #require(reconnecting, "the node did not say it reconnects: \(String(describing: status())); \(a.lines.suffix(6))")
            let size = (try FileManager.default.attributesOfItem(atPath: statusPath)[.size] as? NSNumber)?.intValue
            #expect(size == 4096, "the status file is not padded to a block: \(String(describing: size)) bytes")

            _ = try disk.fill("fill")
            var full = status()
            let dark = eventuallyBlocking(timeout: .seconds(40), every: .milliseconds(200)) {
                full = status()
                return full?.stdout.contains("is full; free some space") == true
            }
            try #require(dark, "status never said the disk was full: \(String(describing: full)); \(a.lines.suffix(6))")
            #expect(full?.exitCode == 1 && full?.stdout.hasPrefix("Node:           degraded — not advertising since") == true, "\(String(describing: full))")

            disk.remove("fill")
            var after = status()
            let cleared = eventuallyBlocking(timeout: .seconds(40), every: .milliseconds(200)) {
                after = status()
                return after.map { !$0.stdout.contains("is full") && $0.stdout.hasPrefix("Node:           reconnecting to") } == true
            }
            #expect(cleared, "status still leads with a disk that has room again: \(String(describing: after)); \(a.lines.suffix(6))")
            let doctor = try Products.tracer(["doctor", "--db", db, "--transport", "tcp:127.0.0.1:\(port)"], home: home)
            #expect(!doctor.stdout.contains("[FAIL] ids"), "\(doctor)")
            // The outage was logged as an error once; its repeats at debug (not shown at info).
            let outage = a.entries.filter { $0["message"] == "not advertising: the next id could not be recorded; retrying" }
            #expect(outage.count == 1 && outage.first?["level"] == "error", "\(outage)")
            a.stopCleanly("node A")
        }

        /// A status file that cannot be written at all (here a directory stands in its place) is
        /// logged at the start; the node runs on.
        @Test(.timeLimit(.minutes(1)))
        func aStatusFileThatCannotBeWrittenIsLoggedAtTheStart() throws {
            let scratch = try Scratch()
            defer { scratch.remove() }
            let tracer = try Products.path(of: "tracer")
            let db = scratch.file("a.db")
            try FileManager.default.createDirectory(atPath: db + "-status.json", withIntermediateDirectories: true)
            let port = UInt16(try LoopbackPort.free())
            let a = try Node.readingLog(tracer, NodeResilience.runArguments(db, port: port), home: scratch.path)
            defer { a.ensureStopped() }
            let logged = eventuallyBlocking(timeout: .seconds(20), every: .milliseconds(100)) {
                a.entries.contains { ($0["message"] ?? "").hasPrefix("cannot write the status file") && $0["level"] == "error" }
            }
            #expect(logged, "\(a.lines.suffix(6))")
            #expect(a.isRunning)
            a.stopCleanly("node A")
        }
    }
}
