import BLEHostTestSupport
import Foundation
import IDRotation
import Places
import Testing
import TestTiers
import TracerCore
import TracerTestSupport
#if canImport(Glibc)
import Glibc
#endif

extension TracerNodeTests {
    /// The place recorded with each encounter window, from gpsd fed by gpsfake, with real nodes.
    @Suite(.tags(.endToEnd)) struct PlacesFromGPSD {
        static func metres(_ a: (Double, Double), _ b: (Double, Double)) -> Double {
            let (lat1, lon1, lat2, lon2) = (a.0 * .pi / 180, a.1 * .pi / 180, b.0 * .pi / 180, b.1 * .pi / 180)
            let h = pow(sin((lat2 - lat1) / 2), 2) + cos(lat1) * cos(lat2) * pow(sin((lon2 - lon1) / 2), 2)
            return 2 * 6_371_000 * asin(min(1, sqrt(h)))
        }

        /// Node 0 rides the route (gpsd with fixes, 200 m cells); node 1 is "Library, main
        /// entrance" with a gpsd that has no fix. Node 0's encounters carry a rounded position
        /// on the route and no name; node 1's carry the name and no position. Neither logs a place.
        @Test(.timeLimit(.minutes(1)))
        func encountersCarryTheRoundedGPSDPositionAndNoneWithoutAFix() async throws {
            let scratch = try Scratch()
            defer { scratch.remove() }
            let route = try GPSFake(log: "route.nmea", scratch: scratch)
            defer { route.stop() }
            let noFix = try GPSFake(log: "nofix.nmea", scratch: scratch)
            defer { noFix.stop() }
            let link = try await VirtualRadio.launch(.bumble, controllers: 2)
            defer { link.stop() }
            let tracer = try Products.path(of: "tracer")
            let placeArguments = [
                ["--place-source", "gpsd", "--place-precision", "200"],
                ["--place-source", "gpsd", "--place-name", "Library, main entrance"],
            ]
            let nodes = try link.ports.enumerated().map { index, port in
                try StreamingProcess(tracer, [
                    "run", "--db", scratch.file("node\(index).db"), "--transport", "tcp:127.0.0.1:\(port)",
                    "--continuous-scan", "--log-level", "debug",
                ] + placeArguments[index], home: scratch.path, standardErrorPath: scratch.file("node\(index).log"),
                environment: ["TRACER_PLACE_GPSD_PORT": "\(index == 0 ? route.port : noFix.port)"])
            }
            func encounters(of index: Int) throws -> [Encounter] {
                guard Check.exists(scratch.file("node\(index).db")) else { return [] }
                return try Check.openStore(scratch.file("node\(index).db")).encounters()
            }
            let placed = try eventuallyBlocking(timeout: .seconds(30), every: .milliseconds(250)) {
                try encounters(of: 0).contains { $0.place?.position != nil } && !encounters(of: 1).isEmpty
            }
            #expect(placed, "node 0 logged no encounter with a position within 30 s")
            for node in nodes { kill(node.pid, SIGTERM) }
            for (index, node) in nodes.enumerated() {
                let exit = node.waitForExit(timeout: .seconds(5))
                #expect(exit?.status == 0 && exit?.signaled == false, "node \(index) did not exit 0: \(String(describing: exit))")
            }

            let fixes = try GPSFake.fixes(in: "route.nmea")
            try #require(fixes.count == 180)
            let riding = try encounters(of: 0)
            for encounter in riding {
                guard let place = encounter.place else { continue }  // before gpsd's first fix
                #expect(place.name == nil)
                let position = try #require(place.position)
                #expect(position.precisionMeters == 200)
                // A cell centre (rounding it again changes nothing), within a cell of the route.
                #expect(PlaceGrid.cell(latitude: position.latitude, longitude: position.longitude, precisionMeters: 200) == position)
                let nearest = fixes.map { Self.metres(($0.latitude, $0.longitude), (position.latitude, position.longitude)) }.min() ?? .infinity
                #expect(nearest <= 150, "the stored cell centre is \(nearest) m from the route")
                #expect(!fixes.contains { $0.latitude == position.latitude && $0.longitude == position.longitude }, "a raw fix was stored")
            }
            let standing = try encounters(of: 1)
            #expect(!standing.isEmpty)
            for encounter in standing {
                #expect(encounter.place == Place(name: "Library, main entrance", position: nil), "no fix must mean no position: \(String(describing: encounter.place))")
            }
            // The places are the user's to see…
            let shown = try Products.tracer(["encounters", "--details", "--db", scratch.file("node1.db")], home: scratch.path)
            #expect(shown.exitCode == 0 && shown.stdout.contains("Library, main entrance"), "\(shown)")
            // …and never in the logs.
            for index in 0..<2 {
                let log = try String(contentsOfFile: scratch.file("node\(index).log"), encoding: .utf8)
                #expect(log.contains("gpsd"), "node \(index) logged nothing about gpsd: \(log.suffix(2_000))")
                for secret in ["Library", "52.5", "13.4"] {
                    #expect(!log.contains(secret), "node \(index)'s log holds \(secret)")
                }
            }
            #expect(try String(contentsOfFile: scratch.file("node0.log"), encoding: .utf8).contains("gpsd has a fix"))
        }
    }
}

