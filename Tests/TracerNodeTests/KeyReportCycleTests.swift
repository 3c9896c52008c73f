import Foundation
import IDRotation
import Testing
import TestTiers
import TracerCore
import TracerTestSupport

extension TracerNodeTests {
    /// `tracer report` choosing between ids and daily keys against real `tracer-server`
    /// processes, and the key cycle end to end: `tracer report --keys`, publication no earlier
    /// than the day's end plus the delay, `tracer check` matching the derived ids inside their
    /// windows only.
    @Suite(.tags(.endToEnd)) struct KeyReportCycleTests {
        typealias KeyCheckReport = KeyCheckCycleTests.KeyCheckReport

        /// A node's store holding the daily keys of `days` (interval 900) and, when `ids`, an id
        /// for every hour of today so far (random, as from before daily keys).
        static func reporterStore(_ path: String, keysOf days: [UTCDay], ids: Bool = false, now: UnixSeconds) throws -> [UTCDay: DailyKey] {
            let store = try Check.openStore(path)
            var keys: [UTCDay: DailyKey] = [:]
            for day in days {
                keys[day] = try store.dailyKey(for: day, intervalSeconds: 900, recordingIfAbsent: DailyKey.random())
            }
            if ids {
                for owned in ReportedHistory.hourlyIDs(from: now - now % 86_400, until: now) { try store.recordOwnID(owned) }
                // At least one id, even just after midnight.
                try store.recordOwnID(OwnID(id: UserID.random(), window: IDWindow(start: now - 600, end: now - 300)))
            }
            return keys
        }

        static func tracer(_ scratch: Scratch, _ arguments: [String]) throws -> ProcessResult {
            try Products.tracer(arguments, home: scratch.path, environment: ["XDG_CONFIG_HOME": scratch.file("xdg-config")], timeout: .seconds(60))
        }

        static func report(_ scratch: Scratch, _ db: String, _ server: ListServerProcess, key: Bool = true, _ extra: [String]) throws -> ProcessResult {
            try tracer(scratch, try reportArguments(db, server, key: key) + extra)
        }

        /// `tracer` at a terminal: util-linux `script` gives it a pseudo-terminal and types
        /// `input` into it. What the command prints, its prompts and the echoed answers all come
        /// back on stdout.
        static func tracerAtATerminal(_ scratch: Scratch, _ arguments: [String], typing input: String) throws -> ProcessResult {
            func quoted(_ text: String) -> String { "'" + text.replacingOccurrences(of: "'", with: #"'\''"#) + "'" }
            let command = ([try Products.path(of: "tracer")] + arguments).map(quoted).joined(separator: " ")
            let typed = scratch.file("typed-" + UUID().uuidString)
            try input.write(toFile: typed, atomically: true, encoding: .utf8)
            return try Products.run(
                "/bin/sh", ["-c", "exec /usr/bin/script -qec \(quoted(command)) /dev/null < \(quoted(typed))"], home: scratch.path,
                environment: ["XDG_CONFIG_HOME": scratch.file("xdg-config")], timeout: .seconds(60))
        }

        /// Runs `body` with a running server (more config.json `settings`, if any) and node A's
        /// store at `scratch.file("a.db")`: today's daily key and ids of today.
        static func withReporter(settings: String = "", _ body: (Scratch, ListServerProcess) throws -> Void) throws {
            let scratch = try Scratch()
            defer { scratch.remove() }
            let server = try ListServerProcess(scratch: scratch, settings: settings)
            defer { server.stop() }
            let now = UnixSeconds(Date().timeIntervalSince1970)
            _ = try reporterStore(scratch.file("a.db"), keysOf: [UTCDay(containing: now)], ids: true, now: now)
            try body(scratch, server)
        }

        /// `tracer report` for node `db` with a fresh upload code, and the server's public key
        /// unless `key` is false.
        static func reportArguments(_ db: String, _ server: ListServerProcess, key: Bool = true) throws -> [String] {
            ["report", "--db", db, "--server", server.url, "--code", try server.issueCode()] + (key ? ["--server-key", server.publicKey] : [])
        }

        // MARK: The cycle, across processes

        @Test(.timeLimit(.minutes(2)))
        func reportedKeysArePublishedAfterTheirDayAndMatchedInsideTheirWindowsOnly() throws {
            let scratch = try Scratch()
            defer { scratch.remove() }
            let server = try ListServerProcess(scratch: scratch)
            defer { server.stop() }
            let now = UnixSeconds(Date().timeIntervalSince1970)
            let today = UTCDay(containing: now)
            // Two days ago: due (its day ended plus the 2-hour delay) whatever the time of day.
            let past = UTCDay(number: today.number - 2)
            let keys = try Self.reporterStore(scratch.file("a.db"), keysOf: [past, today], now: now)

            let reported = try Self.report(scratch, scratch.file("a.db"), server, ["--keys", "--yes"])
            try #require(reported.exitCode == 0, "\(reported)")
            #expect(reported.stdout.contains("link those sightings to each other"), "the trade-off is stated: \(reported)")
            #expect(reported.stdout.contains("This uploads 2 daily keys"), "\(reported)")
            #expect(reported.stdout.contains("Uploaded 2 daily keys (2 new to the server)"), "\(reported)")

            // Today's key waits for its day to end plus the delay.
            let first = try server.publish()
            #expect(first.contains("Published key batch 1 with 1 keys"), "\(first)")
            #expect(first.contains("1 keys wait"), "\(first)")

            // Node B met A in the past day's window 40 (a match), heard the past day's window-41
            // id replayed ten hours later, met A today, and heard an id of today's key the day
            // before its window (outside it).
            let derivation = try IDDerivation(intervalSeconds: 900)
            let pastWindow = derivation.windowIndices(of: past).lowerBound + 40
            let pastStart = derivation.nominalStart(ofWindowIndex: pastWindow)
            let todayWindow = derivation.windowIndices(of: today).lowerBound
            let todayStart = derivation.nominalStart(ofWindowIndex: todayWindow)
            let pastKey = try #require(keys[past]), todaysKey = try #require(keys[today])
            try NodeFixture.makeStore(scratch.file("b.db"), encounters: [
                // 14 near minutes: an exposure under the default risk.low_minutes (5.8).
                EncounterSpec(peer: derivation.id(key: pastKey, windowIndex: pastWindow), times: [pastStart + 60, pastStart + 840], rssi: [-50, -50]),
                EncounterSpec(
                    peer: derivation.id(key: pastKey, windowIndex: pastWindow + 1), times: [pastStart + 36_900, pastStart + 37_200], rssi: [-50, -50]),
                EncounterSpec(peer: derivation.id(key: todaysKey, windowIndex: todayWindow), times: [todayStart + 60, todayStart + 300], rssi: [-50, -50]),
                EncounterSpec(
                    peer: derivation.id(key: todaysKey, windowIndex: todayWindow + 40), times: [pastStart + 86_400, pastStart + 86_700], rssi: [-50, -50]),
            ])
            func check() throws -> KeyCheckReport {
                let result = try Self.tracer(scratch, [
                    "check", "--json", "--db", scratch.file("b.db"), "--cache-dir", scratch.file("b-cache"),
                    "--server", server.url, "--server-key", server.publicKey,
                ])
                // 3: exposure found.
                try #require(result.exitCode == 3 && !result.signaled, "\(result)")
                return try JSONDecoder().decode(KeyCheckReport.self, from: Data(result.stdout.utf8))
            }
            let before = try check()
            #expect(before.keysChecked == 1)
            #expect(before.matchedIDs == 1, "only the past day's key is published")
            #expect(before.idsSeenOutsideTheirWindow == 1, "the replayed id")

            // Today's key is due at the end of its last window (midnight), plus half a window of
            // jitter, plus the delay. The demo clock (publish --demo-key-clock) stands in for the
            // wait: one second before that it still holds the key, at that time it releases it.
            let due = today.end + 450 + 7_200
            let early = try server.publish(extra: ["--demo-key-clock", String(due - 1)])
            #expect(!early.stdout.contains("Published key batch"), "\(early)")
            #expect(early.stdout.contains("1 keys wait"), "\(early)")
            #expect(early.stderr.contains("WARNING: --demo-key-clock"), "\(early)")
            let onTime = try server.publish(extra: ["--demo-key-clock", String(due)])
            #expect(onTime.stdout.contains("Published key batch 2 with 1 keys"), "\(onTime)")

            let after = try check()
            #expect(after.list.keyBatches == 2)
            #expect(after.keysChecked == 2)
            #expect(after.matchedIDs == 2, "today's encounter, inside its window")
            #expect(after.idsSeenOutsideTheirWindow == 2, "the replayed id and today's id heard the day before")
        }

        // MARK: Following the server's setting

        @Test(.timeLimit(.minutes(2)))
        func aServerTakingIDsOnlyRefusesKeysBeforeAnythingIsSent() throws {
            try Self.withReporter(settings: #""acceptUploads": "ids""#) { scratch, server in
                let keys = try Self.report(scratch, scratch.file("a.db"), server, ["--keys", "--yes"])
                #expect(keys.exitCode == 1, "\(keys)")
                #expect(keys.stderr.contains("does not accept daily keys"), "\(keys)")
                #expect(keys.stderr.contains("--ids"), "\(keys)")
                #expect(!keys.stdout.contains("Uploaded"), "\(keys)")

                let ids = try Self.report(scratch, scratch.file("a.db"), server, ["--yes"])
                #expect(ids.exitCode == 0, "\(ids)")
                #expect(ids.stdout.contains("accepts only ids"), "\(ids)")
                #expect(ids.stdout.contains("Uploaded"), "\(ids)")
                #expect(ids.stdout.contains(" ids ("), "\(ids)")
                let published = try server.publish()
                #expect(published.contains("Published batch 1"), "\(published)")
                #expect(!published.contains("keys wait"), "\(published)")
            }
        }

        @Test(.timeLimit(.minutes(2)))
        func aServerTakingKeysOnlyGetsThemOnlyByTheUsersChoice() throws {
            try Self.withReporter(settings: #""acceptUploads": "keys""#) { scratch, server in
                // --yes alone never uploads keys.
                let yes = try Self.report(scratch, scratch.file("a.db"), server, ["--yes"])
                #expect(yes.exitCode == 1, "\(yes)")
                #expect(yes.stderr.contains("accepts only daily keys"), "\(yes)")
                #expect(yes.stderr.contains("--keys"), "\(yes)")
                #expect(yes.stderr.contains("tracer report --help"), "\(yes)")

                let ids = try Self.report(scratch, scratch.file("a.db"), server, ["--ids", "--yes"])
                #expect(ids.exitCode == 1, "\(ids)")
                #expect(ids.stderr.contains("does not accept ids"), "\(ids)")

                // Without the public key the node cannot read the setting; the server's refusal
                // says the same.
                let unread = try Self.report(scratch, scratch.file("a.db"), server, key: false, ["--yes"])
                #expect(unread.exitCode == 1, "\(unread)")
                #expect(unread.stdout.contains("cannot read which"), "\(unread)")
                #expect(unread.stderr.contains("does not accept ids"), "\(unread)")
                #expect(try server.publish().contains("No new ids to publish."))

                // At a terminal the server's one kind is named, and the typed confirmation names it too.
                let declined = try Self.tracerAtATerminal(scratch, try Self.reportArguments(scratch.file("a.db"), server), typing: "no\n")
                #expect(declined.exitCode == 1, "\(declined)")
                #expect(declined.stdout.contains("accepts only daily keys, so daily keys are uploaded"), "\(declined)")
                #expect(declined.stdout.contains("Type 'yes' to upload your daily keys"), "\(declined)")
                #expect(declined.stdout.contains("Nothing was uploaded."), "\(declined)")
                let afterDeclining = try server.publish()
                #expect(!afterDeclining.contains("keys wait"), "a declined upload sends nothing: \(afterDeclining)")

                let keys = try Self.report(scratch, scratch.file("a.db"), server, ["--keys", "--yes"])
                #expect(keys.exitCode == 0, "\(keys)")
                #expect(keys.stdout.contains("Uploaded 1 daily key (1 new to the server)"), "\(keys)")
                #expect(try server.publish().contains("1 keys wait"))
            }
        }

        @Test(.timeLimit(.minutes(2)))
        func atATerminalTheUserIsAskedWhichToUpload() throws {
            try Self.withReporter { scratch, server in
                // Anything but a kind cancels.
                let cancelled = try Self.tracerAtATerminal(scratch, try Self.reportArguments(scratch.file("a.db"), server), typing: "both\n")
                #expect(cancelled.exitCode == 1, "\(cancelled)")
                #expect(cancelled.stdout.contains("link those sightings to each other"), "the trade-off comes before the question: \(cancelled)")
                #expect(cancelled.stdout.contains("Type 'ids' or 'keys'"), "\(cancelled)")
                #expect(cancelled.stdout.contains("Nothing was uploaded."), "\(cancelled)")

                let chosen = try Self.tracerAtATerminal(scratch, try Self.reportArguments(scratch.file("a.db"), server), typing: "keys\nyes\n")
                #expect(chosen.exitCode == 0, "\(chosen)")
                #expect(chosen.stdout.contains("This uploads 1 daily key "), "\(chosen)")
                #expect(chosen.stdout.contains("Uploaded 1 daily key (1 new to the server)"), "\(chosen)")
                let published = try server.publish()
                #expect(published.contains("1 keys wait"), "\(published)")
                #expect(published.contains("No new ids to publish."), "\(published)")
            }
        }

        @Test(.timeLimit(.minutes(2)))
        func withBothAcceptedYesMeansIDsAndNoTerminalMeansNoUpload() throws {
            try Self.withReporter { scratch, server in
                // No terminal to ask on and no --yes: nothing leaves the machine.
                let unasked = try Self.report(scratch, scratch.file("a.db"), server, ["--keys"])
                #expect(unasked.exitCode == 1, "\(unasked)")
                #expect(unasked.stderr.contains("--yes"), "\(unasked)")

                let yes = try Self.report(scratch, scratch.file("a.db"), server, ["--yes"])
                #expect(yes.exitCode == 0, "\(yes)")
                #expect(yes.stdout.contains("daily keys  one key a day"), "the trade-off is stated: \(yes)")
                #expect(yes.stdout.contains(" ids ("), "\(yes)")
                let published = try server.publish()
                #expect(published.contains("Published batch 1"), "\(published)")
                #expect(!published.contains("keys wait"), "no key was uploaded: \(published)")

                let both = try Self.tracer(scratch, ["report", "--keys", "--ids", "--yes", "--db", scratch.file("a.db"), "--code", "X"])
                #expect(both.exitCode == 2, "\(both)")
            }
        }
    }
}
