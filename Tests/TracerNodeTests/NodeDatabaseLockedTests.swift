import BLEHostTestSupport
import Foundation
import IDRotation
import Testing
import TestTiers
import TracerTestSupport

extension TracerNodeTests {
    /// Issue 38, item 1 at the process level: another program holds node A's database locked
    /// (`BEGIN EXCLUSIVE`) across the end of A's id window while A exchanges with B. SQLite makes
    /// A's write of its next id wait up to its busy timeout (5 s) and then fail. A must take its
    /// ended id off the air at the window's end, not when the write gives up (before, B kept
    /// hearing it for those 5 s), say what holds it in `tracer status`, and meet B again by itself
    /// once the lock goes, with nothing it recorded lost.
    @Suite(.tags(.endToEnd)) struct NodeDatabaseLocked {
        typealias Node = StreamingProcess
        static let interval: Int64 = 10

        /// Holds `database` locked until the file `release` exists, for `seconds` at most, then
        /// commits; says "locked" (on stderr, which the harness reads) once it holds it.
        static let lockHolder = """
            import os, sqlite3, sys, time
            connection = sqlite3.connect(sys.argv[1], isolation_level=None, timeout=30)
            connection.execute("BEGIN EXCLUSIVE")
            print("locked", file=sys.stderr, flush=True)
            deadline = time.monotonic() + float(sys.argv[2])
            while not os.path.exists(sys.argv[3]) and time.monotonic() < deadline:
                time.sleep(0.05)
            connection.execute("COMMIT")
            print("released", file=sys.stderr, flush=True)
            """

        @Test(.timeLimit(.minutes(2)))
        func aNodeWhoseDatabaseIsLockedTakesItsEndedIDOffTheAirAndComesBackByItself() async throws {
            let python = try #require(RequiredTool.executableInPath("python3"), "python3 is needed to hold the database locked")
            let scratch = try Scratch()
            defer { scratch.remove() }
            let radio = try await VirtualRadio.launch(.bumble, controllers: 2)
            defer { radio.stop() }
            let tracer = try Products.path(of: "tracer")
            let home = scratch.path
            let dbA = scratch.file("a.db"), dbB = scratch.file("b.db")
            let extra = ["--rotation-interval", "\(Self.interval)"]
            let a = try Node.readingLog(tracer, NodeResilience.runArguments(dbA, port: radio.ports[0], extra: extra), home: home)
            defer { a.ensureStopped() }
            let b = try Node.readingLog(tracer, NodeResilience.runArguments(dbB, port: radio.ports[1], extra: extra), home: home)
            defer { b.ensureStopped() }

            // The lock begins 2-4 s into a window in which the two have met and lasts past the
            // window's end and the 5 s SQLite then waits, until the status has said why A is dark
            // (20 s at most).
            let windowStart = try #require(try NodeDiskFull.windowMetEarlyIn(dbA, dbB, interval: Self.interval, home: home), "A and B did not meet early in a window within 40 s; A: \(a.lines.suffix(5)); B: \(b.lines.suffix(5))")
            let before = try NodeDiskFull.encounters(dbA, home: home)
            let windowEnd = windowStart + Self.interval
            let endedID = try #require(try Check.openStore(dbA).ownIDs().first { $0.window.end == windowEnd }, "A has no id for [\(windowStart), \(windowEnd))")

            let release = scratch.file("release-the-lock")
            let holder = try Node.readingLog(python, ["-c", Self.lockHolder, dbA, "20", release], home: home)
            defer { holder.ensureStopped() }
            try #require(eventuallyBlocking(timeout: .seconds(10), every: .milliseconds(50)) { holder.lines.contains("locked") },
                         "the lock holder did not get the lock: \(holder.lines)")

            // The write of the next id gives up after SQLite's 5 s; the status then says why.
            let status = try NodeDiskFull.status(dbA, home: home, within: .seconds(20)) { $0.stdout.contains("not advertising since") }
            let said = status.stdout.contains("not advertising since")
            print("tracer status with the database locked (exit \(status.exitCode)):\n\(status.stdout)")
            #expect(said && status.exitCode == 1, "\(status)")
            #expect(status.stdout.hasPrefix("Node:           degraded — not advertising since "), "\(status)")
            #expect(status.stdout.contains("the database \(dbA) is locked by another process; stop the other process using it."), "\(status)")
            FileManager.default.createFile(atPath: release, contents: nil)

            try #require(eventuallyBlocking(timeout: .seconds(25), every: .milliseconds(50)) { holder.lines.contains("released") },
                         "the lock holder did not release the lock: \(holder.lines)")
            let released = ContinuousClock.now
            let releasedSecond = Int64(NodeResilience.now())
            let (metAgain, seen) = try NodeDiskFull.meetAgain(dbA, dbB, after: releasedSecond, home: home, within: .seconds(30))
            let recovery = ContinuousClock.now - released
            try #require(metAgain, "A and B did not meet within 30 s of the lock's release (A saw B at \(seen.a), B saw A at \(seen.b)); A: \(a.lines.suffix(8))")

            a.stopCleanly("node A")
            b.stopCleanly("node B")
            // B heard A's ended id no later than the second its window ended in (sightings carry
            // whole seconds): A took it off the air at the end, not when its write gave up.
            let heardByB = try NodeResilience.rows(dbB, home: home).filter { $0.peer == endedID.id.hex }
            let lastHeard = heardByB.map(\.lastSeen).max() ?? 0
            #expect(lastHeard <= windowEnd, "B heard A's id \(lastHeard - windowEnd) s after its window ended at \(windowEnd)")
            let after = try NodeDiskFull.encounters(dbA, home: home)
            let lost = NodeDiskFull.lost(from: before, in: after)
            #expect(lost.isEmpty, "encounters lost: \(lost)")
            #expect(try Check.openStore(dbA).integrityCheck() == ["ok"])
            print(String(format: "database locked: lock released → met again after %.2f s; B last heard the ended id %d s after its window; encounters lost: %d",
                         Double(recovery.components.seconds) + Double(recovery.components.attoseconds) / 1e18, lastHeard - windowEnd, lost.count))
        }
    }
}
