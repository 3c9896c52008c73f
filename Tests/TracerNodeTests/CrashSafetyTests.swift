import Foundation
import IDRotation
import Testing
import TestTiers
#if canImport(Glibc)
import Glibc
import TracerTestSupport
#endif

extension TracerNodeTests {
    /// Issue requirement: "a kill -9 at any moment leaves a database that opens and passes
    /// PRAGMA integrity_check; at most the last batch (at most 1 s of sightings) may be lost".
    @Suite(.tags(.endToEnd)) struct CrashSafety {
        static let runs = 20
        static let rate = 20_000
        static let peers = 500

        /// The sightings stored so far, summed over every encounter row.
        static func storedSightings(_ path: String) throws -> Int {
            guard Check.exists(path) else { return 0 }
            let store = try Check.openStore(path)
            return try store.encounters().reduce(0) { $0 + $1.sightings }
        }

        static func lastNumber(after prefix: String, in lines: [String]) -> Int? {
            lines.last { $0.hasPrefix(prefix) }.flatMap { Int($0.dropFirst(prefix.count)) }
        }

        @Test(.timeLimit(.minutes(2)))
        func killNineAtRandomMomentsLosesAtMostOneBatch() throws {
            let simulator = try Products.path(of: "TracerSimulator")
            let scratch = try Scratch()
            defer { scratch.remove() }
            let path = scratch.file("crash.db")
            var generator = SystemRandomNumberGenerator()
            let started = ContinuousClock.now

            for run in 1...Self.runs {
                let before = try Self.storedSightings(path)
                let child = try StreamingProcess(
                    simulator,
                    ["crash-writer", "--db", path, "--rate", "\(Self.rate)", "--peers", "\(Self.peers)"],
                    home: scratch.path)
                guard child.waitForLine(timeout: .seconds(15), where: { $0 == "started" }) else {
                    child.killHard()
                    _ = child.waitForExit()
                    Issue.record("run \(run): the crash writer never printed \"started\": \(child.lines.suffix(5))")
                    return
                }
                // The kill's moment is the thing under test: anywhere in or between flushes.
                let delay = Double.random(in: 0.3...2.5, using: &generator)
                usleep(useconds_t(delay * 1_000_000))
                let runningWhenKilled = child.isRunning
                child.killHard()
                let exit = try #require(child.waitForExit(), "run \(run): the crash writer did not exit after SIGKILL")
                try #require(runningWhenKilled, "run \(run): the crash writer had already exited: \(child.lines.suffix(5))")
                #expect(exit.signaled && exit.status == SIGKILL, "run \(run): ended with \(exit), not SIGKILL")

                let lines = child.lines
                let committed = Self.lastNumber(after: "committed ", in: lines) ?? 0
                let generated = try #require(
                    Self.lastNumber(after: "generated ", in: lines),
                    "run \(run): no \"generated N\" line: \(lines.suffix(5))")

                // The killed database must open (recovering its WAL) and be intact.
                let store = try Check.openStore(path)
                #expect(try store.integrityCheck() == ["ok"], "run \(run)")
                let written = try store.encounters().reduce(0) { $0 + $1.sightings } - before
                let lost = generated - written
                print("crash run \(run): killed after \(String(format: "%.2f", delay)) s, committed \(committed), written \(written), generated \(generated), lost \(lost)")

                // Nothing the writer reported as committed may be lost.
                #expect(written >= committed, "run \(run): committed \(committed) but only \(written) stored")
                // Nothing may be stored that the writer had not generated.
                #expect(written <= generated, "run \(run): stored \(written) but generated only \(generated)")
                // At most the last batch is lost: one 1 s flush interval of sightings (rate per
                // second), plus 20% slack because "generated N" lines come every ~20 ms and a
                // generation step can run a little past the second before the flush.
                #expect(Double(lost) <= 1.2 * Double(Self.rate), "run \(run): lost \(lost) sightings, more than one batch")
            }
            let elapsed = ContinuousClock.now - started
            #expect(elapsed < .seconds(90), "the crash test took \(elapsed)")
        }
    }
}
