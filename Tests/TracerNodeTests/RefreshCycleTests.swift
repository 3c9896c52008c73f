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
    /// Issue 29: a verdict within minutes of a diagnosis, across processes. A running node
    /// (`tracer run` on a Bumble controller) that met a diagnosed person has checked its list
    /// and found nothing; the person's `tracer report` is accepted by a real `tracer-server
    /// serve` on its hourly schedule; the server publishes soon after the upload and the node's
    /// revalidation (every second here, as the default 300 s scaled down) checks the new list
    /// and runs its on-exposure command, long before the next full check (an hour).
    @Suite(.tags(.endToEnd)) struct RefreshCycle {
        @Test(.timeLimit(.minutes(1)))
        func aRunningNodeWarnsSecondsAfterTheUpload() async throws {
            try await Self.warnsAfterUpload(node: ["--refresh-interval", "1", "--refresh-jitter", "0"])
        }

        /// With the long poll, the node learns of the publication from the server: its timer
        /// (an hour here) plays no part.
        @Test(.timeLimit(.minutes(1)))
        func aLongPollingNodeWarnsSecondsAfterTheUpload() async throws {
            try await Self.warnsAfterUpload(server: #""longPollSeconds": 20"#, node: ["--refresh-interval", "3600", "--long-poll"])
        }

        /// A node that cannot follow what the server announces (here its configured key is not
        /// the server's, so no checkpoint verifies) must not poll again at once: the server answers
        /// such a poll immediately, and the node asked about 70 times a second.
        @Test(.timeLimit(.minutes(1)))
        func aNodeThatCannotFollowTheServerDoesNotPollInALoop() throws {
            let scratch = try Scratch()
            defer { scratch.remove() }
            let server = try ListServerProcess(scratch: scratch, settings: #""longPollSeconds": 20"#)
            defer { server.stop() }
            let otherKey = try ListServerProcess(scratch: scratch, name: "other", serving: false).publicKey
            // Something published, so that the long poll announces a log larger than the node's
            // empty one (it announces the log's size, 0 before anything is published).
            try server.uploadIDs(count: 3)
            let published = eventuallyBlocking(timeout: .seconds(20), every: .milliseconds(50)) {
                FileManager.default.fileExists(atPath: server.dataDirectory + "/public/log/tile/entries")
            }
            try #require(published, "serve did not publish the upload")
            let node = try StreamingProcess(try Products.path(of: "tracer"), [
                "run", "--db", scratch.file("b.db"), "--transport", "tcp:127.0.0.1:1",
                "--server", server.url, "--server-key", otherKey, "--cache-dir", scratch.file("b-cache"),
                "--check-interval", "3600", "--check-jitter", "0", "--refresh-interval", "3600", "--long-poll",
                "--log-level", "info", "--log-format", "json",
            ], home: scratch.path, standardErrorPath: scratch.file("b.log"))
            defer {
                kill(node.pid, SIGTERM)
                if node.waitForExit(timeout: .seconds(10)) == nil { node.killHard() }
            }
            let followed = "list revalidation failed"
            _ = eventuallyBlocking(timeout: .seconds(20), every: .milliseconds(50)) { Self.log(scratch).contains(followed) }
            try #require(Self.log(scratch).contains(followed), "the long poll never answered: \(Self.log(scratch).suffix(2_000))")
            // The node says when it has decided to wait (an hour here) before polling again:
            // only after that line does "one revalidation" test anything.
            let waits = "the long poll waits before asking again"
            #expect(eventuallyBlocking(timeout: .seconds(20), every: .milliseconds(50)) { Self.log(scratch).contains(waits) },
                    "the node never said it waits: \(Self.log(scratch).suffix(2_000))")
            let revalidations = Self.log(scratch).components(separatedBy: "list revalidation failed").count - 1
            #expect(revalidations == 1, "\(revalidations) revalidations before the long poll waited")
            let waited = Self.log(scratch).components(separatedBy: waits).count - 1
            #expect(waited == 1, "the long poll said \(waited) times that it waits")
            // The wait it announced is the refresh interval (an hour), not a moment: a node that
            // polled again at once would otherwise pass the counts above if read quickly enough.
            let line = Self.log(scratch).split(separator: "\n").first { $0.contains(waits) } ?? ""
            let seconds = line.firstMatch(of: #/"seconds":"(\d+)"/#).flatMap { Int($0.1) } ?? 0
            #expect(seconds >= 3600, "the long poll waits \(seconds) s: \(line)")
        }

        static func warnsAfterUpload(server settings: String = "", node schedule: [String]) async throws {
            let scratch = try Scratch()
            defer { scratch.remove() }
            let server = try ListServerProcess(scratch: scratch, settings: settings)
            defer { server.stop() }
            let now = UnixSeconds(Date().timeIntervalSince1970)
            let day = now - now % 86_400 - 86_400
            let reporterIDs = ReportedHistory.hourlyIDs(from: day, until: now)
            try NodeFixture.makeStore(scratch.file("a.db"), ownIDs: reporterIDs)
            // Twenty minutes close to the diagnosed person's id of 10:00 yesterday: high risk.
            let met = reporterIDs.first { $0.window.contains(day + 10 * 3_600) }!.id
            try NodeFixture.makeStore(scratch.file("b.db"), encounters: [
                EncounterSpec(peer: met, times: [day + 36_300, day + 36_900, day + 37_440], rssi: [-48, -50, -52]),
            ])

            let link = try await VirtualRadio.launch(.bumble, controllers: 1)
            defer { link.stop() }
            let warned = scratch.file("warned")
            let node = try StreamingProcess(try Products.path(of: "tracer"), [
                "run", "--db", scratch.file("b.db"), "--transport", "tcp:127.0.0.1:\(link.ports[0])",
                "--server", server.url, "--server-key", server.publicKey, "--cache-dir", scratch.file("b-cache"),
                "--check-interval", "3600", "--check-jitter", "0",
                "--on-exposure", "date +%s.%N > '\(warned)'", "--log-level", "info", "--log-format", "json",
            ] + schedule, home: scratch.path, standardErrorPath: scratch.file("b.log"))
            defer {
                kill(node.pid, SIGTERM)
                if node.waitForExit(timeout: .seconds(10)) == nil { node.killHard() }
            }
            // The node's first full check (check.jitter 0: at start) finds nothing yet.
            _ = eventuallyBlocking(timeout: .seconds(20), every: .milliseconds(50)) { log(scratch).contains("exposure check done") }
            try #require(log(scratch).contains("exposure check done"), "no first check: \(log(scratch).suffix(2_000))")
            #expect(!Check.exists(warned))

            let report = try Products.tracer(
                ["report", "--db", scratch.file("a.db"), "--server", server.url, "--code", try server.issueCode(), "--yes"],
                home: scratch.path, environment: ["XDG_CONFIG_HOME": scratch.file("xdg-config")])
            try #require(report.exitCode == 0, "tracer report failed: \(report)")
            let uploaded = Date().timeIntervalSince1970
            // The hook's shell creates the file before `date` writes the time into it.
            func warnedAt() -> Double? {
                (try? String(contentsOfFile: warned, encoding: .utf8)).flatMap { Double($0.trimmingCharacters(in: .whitespacesAndNewlines)) }
            }
            _ = eventuallyBlocking(timeout: .seconds(15), every: .milliseconds(50)) { warnedAt() != nil }
            let warnedAt = try #require(warnedAt(), "no warning 15 s after the upload; node log: \(log(scratch).suffix(3_000))")
            #expect(warnedAt - uploaded < 10, "warned \(warnedAt - uploaded) s after the upload")
            // The verdict is the one `tracer check` gives: exit 3, an exposure.
            let check = try Products.tracer(
                ["check", "--db", scratch.file("b.db"), "--cache-dir", scratch.file("b-cache"), "--offline", "--server-key", server.publicKey,
                 "--quiet"], home: scratch.path, environment: ["XDG_CONFIG_HOME": scratch.file("xdg-config")])
            #expect(check.exitCode == 3, "\(check)")
        }

        static func log(_ scratch: Scratch) -> String {
            (try? String(contentsOfFile: scratch.file("b.log"), encoding: .utf8)) ?? ""
        }
    }
}
