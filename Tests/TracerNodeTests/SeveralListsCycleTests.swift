import Foundation
import IDRotation
import Testing
import TestTiers
import TracerCore
import TracerTestSupport

extension TracerNodeTests {
    /// A node following several authorities' lists across real processes (issue 39, item 5):
    /// three `tracer-server`s with keys of their own; `tracer check` matches the node's encounters
    /// against all of them and reports each match with its authority; a list whose server is down
    /// is named as not up to date and the answer is never "no exposure"; a list requiring a
    /// witness whose checkpoint lacks the cosignature is refused while the others are used.
    @Suite(.tags(.endToEnd)) struct SeveralListsCycleTests {
        typealias Trust = ListLogTrustTests

        /// A configuration file following `home` by flags and `lists` as `[lists.<name>]` tables.
        static func config(_ scratch: Scratch, _ name: String, _ tables: String) throws -> String {
            let path = scratch.file(name + ".toml")
            try tables.write(toFile: path, atomically: true, encoding: .utf8)
            return path
        }

        static func table(_ name: String, _ server: ListServerProcess, _ extra: String = "") -> String {
            "[lists.\(name)]\nurl = \"\(server.url)\"\npublic_key = \"\(server.publicKey)\"\n\(extra)\n"
        }

        /// Reports `ids` to `server` and sees them published; `serve` may have published them
        /// itself right after the upload, before `publish` runs.
        static func publish(_ ids: [OwnID], to server: ListServerProcess, scratch: Scratch, as reporter: String) throws {
            try NodeFixture.makeStore(scratch.file(reporter + ".db"), ownIDs: ids)
            let report = try Products.tracer(
                ["report", "--db", scratch.file(reporter + ".db"), "--server", server.url, "--code", try server.issueCode(), "--yes"],
                home: scratch.path, environment: ["XDG_CONFIG_HOME": scratch.file("xdg-config")])
            try #require(report.exitCode == 0, "\(report)")
            let published = try server.publish()
            try #require(published.contains("Published batch") || published.contains("Log holds 1 entries"), "\(published)")
        }

        static func occurrences(_ text: String, _ phrase: String) -> Int { text.components(separatedBy: phrase).count - 1 }

        @Test(.timeLimit(.minutes(3)))
        func matchesAreReportedPerAuthorityAndAListNotUpToDateIsNamed() throws {
            let scratch = try Scratch()
            defer { scratch.remove() }
            let now = UnixSeconds(Date().timeIntervalSince1970)
            let day = now - now % 86_400 - 86_400
            let home = try ListServerProcess(scratch: scratch, name: "home")
            defer { home.stop() }
            let campus = try ListServerProcess(scratch: scratch, name: "campus")
            defer { campus.stop() }
            let travel = try ListServerProcess(scratch: scratch, name: "travel")
            defer { travel.stop() }
            #expect(Set([home.publicKey, campus.publicKey, travel.publicKey]).count == 3, "three authorities, three keys")

            let diagnosedHome = ReportedHistory.hourlyIDs(from: day, until: now)
            let diagnosedCampus = ReportedHistory.hourlyIDs(from: day, until: now)
            let diagnosedTravel = ReportedHistory.hourlyIDs(from: day, until: now)
            try Self.publish(diagnosedHome, to: home, scratch: scratch, as: "a")
            try Self.publish(diagnosedCampus, to: campus, scratch: scratch, as: "z")
            try Self.publish(diagnosedTravel, to: travel, scratch: scratch, as: "y")

            // A witness key no server of this test cosigns with: the travel list's checkpoints lack it.
            let witnessDirectory = scratch.file("witness")
            try FileManager.default.createDirectory(atPath: witnessDirectory, withIntermediateDirectories: true)
            let keygen = try Products.runServer(["witness-keygen"], dataDirectory: witnessDirectory, home: scratch.path)
            try #require(keygen.exitCode == 0, "\(keygen)")
            let witnessKey = keygen.stdout.trimmingCharacters(in: .whitespacesAndNewlines)

            let two = try Self.config(scratch, "two", Self.table("campus", campus))
            let three = try Self.config(
                scratch, "three",
                Self.table("campus", campus) + Self.table("travel", travel, "witnesses = \"\(witnessKey)\"\nwitnesses_required = 1"))

            let exposed = Trust.Node(scratch: scratch, name: "b")
            try NodeFixture.makeStore(exposed.db, encounters: Trust.exposed(to: diagnosedHome, day: day)
                + Trust.exposed(to: diagnosedCampus, day: day) + Trust.exposed(to: diagnosedTravel, day: day))
            let clear = Trust.Node(scratch: scratch, name: "c")
            try NodeFixture.makeStore(clear.db)

            // Both lists up to date: each match with its authority.
            let both = try exposed.check(home.url, key: home.publicKey, ["--quiet", "--config", two])
            #expect(both.exitCode == 3, "\(both)")
            #expect(both.stdout.contains("home (server.url): up to date"), "\(both)")
            #expect(both.stdout.contains("campus: up to date"), "\(both)")
            #expect(Self.occurrences(both.stdout, "met 1 diagnosed id of this list") == 2, "\(both)")
            #expect(both.stdout.contains("Exposure found: HIGH risk."), "\(both)")
            let json = try exposed.check(home.url, key: home.publicKey, ["--json", "--config", two])
            #expect(json.exitCode == 3, "\(json)")
            let lists = try #require(try Check.json(json.stdout)["lists"] as? [[String: Any]], "\(json)")
            #expect(lists.map { $0["name"] as? String } == ["home", "campus"])
            #expect(lists.map { $0["matchedIDs"] as? Int } == [1, 1])
            #expect(lists.allSatisfy { $0["problem"] == nil }, "\(lists)")
            // Each list keeps its state apart; the home list's stays where it always was.
            #expect(FileManager.default.fileExists(atPath: exposed.cache + "/log"))
            #expect(FileManager.default.fileExists(atPath: exposed.cache + "/lists/campus/log"))

            let clean = try clear.check(home.url, key: home.publicKey, ["--quiet", "--config", two])
            #expect(clean.exitCode == 0, "\(clean)")
            #expect(clean.stdout.contains("No exposure found in the last 28 days in any of the 2 lists."), "\(clean)")

            // The travel list requires a witness its checkpoint lacks: refused, the others used.
            let witnessed = try exposed.check(home.url, key: home.publicKey, ["--quiet", "--config", three])
            #expect(witnessed.exitCode == 3, "\(witnessed)")
            #expect(witnessed.stdout.contains("travel: NOT CHECKED"), "\(witnessed)")
            #expect(witnessed.stdout.contains("0 valid cosignatures of the 1 required"), "\(witnessed)")
            #expect(Self.occurrences(witnessed.stdout, "met 1 diagnosed id of this list") == 2, "the refused list matched nothing: \(witnessed)")
            #expect(witnessed.stdout.contains("(Not up to date: travel;"), "\(witnessed)")

            let status = try exposed.tracer(["status", "--db", exposed.db, "--cache-dir", exposed.cache, "--config", three])
            #expect(status.stdout.contains("List campus:    last updated"), "\(status)")
            #expect(status.stdout.contains("list log of 1 entries"), "\(status)")
            #expect(status.stdout.contains("List travel:    never downloaded"), "\(status)")

            // The campus server stops: its list is named as not up to date, and there is no "no exposure".
            campus.stop()
            let stopped = try clear.check(home.url, key: home.publicKey, ["--quiet", "--config", two])
            #expect(stopped.exitCode == 1, "\(stopped)")
            #expect(stopped.stdout.contains("campus: NOT UP TO DATE"), "\(stopped)")
            #expect(stopped.stdout.contains("home (server.url): up to date"), "\(stopped)")
            #expect(!stopped.stdout.lowercased().contains("no exposure"), "\(stopped)")
            #expect(stopped.stdout.contains("could not be brought up to date"), "\(stopped)")
            // A match is reported whatever the others' state, from the held campus list too.
            let stillExposed = try exposed.check(home.url, key: home.publicKey, ["--quiet", "--config", two])
            #expect(stillExposed.exitCode == 3, "\(stillExposed)")
            #expect(Self.occurrences(stillExposed.stdout, "met 1 diagnosed id of this list") == 2, "\(stillExposed)")
            #expect(stillExposed.stdout.contains("campus: NOT UP TO DATE"), "\(stillExposed)")

            let doctor = try clear.tracer(["doctor", "--db", clear.db, "--cache-dir", clear.cache, "--config", two,
                                           "--server", home.url, "--server-key", home.publicKey, "--transport", "tcp:127.0.0.1:1"])
            #expect(doctor.stdout.contains("list campus"), "\(doctor)")
            #expect(doctor.stdout.contains("[lists.campus]"), "\(doctor)")
            #expect(doctor.exitCode != 0, "\(doctor)")
        }
    }
}
