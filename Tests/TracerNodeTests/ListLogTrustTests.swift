import Foundation
import IDRotation
import PositiveListFormat
import Testing
import TestTiers
import TracerCore
import TracerTestSupport
import TransparencyLog

extension TracerNodeTests {
    /// What a node following the list log proves across real processes (issue 39, items 2 and
    /// 4): a second server signing another list of the same size with the same key (a split
    /// view) is caught, kept as evidence and shown by `tracer status` and `tracer doctor`; a node
    /// that requires a witness's cosignature takes a checkpoint a real witness server cosigned and
    /// refuses one published while the witness was down.
    @Suite(.tags(.endToEnd)) struct ListLogTrustTests {
        struct Node {
            let scratch: Scratch
            let name: String

            var db: String { scratch.file(name + ".db") }
            var cache: String { scratch.file(name + "-cache") }

            func tracer(_ arguments: [String], environment: [String: String] = [:]) throws -> ProcessResult {
                try Products.tracer(
                    arguments, home: scratch.path, environment: ["XDG_CONFIG_HOME": scratch.file("xdg-config")].merging(environment) { $1 },
                    timeout: .seconds(60))
            }

            func check(_ server: String, key: String, _ extra: [String] = [], environment: [String: String] = [:]) throws -> ProcessResult {
                try tracer(["check", "--db", db, "--cache-dir", cache, "--server", server, "--server-key", key] + extra, environment: environment)
            }
        }

        /// Reports `ids` to `server` with a fresh code and publishes them.
        static func publish(_ ids: [OwnID], to server: ListServerProcess, scratch: Scratch, as reporter: String) throws -> String {
            try NodeFixture.makeStore(scratch.file(reporter + ".db"), ownIDs: ids)
            let report = try Products.tracer(
                ["report", "--db", scratch.file(reporter + ".db"), "--server", server.url, "--code", try server.issueCode(), "--yes"],
                home: scratch.path, environment: ["XDG_CONFIG_HOME": scratch.file("xdg-config")])
            try #require(report.exitCode == 0, "\(report)")
            let published = try server.publish()
            try #require(published.contains("Published batch"), "\(published)")
            return published
        }

        /// Twenty minutes close to `ids`' id of 10:00 yesterday: a high-risk exposure if listed.
        static func exposed(to ids: [OwnID], day: UnixSeconds) -> [EncounterSpec] {
            let met = ids.first { $0.window.contains(day + 10 * 3_600) }!.id
            return [EncounterSpec(peer: met, times: [day + 36_300, day + 36_900, day + 37_440], rssi: [-48, -50, -52])]
        }

        @Test(.timeLimit(.minutes(2)))
        func aSplitViewIsCaughtKeptAndShown() throws {
            let scratch = try Scratch()
            defer { scratch.remove() }
            let now = UnixSeconds(Date().timeIntervalSince1970)
            let day = now - now % 86_400 - 86_400
            let shown = try ListServerProcess(scratch: scratch, name: "shown")
            defer { shown.stop() }
            // Another server holding the same signing key: what an authority, or whoever holds
            // its key, would run to show some people another list.
            let other = try ListServerProcess(scratch: scratch, name: "other", serving: false)
            try FileManager.default.removeItem(atPath: other.dataDirectory + "/signing-key")
            try FileManager.default.copyItem(atPath: shown.dataDirectory + "/signing-key", toPath: other.dataDirectory + "/signing-key")
            try other.start()
            defer { other.stop() }

            let diagnosed = ReportedHistory.hourlyIDs(from: day, until: now)
            _ = try Self.publish(diagnosed, to: shown, scratch: scratch, as: "a")
            _ = try Self.publish(ReportedHistory.hourlyIDs(from: day, until: now), to: other, scratch: scratch, as: "z")

            let node = Node(scratch: scratch, name: "b")
            try NodeFixture.makeStore(node.db, encounters: Self.exposed(to: diagnosed, day: day))
            let first = try node.check(shown.url, key: shown.publicKey, ["--quiet"])
            try #require(first.exitCode == 3, "\(first)")

            // The other server's log has as many entries, with another root, under the same key.
            let split = try node.check(other.url, key: shown.publicKey)
            #expect(split.exitCode == 3, "the exposure in the list held still counts: \(split)")
            #expect(split.stdout.contains("could not be updated"), "\(split)")
            #expect(split.stdout.contains("signed two different lists of 1 entries"), "\(split)")
            let evidence = try FileManager.default.contentsOfDirectory(atPath: node.cache + "/log/evidence")
            #expect(evidence.count == 1, "\(evidence)")
            let kept = node.cache + "/log/evidence/" + (evidence.first ?? "")
            #expect(FileManager.default.contents(atPath: kept + "/held-checkpoint") == (try Check.bytes(shown.dataDirectory + "/public/log/checkpoint")))
            #expect(FileManager.default.contents(atPath: kept + "/offered-checkpoint") == (try Check.bytes(other.dataDirectory + "/public/log/checkpoint")))

            // Both notes open with the one public key, which is what makes them proof.
            let key = try PositiveListPublicKey(base64: shown.publicKey)
            let logKey = try NoteVerifierKey(name: key.defaultLogOrigin, type: .ed25519, publicKey: key.key)
            let held = try Checkpoint.open(try Check.bytes(kept + "/held-checkpoint"), origin: key.defaultLogOrigin, logKey: logKey)
            let offered = try Checkpoint.open(try Check.bytes(kept + "/offered-checkpoint"), origin: key.defaultLogOrigin, logKey: logKey)
            #expect(held.checkpoint.treeSize == offered.checkpoint.treeSize && held.checkpoint.rootHash != offered.checkpoint.rootHash)

            let status = try node.tracer(["status", "--db", node.db, "--cache-dir", node.cache])
            #expect(status.stdout.contains("SPLIT VIEW"), "\(status)")
            #expect(status.stdout.contains(kept), "\(status)")
            let doctor = try node.tracer(["doctor", "--db", node.db, "--cache-dir", node.cache, "--transport", "tcp:127.0.0.1:1"])
            #expect(doctor.stdout.contains("list log"), "\(doctor)")
            #expect(doctor.stdout.contains("signed two different lists of the same size"), "\(doctor)")
            #expect(doctor.exitCode != 0, "\(doctor)")

            // The server shown first, again: the node goes on following it.
            let again = try node.check(shown.url, key: shown.publicKey, ["--quiet"])
            #expect(again.exitCode == 3, "\(again)")
            #expect(!again.stdout.contains("could not be updated"), "\(again)")
        }

        @Test(.timeLimit(.minutes(2)))
        func aNodeRequiringAWitnessTakesOnlyCosignedCheckpoints() throws {
            let scratch = try Scratch()
            defer { scratch.remove() }
            let now = UnixSeconds(Date().timeIntervalSince1970)
            let day = now - now % 86_400 - 86_400
            let log = try ListServerProcess(scratch: scratch, name: "log", serving: false)
            let key = try PositiveListPublicKey(base64: log.publicKey)
            let logKey = try NoteVerifierKey(name: key.defaultLogOrigin, type: .ed25519, publicKey: key.key)

            // The witness: another tracer-server, with its own witness key, witnessing this log.
            let witness = try ListServerProcess(
                scratch: scratch, name: "witness", serving: false,
                settings: #""witnessedLogs": [{"key": "\#(logKey.text)"}], "witnessName": "witness.test/w1""#)
            let keygen = try witness.runServer(["witness-keygen"])
            try #require(keygen.exitCode == 0, "\(keygen)")
            let witnessKey = keygen.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
            try witness.start()
            defer { witness.stop() }
            try #"{"authorities": [{"name": "Test Health Authority", "token": "\#(log.token)"}], "witnesses": [{"url": "\#(witness.url)/v1", "key": "\#(witnessKey)"}], "witnessTimeoutSeconds": 5}"#
                .write(toFile: log.dataDirectory + "/config.json", atomically: true, encoding: .utf8)
            try log.start()
            defer { log.stop() }

            let diagnosed = ReportedHistory.hourlyIDs(from: day, until: now)
            let published = try Self.publish(diagnosed, to: log, scratch: scratch, as: "a")
            #expect(published.contains("cosigned by witness.test/w1"), "\(published)")

            let requiring = ["TRACER_LIST_WITNESSES": witnessKey, "TRACER_LIST_WITNESSES_REQUIRED": "1"]
            let node = Node(scratch: scratch, name: "b")
            try NodeFixture.makeStore(node.db, encounters: Self.exposed(to: diagnosed, day: day))
            let cosigned = try node.check(log.url, key: log.publicKey, ["--quiet"], environment: requiring)
            #expect(cosigned.exitCode == 3, "\(cosigned)")
            #expect(!cosigned.stdout.contains("could not be updated"), "\(cosigned)")

            // The witness is down at the next publication: the log publishes without it.
            witness.stop()
            let uncosigned = try Self.publish(ReportedHistory.hourlyIDs(from: day, until: now), to: log, scratch: scratch, as: "a2")
            #expect(!uncosigned.contains("cosigned by witness.test/w1"), "\(uncosigned)")
            let refused = try node.check(log.url, key: log.publicKey, [], environment: requiring)
            #expect(refused.exitCode == 3, "the exposure in the held, cosigned list still counts: \(refused)")
            #expect(refused.stdout.contains("could not be updated"), "\(refused)")
            #expect(refused.stdout.contains("0 valid cosignatures of the 1 required"), "\(refused)")

            // A node that never held a cosigned checkpoint has no list at all, never "no exposure".
            let fresh = Node(scratch: scratch, name: "c")
            try NodeFixture.makeStore(fresh.db)
            let none = try fresh.check(log.url, key: log.publicKey, [], environment: requiring)
            #expect(none.exitCode == 1, "\(none)")
            #expect(!none.stdout.contains("No exposure"), "\(none)")
            // Without the requirement the same checkpoint is taken.
            let unrequired = try fresh.check(log.url, key: log.publicKey, ["--quiet"])
            #expect(unrequired.exitCode == 0, "\(unrequired)")
        }
    }
}
