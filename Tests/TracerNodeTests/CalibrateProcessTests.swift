import BLEHostTestSupport
import Foundation
import Testing
import TestTiers
#if canImport(Glibc)
import Glibc
import TracerTestSupport
#endif

extension TracerNodeTests {
    /// `tracer calibrate` on Bumble virtual controllers beside a reference `tracer run`. Bumble's
    /// RSSI is synthetic (always -50 dBm), so these check the mechanics, not a radio's value.
    @Suite(.tags(.endToEnd)) struct CalibrateProcesses {
        @Test(.timeLimit(.minutes(1)))
        func calibrateCountsTheReferencesReadingsAndPrintsASettingTheConfigurationAccepts() async throws {
            let scratch = try Scratch()
            defer { scratch.remove() }
            let link = try await VirtualRadio.launch(.bumble, controllers: 2)
            defer { link.stop() }
            let tracer = try Products.path(of: "tracer")
            let reference = try StreamingProcess(tracer, [
                "run", "--db", scratch.file("reference.db"), "--transport", "tcp:127.0.0.1:\(link.ports[0])", "--log-level", "error",
            ], home: scratch.path)
            defer { kill(reference.pid, SIGTERM); _ = reference.waitForExit(timeout: .seconds(5)) }
            let transport = "tcp:127.0.0.1:\(link.ports[1])"

            // While this node's own `tracer run` holds the controller, calibrate refuses.
            let own = try StreamingProcess(tracer, [
                "run", "--db", scratch.file("node.db"), "--transport", transport, "--log-level", "error",
            ], home: scratch.path)
            _ = eventuallyBlocking(timeout: .seconds(10), every: .milliseconds(100)) { Check.exists(scratch.file("node.db-status.json")) }
            let refused = try Products.tracer(["calibrate", "--db", scratch.file("node.db"), "--transport", transport, "--seconds", "1"], home: scratch.path)
            #expect(refused.exitCode == 1, "\(refused)")
            #expect(refused.stderr.contains("A running node (pid \(own.pid)) holds \(transport)"), "\(refused)")
            #expect(!refused.stdout.contains("rssi_correction"), "\(refused)")
            kill(own.pid, SIGTERM)
            #expect(own.waitForExit(timeout: .seconds(5))?.status == 0)

            let result = try Products.tracer(["calibrate", "--db", scratch.file("node.db"), "--transport", transport, "--seconds", "4"], home: scratch.path)
            #expect(result.exitCode == 0, "\(result)")
            let readings = result.stdout.split(separator: "\n").first { $0.hasPrefix("Readings: ") }
                .flatMap { Int($0.dropFirst("Readings: ".count).prefix { $0.isNumber }) }
            #expect((readings ?? 0) >= 10, "\(result)")
            #expect(result.stdout.contains("Median RSSI: -50 dBm"), "\(result)")
            #expect(result.stdout.contains("Attenuation at 1 m:"), "\(result)")
            let settingLine = result.stdout.split(separator: "\n").first { $0.hasPrefix("rssi_correction = ") }
            let correction = settingLine.flatMap { Int($0.dropFirst("rssi_correction = ".count)) }
            try #require(correction != nil, "\(result)")

            // The printed lines, put in the configuration file, are the setting's value.
            let configDirectory = scratch.file(".config/tracer")
            try FileManager.default.createDirectory(atPath: configDirectory, withIntermediateDirectories: true)
            try "[risk]\n\(settingLine!)\n".write(toFile: configDirectory + "/tracer.toml", atomically: true, encoding: .utf8)
            let config = try Products.tracer(["config", "--json"], home: scratch.path)
            let settings = try Check.json(config.stdout)["settings"] as? [String: Any]
            let setting = settings?["risk.rssi_correction"] as? [String: Any]
            #expect(setting?["value"] as? Int == correction, "\(config)")

            // One second of the reference (advertising every 250 ms) is too few readings: no value.
            let short = try Products.tracer(["calibrate", "--db", scratch.file("node.db"), "--transport", transport, "--seconds", "1"], home: scratch.path)
            #expect(short.exitCode == 1, "\(short)")
            #expect(short.stderr.contains("fewer than the 10 a median needs; no correction was computed"), "\(short)")
            #expect(!short.stdout.contains("rssi_correction"), "\(short)")
        }

        @Test(.timeLimit(.minutes(1)))
        func withTwoNodesInRangeCalibrateSaysSoAndPeerChoosesOne() async throws {
            let scratch = try Scratch()
            defer { scratch.remove() }
            let link = try await VirtualRadio.launch(.bumble, controllers: 3)
            defer { link.stop() }
            let tracer = try Products.path(of: "tracer")
            let references = try (0..<2).map { index in
                try StreamingProcess(tracer, [
                    "run", "--db", scratch.file("reference\(index).db"), "--transport", "tcp:127.0.0.1:\(link.ports[index])", "--log-level", "error",
                ], home: scratch.path)
            }
            defer { for node in references { kill(node.pid, SIGTERM); _ = node.waitForExit(timeout: .seconds(5)) } }
            let calibrate = ["calibrate", "--db", scratch.file("node.db"), "--transport", "tcp:127.0.0.1:\(link.ports[2])", "--seconds", "4"]

            let both = try Products.tracer(calibrate, home: scratch.path)
            #expect(both.exitCode == 0, "\(both)")
            #expect(both.stdout.contains("Heard 2 Tracer nodes: "), "\(both)")
            let reference = both.stdout.split(separator: "\n").first { $0.hasPrefix("Reference node: ") }?.dropFirst("Reference node: ".count)
            let chosen = try #require(reference.map(String.init), "\(both)")
            #expect(both.stdout.contains("Using the strongest, \(chosen); give --peer ADDRESS"), "\(both)")
            let other = try #require(both.stdout.split(separator: "\n").first { $0.hasPrefix("Heard 2") }?
                .split(separator: " ").first { $0.count == 17 && $0.contains(":") && String($0) != chosen }.map(String.init), "\(both)")

            let one = try Products.tracer(calibrate + ["--peer", other], home: scratch.path)
            #expect(one.exitCode == 0, "\(one)")
            #expect(one.stdout.contains("Reference node: \(other)"), "\(one)")
            #expect(!one.stdout.contains("Heard 2"), "\(one)")
        }

        @Test(.timeLimit(.minutes(1)))
        func calibrateWithoutAReferenceInRangeGivesNoValue() async throws {
            let scratch = try Scratch()
            defer { scratch.remove() }
            let link = try await VirtualRadio.launch(.bumble, controllers: 1)
            defer { link.stop() }
            let result = try Products.tracer([
                "calibrate", "--db", scratch.file("node.db"), "--transport", "tcp:127.0.0.1:\(link.ports[0])", "--seconds", "1",
            ], home: scratch.path)
            #expect(result.exitCode == 1, "\(result)")
            #expect(result.stderr.contains("Heard 0 readings of the reference node, fewer than the 10"), "\(result)")
            #expect(result.stderr.contains("Check that `tracer run` is running on the reference node"), "\(result)")
            #expect(!result.stdout.contains("rssi_correction"), "\(result)")
        }
    }
}
