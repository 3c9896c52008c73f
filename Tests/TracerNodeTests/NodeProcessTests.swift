import BLEHostTestSupport
import Foundation
import IDRotation
import Testing
import TestTiers
#if canImport(Glibc)
import Glibc
import TracerCore
import TracerTestSupport
#endif

extension TracerNodeTests {
    /// Two `tracer run` processes on Bumble virtual controllers meet, and stop cleanly on SIGTERM.
    @Suite(.tags(.endToEnd)) struct NodeProcesses {
        @Test(.timeLimit(.minutes(1)))
        func twoNodeProcessesMeetAndStopOnSIGTERM() async throws {
            let scratch = try Scratch()
            defer { scratch.remove() }
            let link = try await VirtualRadio.launch(.bumble, controllers: 2)
            defer { link.stop() }
            let tracer = try Products.path(of: "tracer")
            let nodes = try link.ports.enumerated().map { index, port in
                try StreamingProcess(tracer, [
                    "run", "--db", scratch.file("node\(index).db"), "--transport", "tcp:127.0.0.1:\(port)",
                    "--continuous-scan", "--log-level", "error",
                ], home: scratch.path)
            }
            func peers(of index: Int) throws -> Set<UserID> {
                guard Check.exists(scratch.file("node\(index).db")) else { return [] }
                return Set(try Check.openStore(scratch.file("node\(index).db")).encounters().map(\.peer))
            }
            func ownIDs(of index: Int) throws -> Set<UserID> {
                guard Check.exists(scratch.file("node\(index).db")) else { return [] }
                return Set(try Check.openStore(scratch.file("node\(index).db")).ownIDs().map(\.id))
            }
            let met = try eventuallyBlocking(timeout: .seconds(20), every: .milliseconds(250)) {
                try !peers(of: 0).isDisjoint(with: ownIDs(of: 1)) && !peers(of: 1).isDisjoint(with: ownIDs(of: 0))
            }
            #expect(met, "the two node processes did not log each other within 20 s")

            for node in nodes { kill(node.pid, SIGTERM) }
            for (index, node) in nodes.enumerated() {
                let exit = node.waitForExit(timeout: .seconds(5))
                #expect(exit?.status == 0 && exit?.signaled == false, "node \(index) did not exit 0 within 5 s of SIGTERM: \(String(describing: exit))")
            }
            // What was logged survived the stop, and each side logged only ids the other had.
            #expect(try peers(of: 0).isSubset(of: ownIDs(of: 1)))
            #expect(try peers(of: 1).isSubset(of: ownIDs(of: 0)))
            #expect(try Check.openStore(scratch.file("node0.db")).integrityCheck() == ["ok"])
        }

        /// Quirks named in the settings reach the node's host (this virtual controller reports
        /// company 0xFFFF, which the identity table leaves alone: real firmware reports it too),
        /// and a name the host now handles on every controller is accepted with a warning that
        /// says so, once.
        @Test(.timeLimit(.minutes(1)))
        func aControllerQuirkNamedInTheSettingsReachesTheHost() async throws {
            let scratch = try Scratch()
            defer { scratch.remove() }
            let link = try await VirtualRadio.launch(.bumble, controllers: 1)
            defer { link.stop() }
            let log = scratch.file("node.log")
            let node = try StreamingProcess(try Products.path(of: "tracer"), [
                "run", "--db", scratch.file("node.db"), "--transport", "tcp:127.0.0.1:\(link.ports[0])", "--log-level", "info",
            ], home: scratch.path, standardErrorPath: log, environment: ["TRACER_CONTROLLER_QUIRKS": "cancel-taken-without-ending-attempt,commands-left-unanswered"])
            defer {
                kill(node.pid, SIGTERM)
                if node.waitForExit(timeout: .seconds(5)) == nil { node.killHard() }
            }
            var lines: [Substring] = []
            var line: String?
            _ = eventuallyBlocking(timeout: .seconds(20), every: .milliseconds(100)) {
                lines = (try? String(contentsOfFile: log, encoding: .utf8))?.split(separator: "\n") ?? []
                line = lines.first { $0.contains("controller quirks known from the start") }.map(String.init)
                return line != nil
            }
            let found = try #require(line, "no quirks logged at start: \((try? String(contentsOfFile: log, encoding: .utf8)) ?? "")")
            #expect(found.contains("cancel taken without ending the attempt"), "\(found)")
            #expect(!found.contains("commands"), "a retired name is no quirk: \(found)")
            let warnings = lines.filter { $0.contains("node.controller_quirks names commands-left-unanswered, which the node handles on every controller") }
            #expect(warnings.count == 1, "the retired name is told once: \(lines)")
        }

        @Test func runRejectsABadTransportInOneSentence() throws {
            let scratch = try Scratch()
            defer { scratch.remove() }
            let result = try Products.tracer(["run", "--transport", "bluetooth-please", "--db", scratch.file("n.db")], home: scratch.path)
            #expect(result.exitCode == 1)
            #expect(result.stderr.contains("tcp:HOST:PORT"))
            #expect(result.stderr.split(separator: "\n").count == 1)
            // The transport can come from the configuration file, so its absence is not a usage error.
            let missing = try Products.tracer(["run", "--db", scratch.file("n.db")], home: scratch.path)
            #expect(missing.exitCode == 1)
            #expect(missing.stderr.contains("No Bluetooth controller is configured"))
        }
    }
}
