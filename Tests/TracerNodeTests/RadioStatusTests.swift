import Foundation
import Testing
import TestTiers
import TracerTestSupport
#if canImport(Glibc)
import Glibc
#endif

extension TracerNodeTests {
    /// `tracer status` and `tracer doctor` on a status file that says the node cannot advertise:
    /// the file is written here as a running node would (this process's pid, a fresh heartbeat).
    @Suite(.tags(.endToEnd)) struct RadioStatus {
        static let refusal = "controller: HCI command LE Set Advertising Enable failed: Command Disallowed (0x0C)"
        static let outageStart = Int64(Date().timeIntervalSince1970) - 725

        /// A status file of a running node; `extra` adds (or, as NSNull, leaves out) fields.
        static func writeStatus(beside database: SeededDatabase, _ extra: [String: Any] = [:]) throws {
            let now = Int64(Date().timeIntervalSince1970)
            var status: [String: Any] = [
                "pid": Int(getpid()), "startedAt": now - 3600, "updatedAt": now, "transport": "tcp:127.0.0.1:9",
                "state": "running", "controller": ["address": "F0:00:00:00:00:01", "hciVersion": 9, "manufacturer": 0x0A],
            ]
            status.merge(extra) { $1 }
            let data = try JSONSerialization.data(withJSONObject: status)
            try data.write(to: URL(fileURLWithPath: database.path + "-status.json"))
        }

        static var advertisingOutage: [String: Any] { [
            "radio": ["advertising": ["since": outageStart, "reason": refusal]],
            "controllerResets": ["count": 2, "lastAt": outageStart - 60, "lastReason": "advertising has been off too long"],
        ] }

        /// What `Output.localTime` prints, in the zone the child inherits.
        static func localTime(_ time: Int64) -> String {
            let formatter = DateFormatter()
            formatter.locale = Locale(identifier: "en_US_POSIX")
            formatter.dateFormat = "yyyy-MM-dd HH:mm:ss"
            return formatter.string(from: Date(timeIntervalSince1970: TimeInterval(time)))
        }

        @Test func statusSaysDegradedWithSinceAndReason() throws {
            let database = try SeededDatabase()
            defer { database.remove() }
            try Self.writeStatus(beside: database, Self.advertisingOutage)

            let result = try database.tracer(["status"])
            #expect(result.exitCode == 1, "a degraded node's status must exit 1: \(result)")
            let text = result.stdout
            #expect(text.hasPrefix("Node:           degraded — not advertising since \(Self.localTime(Self.outageStart)) (12 min"), "\(text)")
            #expect(text.contains(Self.refusal), "\(text)")
            #expect(!text.contains("Node:           running"), "a node that cannot advertise looks healthy: \(text)")
            #expect(text.contains("Controller resets: 2 (last \(Self.localTime(Self.outageStart - 60)): advertising has been off too long)"), "\(text)")

            let jsonResult = try database.tracer(["status", "--json"])
            #expect(jsonResult.exitCode == 1)
            let json = try Check.json(jsonResult.stdout)
            #expect(json["nodeRunning"] as? Bool == true)
            #expect(json["nodeDegraded"] as? Bool == true, "\(json)")
            #expect((json["nodeProblems"] as? [String])?.first?.hasPrefix("not advertising since") == true, "\(json)")
            let node = try #require(json["node"] as? [String: Any])
            let advertising = try #require((node["radio"] as? [String: Any])?["advertising"] as? [String: Any], "\(node)")
            #expect((advertising["since"] as? NSNumber)?.int64Value == Self.outageStart)
            #expect(advertising["reason"] as? String == Self.refusal)
            #expect((node["radio"] as? [String: Any])?["scanning"] == nil)
            #expect((node["controllerResets"] as? [String: Any])?["count"] as? Int == 2, "\(node)")
        }

        @Test func doctorFailsAdvertisingWithAFixWhileTheRunningNodeReportsAnOutage() throws {
            let database = try SeededDatabase()
            defer { database.remove() }
            try Self.writeStatus(beside: database, Self.advertisingOutage)
            let arguments = ["doctor", "--transport", "tcp:127.0.0.1:9"]

            let text = try database.tracer(arguments)
            #expect(text.exitCode == 1, "\(text)")
            #expect(text.stdout.contains("[skip] transport: a running node (pid \(getpid()))"), "\(text)")
            #expect(text.stdout.contains(
                "[FAIL] advertising: the running node (pid \(getpid())) has not been advertising since \(Self.localTime(Self.outageStart))"), "\(text)")
            #expect(text.stdout.contains(
                "fix: The controller refuses to advertise: \(Self.refusal); the node resets the controller after a minute"), "\(text)")
            #expect(!text.stdout.contains("[FAIL] scanning"), "the node reports no scanning outage: \(text)")

            let json = try database.tracer(arguments + ["--json"])
            #expect(json.exitCode == 1)
            let checks = try #require(try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [[String: Any]], "\(json)")
            let advertising = try #require(checks.first { $0["name"] as? String == "advertising" }, "\(checks)")
            #expect(advertising["outcome"] as? String == "fail")
            #expect((advertising["fix"] as? String)?.contains(Self.refusal) == true, "\(advertising)")
        }

        /// Issue 38: the running node cannot record its next id (a full disk), so it does not
        /// advertise, and its encounter log keeps sightings in memory. Status leads with it and
        /// exits 1; doctor fails both with the fix.
        @Test func statusAndDoctorLeadWithAStoreThatCannotRecord() throws {
            let database = try SeededDatabase()
            defer { database.remove() }
            let problem = "the disk holding \(database.path) is full; free some space. The node advertises again once it can record its next id."
            let encounterProblem = "the disk holding \(database.path) is full; free some space. Encounters are kept in memory and written when the database can be written again."
            try Self.writeStatus(beside: database, [
                "state": "reconnecting", "lastError": "not advertising: the next id could not be recorded: \(problem)",
                "reconnectingSince": Self.outageStart,
                "idNotRecorded": ["since": Self.outageStart, "problem": problem],
                "encountersNotWritten": ["since": Self.outageStart + 5, "problem": encounterProblem],
            ])
            let result = try database.tracer(["status"])
            #expect(result.exitCode == 1, "\(result)")
            let lines = result.stdout.split(separator: "\n").map(String.init)
            let first = lines.first ?? ""
            #expect(first.hasPrefix("Node:           degraded — not advertising since \(Self.localTime(Self.outageStart)) (12 min")
                        && first.hasSuffix(" ago): \(problem)"), "\(result)")
            #expect(lines.dropFirst().first?.hasPrefix("                not writing encounters since \(Self.localTime(Self.outageStart + 5))") == true, "\(result)")

            let doctor = try database.tracer(["doctor", "--transport", "tcp:127.0.0.1:9"])
            #expect(doctor.exitCode == 1, "\(doctor)")
            #expect(doctor.stdout.contains("[FAIL] ids: the running node (pid \(getpid())) cannot record its next id, so it has not been advertising since \(Self.localTime(Self.outageStart))"), "\(doctor)")
            #expect(doctor.stdout.contains("fix: The disk holding \(database.path) is full; free some space. The node advertises again once it can record its next id. Then the node retries by itself"), "\(doctor)")
            #expect(doctor.stdout.contains("[FAIL] encounter log: the running node (pid \(getpid())) cannot write encounters since"), "\(doctor)")

            // Space returned: the node records again, and the status says running, exit 0.
            try Self.writeStatus(beside: database, ["radio": [String: Any]()])
            let healthy = try database.tracer(["status"])
            #expect(healthy.exitCode == 0 && healthy.stdout.hasPrefix("Node:           running since"), "\(healthy)")
        }

        /// A node whose status file could not be updated for minutes (its heartbeat is stale) while
        /// its pid exists is not called "not running": status says since when it has not heard
        /// from it and why that may be, and exits 1.
        @Test func aStaleStatusOfAProcessThatStillExistsIsNotCalledNotRunning() throws {
            let database = try SeededDatabase()
            defer { database.remove() }
            let stale = Int64(Date().timeIntervalSince1970) - 200
            try Self.writeStatus(beside: database, ["updatedAt": stale])
            let result = try database.tracer(["status"])
            #expect(result.exitCode == 1, "\(result)")
            #expect(result.stdout.hasPrefix("Node:           not heard from since \(Self.localTime(stale)) (3 min"), "\(result)")
            #expect(result.stdout.contains("though pid \(getpid()) still exists: its status file \(database.path)-status.json could not be updated; the disk holding it"), "\(result)")
            #expect(result.stdout.contains("or it hung, or after a reboot the pid is another process's: check `ps -p \(getpid())`"), "\(result)")
            let json = try Check.json(database.tracer(["status", "--json"]).stdout)
            #expect(json["nodeRunning"] as? Bool == false && (json["nodeProblems"] as? [String])?.count == 1, "\(json)")

            // It may still hold its controller: doctor fails with the silence instead of running
            // radio checks, and calibrate does not take the controller.
            let doctor = try database.tracer(["doctor", "--transport", "tcp:127.0.0.1:9"])
            #expect(doctor.exitCode == 1, "\(doctor)")
            #expect(doctor.stdout.contains("[FAIL] transport: the node not heard from since \(Self.localTime(stale))"), "\(doctor)")
            #expect(doctor.stdout.contains("Radio checks skipped"), "\(doctor)")
            let calibrate = try database.tracer(["calibrate", "--transport", "tcp:127.0.0.1:9", "--seconds", "1"])
            #expect(calibrate.exitCode != 0 && calibrate.stderr.contains("A running node (pid \(getpid())) holds tcp:127.0.0.1:9"), "\(calibrate)")
        }

        /// A node reconnecting to its controller is shown at once, but counted as a problem (exit 1)
        /// only after `reconnectingIsAProblemAfter` (10 s): a routine controller reset, under 2 s and
        /// frequent in crowds, must not make monitoring that watches `tracer status` flap.
        @Test func reconnectingIsAProblemOnlyOnceItLasts() throws {
            let database = try SeededDatabase()
            defer { database.remove() }
            let now = Int64(Date().timeIntervalSince1970)
            let reason = "the controller is being reset: advertising has been off too long"
            for (label, since, problem) in [("a routine reset", now - 2, false), ("an older node's file", nil, false), ("a controller gone 30 s", now - 30, true)] as [(String, Int64?, Bool)] {
                var extra: [String: Any] = ["state": "reconnecting", "lastError": reason]
                if let since { extra["reconnectingSince"] = since }
                try Self.writeStatus(beside: database, extra)
                let result = try database.tracer(["status"])
                #expect(result.exitCode == (problem ? 1 : 0), "\(label): \(result)")
                #expect(result.stdout.hasPrefix("Node:           reconnecting to tcp:127.0.0.1:9"), "\(label): \(result)")
                #expect(result.stdout.contains(reason), "\(label): \(result)")
                let json = try Check.json(database.tracer(["status", "--json"]).stdout)
                let problems = json["nodeProblems"] as? [String] ?? []
                #expect(problems.count == (problem ? 1 : 0), "\(label): \(json)")
                #expect(json["nodeDegraded"] as? Bool == problem, "\(label): \(json)")
                if problem {
                    #expect(problems.first?.hasPrefix("not advertising or scanning since \(Self.localTime(now - 30))") == true, "\(label): \(problems)")
                }
            }
        }

        /// Files of nodes from before the radio condition, and healthy ones, say "running"; doctor passes.
        @Test func oldAndHealthyStatusFilesSayRunning() throws {
            let database = try SeededDatabase()
            defer { database.remove() }
            for (label, extra) in [("old format", [:]), ("healthy", ["radio": [String: Any]()])] as [(String, [String: Any])] {
                try Self.writeStatus(beside: database, extra)
                let text = try database.succeeding(["status"]).stdout
                #expect(text.contains("Node:           running since"), "\(label): \(text)")
                #expect(!text.contains("degraded") && !text.contains("Controller resets"), "\(label): \(text)")
                let json = try Check.json(database.succeeding(["status", "--json"]).stdout)
                #expect(json["nodeRunning"] as? Bool == true && json["nodeDegraded"] as? Bool == false, "\(label): \(json)")

                let doctor = try database.tracer(["doctor", "--transport", "tcp:127.0.0.1:9"])
                #expect(doctor.exitCode == 0, "\(label): \(doctor)")
                #expect(!doctor.stdout.contains("[FAIL]"), "\(label): \(doctor)")
            }
        }
        /// The radio's account (issue 40) under the controller: the receiver's share and its parts,
        /// advertising and connections, for the last hour and day; a day the node has not run for
        /// in full says how much of it the figures cover. Files of older nodes show no such line.
        @Test func statusShowsTheRadiosTimeForTheHourAndTheDay() throws {
            let database = try SeededDatabase()
            defer { database.remove() }
            func summary(observed: Double, scanning: Double, initiating: Double, links: Double, events: Int) -> [String: Any] { [
                "observedSeconds": observed, "receiverSeconds": scanning + initiating + links, "scanningSeconds": scanning,
                "initiatingSeconds": initiating, "linkListeningSeconds": links, "advertisingSeconds": observed,
                "advertisingEvents": events, "connectionAttempts": 14, "connections": 17, "linkSeconds": 9.5,
            ] }
            try Self.writeStatus(beside: database, ["radioTime": [
                "lastHour": summary(observed: 3600, scanning: 300, initiating: 14.4, links: 0.36, events: 14_117),
                "lastDay": summary(observed: 5400, scanning: 450, initiating: 18, links: 0.5, events: 21_176),
            ]])
            let text = try database.succeeding(["status"]).stdout
            #expect(text.contains("Radio:          last hour: receiver on 8.7 % (scanning 8.3 %, connecting 0.4 %, links 0.0 %); "
                + "advertising 100.0 %, 14117 events; 17 connections, 14 attempts\n"), "\(text)")
            #expect(text.contains("                last day (this run's 1 h 30 min): receiver on 8.7 % (scanning 8.3 %, connecting 0.3 %, links 0.0 %); "
                + "advertising 100.0 %, 21176 events; 17 connections, 14 attempts\n"), "\(text)")
            let json = try Check.json(database.succeeding(["status", "--json"]).stdout)
            let hour = ((json["node"] as? [String: Any])?["radioTime"] as? [String: Any])?["lastHour"] as? [String: Any]
            #expect((hour?["advertisingEvents"] as? NSNumber)?.intValue == 14_117, "\(json)")

            try Self.writeStatus(beside: database)
            #expect(!(try database.succeeding(["status"]).stdout.contains("Radio:")))
        }
    }
}