extension TracerNodeTests {
    /// Places stay on the machine: `tracer report`'s upload holds none, the exposure report shows
    /// them to the user but neither keeps them nor gives them to the hook, and `tracer places
    /// export` hands them over only when asked, without ids.
    @Suite(.tags(.endToEnd)) struct PlacesStayHome {
        static let library = Place(name: "Library, main entrance", position: nil)!
        static let bus = Place(name: "Bus 42", position: Place.Position(latitude: 52.52046, longitude: 13.40612, precisionMeters: 100))!
        static let secrets = ["Library", "Bus 42", "52.52", "13.40", "\"place"]

        static func tracer(_ scratch: Scratch, _ arguments: [String]) throws -> ProcessResult {
            try Products.tracer(arguments, home: scratch.path, environment: ["XDG_CONFIG_HOME": scratch.file("xdg-config")], timeout: .seconds(60))
        }

        @Test(.timeLimit(.minutes(2)))
        func placesAreShownButNeverUploadedStoredWithTheReportOrGivenToTheHook() throws {
            let scratch = try Scratch()
            defer { scratch.remove() }
            let server = try ListServerProcess(scratch: scratch)
            defer { server.stop() }
            let record = scratch.file("uploads.log")
            let proxy = try RecordingProxy(target: server.url, record: record)
            defer { proxy.stop() }
            let now = UnixSeconds(Date().timeIntervalSince1970)

            // A, with places of its own, reports its ids through the recording proxy.
            let ownIDs = ReportedHistory.hourlyIDs(from: now - 86_400, until: now)
            let met = UserID.random()
            try NodeFixture.makeStore(scratch.file("a.db"), ownIDs: ownIDs, encounters: [
                EncounterSpec(peer: met, times: [now - 7_200, now - 7_000], rssi: [-50, -50], place: Self.library),
                EncounterSpec(peer: .random(), times: [now - 5_000, now - 4_900], rssi: [-60, -60], place: Self.bus),
            ])
            let reported = try Self.tracer(scratch, [
                "report", "--db", scratch.file("a.db"), "--server", "http://127.0.0.1:\(proxy.port)",
                "--server-key", server.publicKey, "--code", try server.issueCode(), "--ids", "--yes",
            ])
            try #require(reported.exitCode == 0, "\(reported)")
            let uploads = try String(contentsOfFile: record, encoding: .utf8)
            #expect(uploads.contains("POST "), "the proxy saw no upload: \(uploads.prefix(500))")
            #expect(uploads.contains(ownIDs[0].id.hex), "the upload names A's ids, so the record is the upload")
            for secret in Self.secrets { #expect(!uploads.contains(secret), "the upload holds \(secret)") }
            #expect(!uploads.contains(met.hex), "the upload names a peer A met")
            _ = try server.publish()

            // B met one of A's ids at the library: the report says where.
            let window = ownIDs[0].window
            try NodeFixture.makeStore(scratch.file("b.db"), encounters: [
                EncounterSpec(peer: ownIDs[0].id, times: [window.start + 60, window.start + 900], rssi: [-50, -50], place: Self.library),
            ])
            let hookInput = scratch.file("hook.json")
            let check = try Self.tracer(scratch, [
                "check", "--db", scratch.file("b.db"), "--cache-dir", scratch.file("b-cache"), "--server", server.url,
                "--server-key", server.publicKey, "--on-exposure", "cat > '\(hookInput)'",
            ])
            #expect(check.exitCode == 3, "\(check)")
            #expect(check.stdout.contains("where this node was: Library, main entrance"), "\(check.stdout)")
            let json = try Self.tracer(scratch, ["check", "--json", "--offline", "--db", scratch.file("b.db"), "--cache-dir", scratch.file("b-cache"),
                                                 "--server", server.url, "--server-key", server.publicKey])
            #expect(json.stdout.contains("Library, main entrance"), "\(json)")
            let hook = try String(contentsOfFile: hookInput, encoding: .utf8)
            #expect(hook.contains("\"level\""), "the hook got the report: \(hook.prefix(300))")
            #expect(!hook.contains("Library"), "the hook got a place")
            let status = try Self.tracer(scratch, ["status", "--json", "--db", scratch.file("b.db")])
            #expect(status.stdout.contains("high") || status.stdout.contains("low"), "status shows the last check: \(status.stdout.prefix(500))")
            let stored = try Check.openStore(scratch.file("b.db")).stateValue(forKey: "exposure.last_check") ?? ""
            #expect(stored.contains("weightedMinutes") && !stored.contains("Library"), "the stored last report: \(stored.prefix(300))")
        }

        @Test(.timeLimit(.minutes(1)))
        func placesExportAsksWritesVisitsWithoutIDsAndMode0600() throws {
            let scratch = try Scratch()
            defer { scratch.remove() }
            let now = UnixSeconds(Date().timeIntervalSince1970)
            let peers = (0..<3).map { _ in UserID.random() }
            try NodeFixture.makeStore(scratch.file("n.db"), ownIDs: [OwnID(id: .random(), window: IDWindow(start: now - 900, end: now))], encounters: [
                EncounterSpec(peer: peers[0], times: [now - 7_200, now - 7_000], place: Self.library),
                EncounterSpec(peer: peers[1], times: [now - 6_900, now - 6_800], place: Self.library),
                EncounterSpec(peer: peers[2], times: [now - 3_000, now - 2_900], place: Self.bus),
                EncounterSpec(peer: .random(), times: [now - 40 * 86_400, now - 40 * 86_400 + 10], place: Self.bus),
            ])
            let output = scratch.file("places.json")
            let arguments = ["places", "export", "--db", scratch.file("n.db"), "--days", "3", "--output", output]
            let refused = try Self.tracer(scratch, arguments)
            #expect(refused.exitCode == 1 && refused.stderr.contains("--yes"), "\(refused)")
            #expect(!Check.exists(output))
            let declined = try Self.tracerAtATerminal(scratch, arguments, typing: "n\n")
            #expect(declined.stdout.contains("2 visit(s) at 2 place(s)") && declined.stdout.contains("[y/N]"), "\(declined)")
            #expect(declined.stdout.contains("Nothing was written"), "\(declined)")
            #expect(!Check.exists(output))
            let accepted = try Self.tracerAtATerminal(scratch, arguments, typing: "y\n")
            #expect(accepted.stdout.contains("Wrote 2 visit(s)"), "\(accepted)")
            var status = stat()
            #expect(stat(output, &status) == 0 && status.st_mode & 0o777 == 0o600)
            let text = try String(contentsOfFile: output, encoding: .utf8)
            #expect(text.contains("Library, main entrance") && text.contains("Bus 42") && text.contains("\"encounters\" : 2"), "\(text)")
            for peer in peers {
                #expect(!text.contains(peer.hex) && !text.contains(peer.tag), "the export names a peer")
            }
            #expect(Check.fullHexIDs(in: text).isEmpty, "the export holds an id")
            // The user's own views hold them too: encounters (--json --details) and the full export.
            let details = try Self.tracer(scratch, ["encounters", "--json", "--details", "--db", scratch.file("n.db")])
            #expect(details.stdout.contains("\"name\" : \"Library, main entrance\"") && details.stdout.contains("\"precisionMeters\" : 100"), "\(details)")
            let everything = try Self.tracer(scratch, ["export", "--db", scratch.file("n.db")])
            #expect(everything.stdout.contains("\"place\" : {") && everything.stdout.contains("Bus 42"), "\(everything)")
            try FileManager.default.removeItem(atPath: output)
            let scripted = try Self.tracer(scratch, arguments + ["--yes"])
            #expect(scripted.exitCode == 0 && Check.exists(output), "\(scripted)")
        }

        static func tracerAtATerminal(_ scratch: Scratch, _ arguments: [String], typing input: String) throws -> ProcessResult {
            try KeyReportCycleTests.tracerAtATerminal(scratch, arguments, typing: input)
        }
    }
}

extension TracerNodeTests {
    /// `tracer doctor` checks gpsd when place.source = gpsd and `tracer status` shows the place
    /// in force, against a real gpsd fed by gpsfake: a fix, no fix, nothing listening. Neither
    /// prints a position.
    @Suite(.tags(.integration)) struct PlaceInDoctorAndStatus {
        @Test(.timeLimit(.minutes(1)))
        func doctorChecksGPSDAndStatusShowsThePlace() throws {
            let scratch = try Scratch()
            defer { scratch.remove() }
            let route = try GPSFake(log: "route.nmea", scratch: scratch)
            defer { route.stop() }
            let noFix = try GPSFake(log: "nofix.nmea", scratch: scratch)
            defer { noFix.stop() }
            let refused = try LoopbackPort.free()
            let database = scratch.file("node.db")
            _ = try Check.openStore(database)
            func run(_ command: String, gpsdPort: Int) throws -> ProcessResult {
                var arguments = [command, "--db", database]
                if command == "doctor" { arguments += ["--transport", "tcp:127.0.0.1:9"] }
                return try Products.tracer(arguments, home: scratch.path, environment: [
                    "TRACER_PLACE_SOURCE": "gpsd", "TRACER_PLACE_NAME": "Library, main entrance", "TRACER_PLACE_GPSD_PORT": "\(gpsdPort)",
                ])
            }
            // gpsfake starts its gpsd within a second or two.
            var fixed = try run("doctor", gpsdPort: route.port)
            _ = try eventuallyBlocking(timeout: .seconds(20), every: .milliseconds(300)) {
                fixed = try run("doctor", gpsdPort: route.port)
                return fixed.stdout.contains("[ ok ] gpsd:")
            }
            #expect(fixed.stdout.contains("[ ok ] gpsd: 127.0.0.1:\(route.port) answers and has a fix"), "\(fixed)")
            let status = try run("status", gpsdPort: route.port)
            #expect(status.stdout.contains(#"Place:          "Library, main entrance"; gpsd at 127.0.0.1:\#(route.port) has a fix"#), "\(status)")
            // The route runs at 46.49 N 7.56 E: no coordinate appears.
            #expect(!status.stdout.contains("46.") && !fixed.stdout.contains("46."), "\(status)")

            var unfixed = try run("doctor", gpsdPort: noFix.port)
            _ = try eventuallyBlocking(timeout: .seconds(20), every: .milliseconds(300)) {
                unfixed = try run("doctor", gpsdPort: noFix.port)
                return unfixed.stdout.contains("no fix")
            }
            #expect(unfixed.stdout.contains("[FAIL] gpsd: 127.0.0.1:\(noFix.port) answers but has no fix"), "\(unfixed)")
            #expect(unfixed.stdout.contains("cgps -s"), "\(unfixed)")

            let absent = try run("doctor", gpsdPort: refused)
            #expect(absent.exitCode == 1)
            #expect(absent.stdout.contains("[FAIL] gpsd: cannot reach gpsd at 127.0.0.1:\(refused)"), "\(absent)")
            #expect(absent.stdout.contains("systemctl status gpsd"), "\(absent)")
            let absentStatus = try run("status", gpsdPort: refused)
            #expect(absentStatus.stdout.contains("gpsd at 127.0.0.1:\(refused) unreachable"), "\(absentStatus)")
        }
    }
}
