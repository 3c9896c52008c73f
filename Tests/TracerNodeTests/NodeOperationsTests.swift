import BLEHostTestSupport
import Foundation
import IDRotation
import Testing
import TestTiers
#if canImport(Glibc)
import Glibc
import TracerTestSupport
#endif

extension TracerNodeTests {
    /// `tracer run` as an operator meets it: JSON logs without secrets, SIGHUP, `status`, `doctor`.
    @Suite(.tags(.endToEnd)) struct NodeOperations {
        /// Starts `tracer run` on a controller of `link`, logging to `scratch/nodeN.log`.
        func startNode(_ index: Int, port: UInt16, scratch: Scratch, extra: [String] = []) throws -> StreamingProcess {
            try StreamingProcess(try Products.path(of: "tracer"), [
                "run", "--db", scratch.file("node\(index).db"), "--transport", "tcp:127.0.0.1:\(port)", "--continuous-scan",
            ] + extra, home: scratch.path, standardErrorPath: scratch.file("node\(index).log"))
        }

        func log(_ index: Int, _ scratch: Scratch) -> String {
            (try? String(contentsOfFile: scratch.file("node\(index).log"), encoding: .utf8)) ?? ""
        }

        func met(_ scratch: Scratch) throws -> Bool {
            let stores = try (0..<2).map { index -> NodeStore? in
                Check.exists(scratch.file("node\(index).db")) ? try Check.openStore(scratch.file("node\(index).db")) : nil
            }
            guard let first = stores[0], let second = stores[1] else { return false }
            let firstMetSecond = !Set(try first.encounters().map(\.peer)).isDisjoint(with: try second.ownIDs().map(\.id))
            let secondMetFirst = !Set(try second.encounters().map(\.peer)).isDisjoint(with: try first.ownIDs().map(\.id))
            return firstMetSecond && secondMetFirst
        }

        @Test(.timeLimit(.minutes(1)))
        func traceLogsAreJSONAndHoldNoFullIDsOrKeys() async throws {
            let scratch = try Scratch()
            defer { scratch.remove() }
            let link = try await VirtualRadio.launch(.bumble, controllers: 2)
            defer { link.stop() }
            // A configured list server that is down: the check's failure is logged too.
            let key = "9/KodLPmigTO0r09FOuQcN/BkTLmmJhbx/ywyJlMEiE="
            let extra = ["--log-level", "trace", "--log-format", "json", "--server", "http://127.0.0.1:9/",
                         "--server-key", key, "--check-jitter", "0", "--server-timeout", "1"]
            let nodes = try link.ports.enumerated().map { try startNode($0, port: $1, scratch: scratch, extra: extra) }
            defer { nodes.forEach { $0.killHard() } }
            #expect(try eventuallyBlocking(timeout: .seconds(20), every: .milliseconds(200)) { try met(scratch) }, "the nodes did not meet within 20 s")
            #expect(eventuallyBlocking(timeout: .seconds(15), every: .milliseconds(200)) { log(0, scratch).contains("exposure check failed") })
            for node in nodes { kill(node.pid, SIGTERM) }
            for node in nodes { #expect(node.waitForExit(timeout: .seconds(5))?.status == 0) }

            var everyID: Set<String> = []
            var dailyKeys: [String] = []
            for index in 0..<2 {
                let store = try Check.openStore(scratch.file("node\(index).db"))
                everyID.formUnion(try store.ownIDs().map(\.id.hex))
                everyID.formUnion(try store.encounters().map(\.peer.hex))
                dailyKeys += try store.dailyKeys().map(\.key.hex)
            }
            #expect(everyID.count >= 2)
            #expect(dailyKeys.count >= 2, "each node derives its ids from a key of today")
            for index in 0..<2 {
                let text = log(index, scratch)
                let lines = text.split(separator: "\n")
                #expect(lines.count > 5, "trace level logs the start, the rotation, the exchange and the check")
                for line in lines {
                    let object = try Check.json(String(line))
                    #expect(object["time"] is String && object["level"] is String && object["message"] is String, "\(line)")
                }
                #expect(Check.fullHexIDs(in: text).isDisjoint(with: everyID), "a full id reached node \(index)'s log")
                #expect(!text.contains(key), "the server key reached node \(index)'s log")
                // Neither whole nor in halves (a 16-hex-digit half would look like an id).
                let keyParts = dailyKeys.flatMap { [$0, String($0.prefix(16)), String($0.suffix(16))] }
                #expect(!keyParts.contains { text.lowercased().contains($0) }, "a daily key reached node \(index)'s log")
            }
        }

        @Test(.timeLimit(.minutes(1)))
        func sighupReloadsTheConfigurationAndKeepsItWhenTheFileIsBroken() async throws {
            let scratch = try Scratch()
            defer { scratch.remove() }
            let link = try await VirtualRadio.launch(.bumble, controllers: 1)
            defer { link.stop() }
            let config = scratch.file("tracer.toml")
            try "[log]\nlevel = \"warning\"\n".write(toFile: config, atomically: true, encoding: .utf8)
            let node = try startNode(0, port: link.ports[0], scratch: scratch, extra: ["--config", config, "--rotation-interval", "5"])
            defer { node.killHard() }
            #expect(eventuallyBlocking(timeout: .seconds(10), every: .milliseconds(200)) { Check.exists(scratch.file("node0.db-status.json")) })
            // Each id is logged at info level ("rotated id") right after it is stored, before the
            // next one can be: once the store holds two, the first one's line would be in the log
            // if info lines were shown. Waiting for that instead of a sleep keeps the check honest
            // on a slow machine.
            #expect(eventuallyBlocking(timeout: .seconds(20), every: .milliseconds(200)) {
                ((try? Check.openStore(scratch.file("node0.db")).ownIDs().count) ?? 0) >= 2
            }, "no rotation within 20 s")
            #expect(!log(0, scratch).contains("rotated"))

            try "[log]\nlevel = \"warning\"\nbogus = 1\n".write(toFile: config, atomically: true, encoding: .utf8)
            kill(node.pid, SIGHUP)
            #expect(eventuallyBlocking(timeout: .seconds(5), every: .milliseconds(200)) { log(0, scratch).contains("configuration not reloaded") })
            #expect(log(0, scratch).contains("bogus"))

            try "[log]\nlevel = \"info\"\n".write(toFile: config, atomically: true, encoding: .utf8)
            kill(node.pid, SIGHUP)
            #expect(eventuallyBlocking(timeout: .seconds(5), every: .milliseconds(200)) { log(0, scratch).contains("configuration reloaded") })
            #expect(eventuallyBlocking(timeout: .seconds(8), every: .milliseconds(200)) { log(0, scratch).contains("rotated") }, "info lines after the reload")
            #expect(node.isRunning)
            kill(node.pid, SIGTERM)
            #expect(node.waitForExit(timeout: .seconds(5))?.status == 0)
        }

