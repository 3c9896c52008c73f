import Foundation
import IDRotation
import PositiveListFormat
import PositiveListServer
import ServerStorage
import Testing
import TestTiers
import TracerCore
import ServerTestSupport
import TracerTestSupport
#if canImport(Glibc)
import Glibc
#endif

@Suite(.tags(.endToEnd)) struct CLITests {
    /// A fixture whose data directory has no key yet, as on a new server.
    func freshFixture() throws -> ServerFixture {
        let fixture = try ServerFixture()
        try FileManager.default.removeItem(atPath: fixture.paths.signingKey)
        return fixture
    }

    @Test func keygenWritesAPrivateKeyPrintsThePublicKeyAndRefusesToOverwrite() throws {
        let fixture = try freshFixture()
        defer { fixture.remove() }
        let first = try ServerCLI.run(["keygen"], fixture: fixture)
        #expect(first.exitCode == 0, "\(first)")
        let printed = try PositiveListPublicKey(base64: first.stdout)
        let key = try SigningKeyFile.load(from: fixture.paths.signingKey)
        #expect(PositiveListPublicKey(key.publicKey) == printed)
        let mode = try FileManager.default.attributesOfItem(atPath: fixture.paths.signingKey)[.posixPermissions] as? Int
        #expect(mode == 0o600)

        let second = try ServerCLI.run(["keygen"], fixture: fixture)
        #expect(second.exitCode == 1)
        #expect(second.stderr.contains("already exists"))
        #expect(PositiveListPublicKey(try SigningKeyFile.load(from: fixture.paths.signingKey).publicKey) == printed)
    }

    @Test func appendTakesKeyHistoriesAndPublishPublishesTheDueKeys() throws {
        let fixture = try ServerFixture()
        defer { fixture.remove() }
        try fixture.writeConfiguration()
        let today = UTCDay(containing: SystemWallClock().now()).number
        let history = fixture.paths.dataDirectory + "/keys.json"
        let keys = [SubmittedKey(day: today, intervalSeconds: 900, key: DailyKey.random().hex),
                    SubmittedKey(day: today - 1, intervalSeconds: 900, key: DailyKey.random().hex),
                    SubmittedKey(day: today - 2, intervalSeconds: 900, key: DailyKey.random().hex)]
        try JSONEncoder().encode(SubmittedKeyHistory(keys: keys)).write(to: URL(fileURLWithPath: history))

        let append = try ServerCLI.run(["append", "--keys", "--authority", "Health Authority A", history], fixture: fixture)
        #expect(append.exitCode == 0, "\(append)")
        #expect(append.stdout.contains("Stored 3 new keys"))
        // Read as ids, the same file is refused and says what an id history looks like.
        let asIDs = try ServerCLI.run(["append", "--authority", "Health Authority A", history], fixture: fixture)
        #expect(asIDs.exitCode != 0)
        #expect(asIDs.stderr.contains("ids is missing"))

        let publish = try ServerCLI.run(["publish"], fixture: fixture)
        #expect(publish.exitCode == 0, "\(publish)")
        // Today's key waits; yesterday's waits too until 02:07:30 UTC (15-minute windows).
        let due = SystemWallClock().now() >= UTCDay(number: today).start + 7_200 + 450 ? 2 : 1
        #expect(publish.stdout.contains("Published key batch 1 with \(due) keys"), "\(publish.stdout)")
        #expect(publish.stdout.contains("\(3 - due) keys wait"))
        let status = try ServerCLI.run(["status"], fixture: fixture)
        #expect(status.stdout.contains("Live key batches:  1"))
        #expect(status.stdout.contains("Accepted uploads:  ids and keys"))
        #expect(!(append.stdout + append.stderr + publish.stdout + publish.stderr).contains(keys[0].key))
    }

    @Test func anAuthorityWorksOfflineWithAppendIssueCodePublishAndStatus() throws {
        let fixture = try freshFixture()
        defer { fixture.remove() }
        try fixture.writeConfiguration()
        let keygen = try ServerCLI.run(["keygen"], fixture: fixture)
        let publicKey = try PositiveListPublicKey(base64: keygen.stdout)

        let now = SystemWallClock().now()
        let history = fixture.paths.dataDirectory + "/history.json"
        try JSONEncoder().encode(SubmittedHistory(ids: Histories.entries(count: 96, endingAt: now - 900))).write(to: URL(fileURLWithPath: history))
        let append = try ServerCLI.run(["append", "--authority", "Health Authority A", history], fixture: fixture)
        #expect(append.exitCode == 0, "\(append)")
        #expect(append.stdout.contains("Stored 96 new ids"))

        let code = try ServerCLI.run(["issue-code", "--authority", "Health Authority B"], fixture: fixture)
        #expect(code.exitCode == 0, "\(code)")
        #expect(UploadCode(typed: code.stdout.trimmingCharacters(in: .whitespacesAndNewlines)) != nil)

        let publish = try ServerCLI.run(["publish"], fixture: fixture)
        #expect(publish.exitCode == 0, "\(publish)")
        #expect(publish.stdout.contains("Published batch 1 with 96 ids"))
        #expect(try fixture.verifiedBatches().map(\.number) == [1])
        #expect(try fixture.verifiedBatches().first?.count == 96)
        #expect(fixture.paths.published.retiredFilesPresent().isEmpty)

        let status = try ServerCLI.run(["status"], fixture: fixture)
        #expect(status.exitCode == 0, "\(status)")
        #expect(status.stdout.contains("Live batches:      1"))
        #expect(status.stdout.contains("Open upload codes: 1"))
        #expect(status.stdout.contains(publicKey.base64))
        // Neither the ids nor the code reach the logs.
        let everything = append.stderr + code.stderr + publish.stderr + status.stderr
        #expect(!everything.contains(Histories.entries(count: 1, endingAt: now - 900)[0].id))
    }

    /// Once old history is deleted, status says from which entry on the log keeps it.
    @Test func statusShowsWhereTheLogsHistoryStarts() async throws {
        let fixture = try ServerFixture()
        defer { fixture.remove() }
        try fixture.writeConfiguration()
        try await fixture.makePublisher().publish()
        let before = try ServerCLI.run(["status"], fixture: fixture)
        #expect(before.exitCode == 0, "\(before)")
        #expect(!before.stdout.contains("Log history"), "nothing deleted yet")
        var serial: UInt64 = 0
        for day in stride(from: 40, to: 0, by: -1) {
            try ListLogHistoryTests.append(
                ListLogHistoryTests.entries(count: 100, now: fixture.clock.now() - UnixSeconds(day) * 86_400, serial: &serial), to: fixture)
        }
        let kept = try #require(try await fixture.makePublisher().publish().log?.historyKeptFromEntry)
        #expect(kept > 0)
        let status = try ServerCLI.run(["status"], fixture: fixture)
        #expect(status.exitCode == 0, "\(status)")
        #expect(status.stdout.contains("Log entries:       4000 (log/checkpoint)\nLog history kept from entry \(kept); older entry bundles deleted\n"), "\(status.stdout)")
    }

    @Test func mistakesGetOneSentenceAndTheRightExitCode() throws {
        let fixture = try ServerFixture()
        defer { fixture.remove() }
        let noConfig = try ServerCLI.run(["issue-code", "--authority", "X"], fixture: fixture)
        #expect(noConfig.exitCode == 1)
        #expect(noConfig.stderr.contains("Cannot read the configuration file"))

        try fixture.writeConfiguration()
        let unknown = try ServerCLI.run(["issue-code", "--authority", "Nobody"], fixture: fixture)
        #expect(unknown.exitCode == 1)
        #expect(unknown.stderr.contains("No authority named \"Nobody\""))

        let badFile = fixture.paths.dataDirectory + "/bad.json"
        try Data("{\"ids\": []}".utf8).write(to: URL(fileURLWithPath: badFile))
        let refused = try ServerCLI.run(["append", "--authority", "Health Authority A", badFile], fixture: fixture)
        #expect(refused.exitCode == 1)
        #expect(refused.stderr.contains("nothing was stored"))

        let usage = try ServerCLI.run(["serve", "--no-such-flag"], fixture: fixture)
        #expect(usage.exitCode == 2)
    }

    @Test func serveAnswersAndStopsCleanlyOnSIGTERM() async throws {
        let fixture = try ServerFixture()
        defer { fixture.remove() }
        try fixture.writeConfiguration()
        let port = try LoopbackPort.free()
        let errors = Pipe()
        let process = try ServerCLI.start(["serve", "--bind", "127.0.0.1:\(port)"], fixture: fixture, stderr: errors)
        do {
            try await LoopbackPort.waitUntilListening(port, orExit: process)
        } catch {
            process.terminate()
            throw error
        }
        // The scheduler publishes at start, so the log's checkpoint exists.
        _ = await eventually(every: .milliseconds(50)) {
            FileManager.default.fileExists(atPath: fixture.paths.published.logCheckpointPath)
        }
        #expect(try fixture.verifiedLog().checkpoint.treeSize == 0)

        kill(process.processIdentifier, SIGTERM)
        process.waitUntilExit()
        #expect(process.terminationReason == .exit)
        #expect(process.terminationStatus == 0)
        let log = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        #expect(log.contains("Server started"))
    }
}
