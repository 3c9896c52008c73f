import Foundation
import IDRotation
import Testing
import TestTiers
import TracerCore
import TracerTestSupport

extension TracerNodeTests {
    /// `tracer check` against a real `tracer-server` that publishes daily keys: the node fetches
    /// the key index and batch, derives the ids and applies the window rule to each.
    @Suite(.tags(.endToEnd)) struct KeyCheckCycleTests {
        /// `tracer check --json`, only the fields key matching adds or changes; decoded apart
        /// from the Matching module so that a format change shows here.
        struct KeyCheckReport: Decodable {
            struct List: Decodable {
                var batches: Int
                var keyBatches: Int?
                var updateFailure: String?
            }

            var list: List
            var idsChecked: Int
            var keysChecked: Int?
            var matchedIDs: Int
            var idsSeenOutsideTheirWindow: Int
        }

        @Test(.timeLimit(.minutes(2)))
        func publishedKeysAreMatchedInsideTheirWindowsOnly() throws {
            let scratch = try Scratch()
            defer { scratch.remove() }
            let server = try ListServerProcess(scratch: scratch)
            defer { server.stop() }
            let now = UnixSeconds(Date().timeIntervalSince1970)
            let derivation = try IDDerivation(intervalSeconds: 900)
            // The key of the day before yesterday is due whenever the test runs (yesterday's is
            // not before 02:07:30 UTC: its day's end plus the 2-hour delay); today's is held back
            // by the server.
            let pastDay = UTCDay(number: UTCDay(containing: now).number - 2)
            let today = UTCDay(containing: now)
            let pastKey = DailyKey.random()
            let todaysKey = DailyKey.random()
            try server.appendKeys([
                DailyKeyRecord(day: pastDay, intervalSeconds: 900, key: pastKey), DailyKeyRecord(day: today, intervalSeconds: 900, key: todaysKey),
            ])
            try server.publish()

            // 10:00 that day is window 40 of the day: met inside it, a match. The id of 10:15
            // (window 41), replayed at 20:15: seen outside its window. Today's id (unpublished):
            // nothing.
            let window = derivation.windowIndices(of: pastDay).lowerBound + 40
            let start = derivation.nominalStart(ofWindowIndex: window)
            let metID = derivation.id(key: pastKey, windowIndex: window)
            let todayStart = derivation.nominalStart(ofWindowIndex: derivation.windowIndices(of: today).lowerBound)
            let db = scratch.file("b.db")
            try NodeFixture.makeStore(db, encounters: [
                // 14 near minutes: an exposure under the default risk.low_minutes (5.8).
                EncounterSpec(peer: metID, times: [start + 60, start + 840], rssi: [-50, -50]),
                EncounterSpec(
                    peer: derivation.id(key: pastKey, windowIndex: window + 1), times: [start + 36_900, start + 37_200], rssi: [-50, -50]),
                EncounterSpec(
                    peer: derivation.id(key: todaysKey, windowIndex: derivation.windowIndices(of: today).lowerBound),
                    times: [todayStart + 60, todayStart + 120], rssi: [-50, -50]),
            ])

            let result = try Products.tracer(
                ["check", "--json", "--db", db, "--cache-dir", scratch.file("b-cache"), "--server", server.url, "--server-key", server.publicKey],
                home: scratch.path, environment: ["XDG_CONFIG_HOME": scratch.file("xdg-config")], timeout: .seconds(60))
            // 3: exposure found (see ExposureCheckCycleTests).
            try #require(result.exitCode == 3 && !result.signaled, "\(result)")
            let report = try JSONDecoder().decode(KeyCheckReport.self, from: Data(result.stdout.utf8))
            #expect(report.list.updateFailure == nil)
            #expect(report.list.keyBatches == 1)
            // Padding may add fake keys; the default multiplier 1.0 adds none.
            #expect(report.keysChecked == 1)
            #expect(report.idsChecked == 96)
            #expect(report.matchedIDs == 1)
            #expect(report.idsSeenOutsideTheirWindow == 1)

            // The words say the same; the second check is answered from the cache (304s).
            let plain = try Products.tracer(
                ["check", "--quiet", "--db", db, "--cache-dir", scratch.file("b-cache"), "--server", server.url, "--server-key", server.publicKey],
                home: scratch.path, environment: ["XDG_CONFIG_HOME": scratch.file("xdg-config")], timeout: .seconds(60))
            #expect(plain.exitCode == 3, "\(plain)")
            #expect(plain.stdout.contains("96 ids (including those of 1 published daily key) checked"), "\(plain)")
            #expect(plain.stdout.contains("Exposure found"), "\(plain)")
        }

        /// Issue 25, item 1, on the log (issue 39): after a node followed the log, a 404 for its
        /// checkpoint (a CDN caching the origin's 404, or a hostile one) is a failed update. A
        /// node whose exposure came from a published key still exits 3, with a warning; a node
        /// without exposure exits 1, never 0. The CDN is the fixture server, serving a copy of
        /// the real server's files.
        @Test(.timeLimit(.minutes(2)))
        func aMissingCheckpointNeverMeansNoExposure() throws {
            let scratch = try Scratch()
            defer { scratch.remove() }
            let server = try ListServerProcess(scratch: scratch)
            defer { server.stop() }
            let now = UnixSeconds(Date().timeIntervalSince1970)
            let derivation = try IDDerivation(intervalSeconds: 900)
            let pastDay = UTCDay(number: UTCDay(containing: now).number - 2)
            let pastKey = DailyKey.random()
            try server.appendKeys([DailyKeyRecord(day: pastDay, intervalSeconds: 900, key: pastKey)])
            try server.publish()
            let window = derivation.windowIndices(of: pastDay).lowerBound + 40
            let start = derivation.nominalStart(ofWindowIndex: window)
            try NodeFixture.makeStore(scratch.file("b.db"), encounters: [
                // 14 near minutes: an exposure under the default risk.low_minutes (5.8).
                EncounterSpec(peer: derivation.id(key: pastKey, windowIndex: window), times: [start + 60, start + 840], rssi: [-50, -50]),
            ])
            try NodeFixture.makeStore(scratch.file("c.db"))
            func check(_ node: String, server url: String) throws -> ProcessResult {
                try Products.tracer(
                    ["check", "--quiet", "--db", scratch.file(node + ".db"), "--cache-dir", scratch.file(node + "-cache"), "--server", url,
                     "--server-key", server.publicKey],
                    home: scratch.path, environment: ["XDG_CONFIG_HOME": scratch.file("xdg-config")], timeout: .seconds(60))
            }
            let (exposedNode, unexposedNode, missing) = ("b", "c", "log/checkpoint")
            do {
                let exposed = try check(exposedNode, server: server.url)
                try #require(exposed.exitCode == 3, "\(exposed)")
                let unexposed = try check(unexposedNode, server: server.url)
                try #require(unexposed.exitCode == 0, "\(unexposed)")

                let copy = scratch.file("cdn-" + exposedNode)
                try FileManager.default.copyItem(atPath: server.dataDirectory + "/public", toPath: copy)
                try #"{"\#(missing)": {"status": 404}}"#.write(toFile: copy + "/behaviour.json", atomically: true, encoding: .utf8)
                let cdn = try HTTPFixtureServer(listRoot: copy)
                defer { cdn.stop() }
                let stillExposed = try check(exposedNode, server: cdn.url("/list"))
                #expect(stillExposed.exitCode == 3, "\(missing): \(stillExposed)")
                #expect(stillExposed.stdout.contains("Warning: the list could not be updated"), "\(missing): \(stillExposed)")
                #expect(stillExposed.stdout.contains("Exposure found"), "\(missing): \(stillExposed)")
                let notUpdated = try check(unexposedNode, server: cdn.url("/list"))
                #expect(notUpdated.exitCode == 1, "a 404 for \(missing) gave \(notUpdated.exitCode): \(notUpdated)")
                #expect(notUpdated.stdout.contains("HTTP 404"), "\(missing): \(notUpdated)")
            }
        }
    }
}