        @Test(.timeLimit(.minutes(1)))
        func doctorOnAnHCIAdapterNamesTakeAdapterAndSaysWhenItIsSet() throws {
            let scratch = try Scratch()
            defer { scratch.remove() }
            let arguments = ["doctor", "--db", scratch.file("node.db"), "--transport", "hci0"]
            // This machine has no kernel Bluetooth, so opening hci0 fails here as an adapter bluetoothd holds would.
            let plain = try Products.tracer(arguments, home: scratch.path)
            #expect(plain.stdout.contains("[FAIL] transport"), "\(plain)")
            #expect(plain.stdout.contains("`--take-adapter` (node.take_adapter = true"), "\(plain)")
            let taking = try Products.tracer(arguments, home: scratch.path, environment: ["TRACER_TAKE_ADAPTER": "true"])
            #expect(taking.stdout.contains("node.take_adapter is set, so `tracer run` powers a busy adapter off"), "\(taking)")
            // Calibration is advice, not a failure: the node names `tracer calibrate` until a correction is set.
            #expect(plain.stdout.contains("[info] calibration: this node's radio is not calibrated") && plain.stdout.contains("run `tracer calibrate`"), "\(plain)")
            let calibrated = try Products.tracer(arguments, home: scratch.path, environment: ["TRACER_RISK_RSSI_CORRECTION": "0"])
            #expect(calibrated.stdout.contains("[ ok ] calibration: risk.rssi_correction = 0 dB (env TRACER_RISK_RSSI_CORRECTION)"), "\(calibrated)")
        }

