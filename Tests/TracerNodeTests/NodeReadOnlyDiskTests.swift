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
    /// Issue 38, item 1 at the process level: node A's database is on an ext4 file system that the
    /// kernel turns read-only while A exchanges with B, as it does when an SD card or a disk
    /// starts failing. A must go off the air when it cannot record its next id, say why in
    /// `tracer status` (although it cannot write its own status file any more) and `tracer doctor`,
    /// with what to do, and stay up; once an administrator has stopped it, checked the file system
    /// and mounted it again, A started again on the same database meets B again, and nothing A
    /// recorded is lost: neither what it wrote before the failure nor the sightings it held in
    /// memory when it was stopped (kept in its runtime directory, written by the next start).
    @Suite(.tags(.endToEnd)) struct NodeReadOnlyDisk {
        typealias Node = StreamingProcess
        static let interval: Int64 = 10

        @Test(.timeLimit(.minutes(3)))
        func aNodeWhoseDiskTurnsReadOnlyGoesDarkSaysWhatToDoAndComesBackAfterTheRepair() async throws {
            let scratch = try Scratch()
            defer { scratch.remove() }
            let disk = try FailingDisk(at: scratch.file("a-disk"), megabytes: 16)
            defer { if let problem = disk.remove() { Issue.record(Comment(rawValue: problem)) } }
            let radio = try await VirtualRadio.launch(.bumble, controllers: 2)
            defer { radio.stop() }
            let tracer = try Products.path(of: "tracer")
            let home = scratch.path
            let dbA = disk.path + "/a.db", dbB = scratch.file("b.db")
            let extra = ["--rotation-interval", "\(Self.interval)"]
            let transportA = "tcp:127.0.0.1:\(radio.ports[0])"
            var a = try Node.readingLog(tracer, NodeResilience.runArguments(dbA, port: radio.ports[0], extra: extra), home: home)
            defer { a.ensureStopped() }
            let b = try Node.readingLog(tracer, NodeResilience.runArguments(dbB, port: radio.ports[1], extra: extra), home: home)
            defer { b.ensureStopped() }

            _ = try #require(try NodeDiskFull.windowMetEarlyIn(dbA, dbB, interval: Self.interval, home: home),
                             "A and B did not meet early in a window within 40 s; A: \(a.lines.suffix(5)); B: \(b.lines.suffix(5))")
            // What A had recorded, made durable first: an error that turns the disk read-only
            // drops what the kernel had not written back yet (A's SQLite does not fsync each
            // commit in WAL mode), a loss this test does not measure.
            let before = try NodeDiskFull.encounters(dbA, home: home)
            for file in [dbA, dbA + "-wal"] {
                let descriptor = open(file, O_RDONLY | O_CLOEXEC)
                #expect(descriptor >= 0 && fsync(descriptor) == 0, "cannot sync \(file)")
                close(descriptor)
            }
            try disk.fail()
            let failedSecond = Int64(NodeResilience.now())

            // The window ends; A cannot record the next id and goes off the air.
            let dark = eventuallyBlocking(timeout: .seconds(Double(Self.interval) + 15), every: .milliseconds(100)) {
                a.entry(message: "not advertising: the next id could not be recorded; retrying") != nil
            }
            try #require(dark, "A did not report an id it could not record: \(a.lines.suffix(8))")
            let darkAt = NodeResilience.now()
            let reason = a.entry(message: "not advertising: the next id could not be recorded; retrying")?["error"] ?? ""
            #expect(reason.contains("read-only"), "A's log does not say the disk is read-only: \(reason)")

            // `tracer status` leads with it and exits 1, from what it finds itself: A cannot write
            // its status file on a read-only disk. `tracer doctor` names the fix.
            let status = try NodeDiskFull.status(dbA, home: home, within: .seconds(10)) { $0.stdout.contains("read-only") }
            print("tracer status with the disk read-only (exit \(status.exitCode)):\n\(status.stdout)\(status.stderr)")
            #expect(status.exitCode == 1 && !status.signaled, "\(status)")
            let firstLine = status.stdout.split(separator: "\n").first.map(String.init) ?? ""
            #expect(firstLine.hasPrefix("Node:           degraded — ") && firstLine.contains("read-only"), "\(status)")
            #expect(status.stdout.contains("fsck"), "status does not say what to do: \(status)")
            let doctor = try Products.tracer(["doctor", "--db", dbA, "--transport", transportA], home: home)
            print("tracer doctor with the disk read-only:\n\(doctor.stdout)")
            #expect(doctor.exitCode == 1, "\(doctor)")
            #expect(doctor.stdout.contains("[FAIL] store: ") && doctor.stdout.contains("read-only") && doctor.stdout.contains("fsck"), "\(doctor)")
            #expect(a.isRunning, "A exited with its disk read-only: \(a.lines.suffix(6))")
            // A heard B between the failure and its window's end (it scans without pause), and holds those sightings.
            let holding = eventuallyBlocking(timeout: .seconds(5), every: .milliseconds(100)) {
                a.entry(message: "cannot write encounters; keeping them in memory") != nil
            }
            try #require(holding, "A holds no sighting it could not write: \(a.lines.suffix(8))")

            // The administrator stops A: status still leads with the disk, which no status file
            // written before can say.
            a.stopCleanly("node A")
            let kept = a.entry(message: "stopping with encounters the store refused; kept in memory for the node's next start to write (lost if the machine restarts first)")
            let keptSightings = Int(kept?["sightings"] ?? "") ?? 0
            #expect(keptSightings > 0 && kept?["kept"]?.hasPrefix(home + "/xdg-runtime/tracer/unwritten-encounters-") == true,
                    "A did not keep the sightings it held: \(a.lines.suffix(6))")
            let stopped = try Products.tracer(["status", "--db", dbA], home: home)
            #expect(stopped.exitCode == 1 && stopped.stdout.hasPrefix("Node:           not recording: the file system holding \(dbA) is read-only"),
                    "\(stopped)")
            #expect(stopped.stdout.contains("Held:           \(keptSightings) sightings the store refused when the node stopped, kept in memory in \(kept?["kept"] ?? "?")"),
                    "status does not say what the stop kept: \(stopped)")
            // Then checks the file system and mounts it again; A starts anew.
            try disk.repair()
            let repairedSecond = Int64(NodeResilience.now())
            a = try Node.readingLog(tracer, NodeResilience.runArguments(dbA, port: radio.ports[0], extra: extra), home: home)
            let restarted = ContinuousClock.now
            let (metAgain, seen) = try NodeDiskFull.meetAgain(dbA, dbB, after: repairedSecond, home: home, within: .seconds(40))
            let recovery = ContinuousClock.now - restarted
            try #require(metAgain, "A and B did not meet within 40 s of the repair (A saw B at \(seen.a), B saw A at \(seen.b)); A: \(a.lines.suffix(8))")
            let written = a.entry(message: "writing the encounters kept when the node last stopped with a store that refused writes")
            #expect(written?["sightings"] == "\(keptSightings)", "A's start did not write what its stop kept: \(a.lines.prefix(8))")
            #expect(kept.flatMap { $0["kept"] }.map { !Check.exists($0) } ?? false, "the kept encounters were not removed once written")
            let healthy = try NodeDiskFull.status(dbA, home: home, within: .seconds(10)) { $0.exitCode == 0 }
            #expect(healthy.exitCode == 0 && healthy.stdout.hasPrefix("Node:           running since"), "\(healthy)")
            #expect(!healthy.stdout.contains("Held:"), "\(healthy)")

            a.stopCleanly("node A")
            b.stopCleanly("node B")
            let storeA = try Check.openStore(dbA)
            #expect(try storeA.integrityCheck() == ["ok"])
            let after = try NodeDiskFull.encounters(dbA, home: home)
            let lost = NodeDiskFull.lost(from: before, in: after)
            #expect(lost.isEmpty, "encounters lost: \(lost)")
            // The held sightings are in the store: seen after the failure, before the restart.
            let heldThenWritten = after.values.filter { $0.lastSeen > failedSecond + 1 && $0.lastSeen < repairedSecond }
            #expect(!heldThenWritten.isEmpty, "no encounter seen while the disk was read-only is in A's store: \(after)")
            print(String(format: "read-only disk: dark %d s after the failure; %d sightings held at the stop, written at the restart; repaired and restarted → met again after %.2f s; encounters lost: %d",
                         Int64(darkAt) - failedSecond, keptSightings, Double(recovery.components.seconds) + Double(recovery.components.attoseconds) / 1e18, lost.count))
        }
    }
}