        @Test(.timeLimit(.minutes(1)))
        func statusAndDoctorSeeTheRunningNode() async throws {
            let scratch = try Scratch()
            defer { scratch.remove() }
            let link = try await VirtualRadio.launch(.bumble, controllers: 2)
            defer { link.stop() }
            let database = scratch.file("node0.db")
            let node = try startNode(0, port: link.ports[0], scratch: scratch)
            defer { node.killHard() }
            #expect(eventuallyBlocking(timeout: .seconds(10), every: .milliseconds(200)) {
                (try? Products.tracer(["status", "--db", database], home: scratch.path))?.stdout.contains("Node:           running") == true
            })
            let running = try Products.tracer(["status", "--db", database], home: scratch.path)
            #expect(running.exitCode == 0)
            #expect(running.stdout.contains("Controller:     F0:00:00:00:00:01"), "\(running)")
            #expect(running.stdout.contains("Latest own id:  id#"), "\(running)")
            let runningJSON = try Check.json(Products.tracer(["status", "--db", database, "--json"], home: scratch.path).stdout)
            #expect(runningJSON["nodeDegraded"] as? Bool == false, "a healthy node reads as degraded: \(runningJSON)")

            // While the node holds its controller, doctor leaves the radio alone.
            let busy = try Products.tracer(["doctor", "--db", database, "--transport", "tcp:127.0.0.1:\(link.ports[0])"], home: scratch.path)
            #expect(busy.stdout.contains("[skip] transport: a running node"), "\(busy)")
            #expect(busy.stdout.contains("[ ok ] store:"), "\(busy)")
            #expect(busy.exitCode == 0 && !busy.stdout.contains("[FAIL]"), "\(busy)")

            kill(node.pid, SIGTERM)
            #expect(node.waitForExit(timeout: .seconds(5))?.status == 0)
            let stopped = try Products.tracer(["status", "--db", database, "--json"], home: scratch.path)
            let status = try Check.json(stopped.stdout)
            #expect(status["nodeRunning"] as? Bool == false)
            #expect((status["node"] as? [String: Any])?["state"] as? String == "stopped")
            // The last status holds the run's radio account (issue 40): this node advertised and
            // scanned without pause (the tests' schedule), its window as long as its interval, so
            // scanning covers all the time it was on, which is most of the run.
            let radio = try #require(((status["node"] as? [String: Any])?["radioTime"] as? [String: Any])?["lastHour"] as? [String: Any], "\(status)")
            let number = { (key: String) in (radio[key] as? NSNumber)?.doubleValue ?? -1 }
            #expect(number("observedSeconds") > 0 && number("advertisingEvents") > 0, "\(radio)")
            #expect(number("scanningSeconds") > number("observedSeconds") / 2 && number("scanningSeconds") <= number("observedSeconds"), "\(radio)")
            #expect(number("receiverSeconds") >= number("scanningSeconds") && number("receiverSeconds") <= number("observedSeconds"), "\(radio)")

            // The free controller passes every radio check; a port with nothing behind it fails with a fix.
            let healthy = try Products.tracer(["doctor", "--db", database, "--transport", "tcp:127.0.0.1:\(link.ports[1])"], home: scratch.path)
            #expect(healthy.exitCode == 0, "\(healthy)")
            for check in ["transport", "controller", "advertising", "scanning", "store", "clock"] {
                #expect(healthy.stdout.contains("[ ok ] \(check):"), "\(check): \(healthy)")
            }
            let broken = try Products.tracer(["doctor", "--db", database, "--transport", "tcp:127.0.0.1:9"], home: scratch.path)
            #expect(broken.exitCode == 1)
            #expect(broken.stdout.contains("[FAIL] transport"), "\(broken)")
            #expect(broken.stdout.contains("fix: "), "\(broken)")
        }
    }
}
