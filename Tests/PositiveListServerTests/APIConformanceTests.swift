import Foundation
import IDRotation
import PositiveListServer
import Testing
import TestTiers
import TracerCore
import ServerTestSupport
import TracerTestSupport
import TransparencyLog
#if canImport(Glibc)
import Glibc
#endif

/// docs/openapi.yaml must say what the server does: Schemathesis (pinned in scripts/setup) makes a
/// client from the document and runs it, with every one of its checks, against a real
/// `tracer-server serve`; any finding (a status, header, content type or body the document does
/// not describe, data it calls valid refused or invalid data accepted, a 5xx) fails the test
/// with Schemathesis's report. Its settings are in Tests/Support/schemathesis/schemathesis.toml,
/// and hooks.py beside it moves schema-valid histories into the time window the server accepts
/// now (a rule JSON Schema cannot state). The long poll is on in one run and off in the other.
@Suite(.tags(.integration), .serialized) struct APIConformanceTests {
    static let root = RequiredTool.repositoryRoot
    static let document = root + "/docs/openapi.yaml"
    static let settings = root + "/Tests/Support/schemathesis/schemathesis.toml"
    /// Far more than a run takes (15 s on an idle machine, about a minute on a busy one).
    static let timeLimitSeconds = 300

    /// Every documented route live: the long poll on, a signing key, an authority whose token
    /// Schemathesis sends as the bearer credential, a published batch and key batch. The
    /// witness's route has a run of its own (below).
    @Test func theServerAnswersAsTheDocumentSays() async throws {
        try RequiredTool.schemathesis.require()
        let result = try await Self.runSchemathesis(
            serverSettings: #", "longPollSeconds": 1"#, arguments: ["--max-examples", "20", "--exclude-path", "/v1/add-checkpoint"])
        #expect(result.exitCode == 0, "Schemathesis found answers docs/openapi.yaml does not describe:\n\(Self.report(result))")
        // Not a pass by testing nothing: every operation of the document but the witness's was run.
        #expect(result.stdout.contains("Tested: 11"), "\(Self.report(result))")
    }

    /// POST /v1/add-checkpoint on a server that witnesses one log (a witness key, `witnessedLogs`).
    /// Its body is a signed note with a consistency proof, which no schema can describe, so
    /// generated bodies are refused with tlog-witness's statuses: every warning but the one
    /// that says so ("validation mismatch").
    @Test func theWitnessRouteAnswersAsTheDocumentSays() async throws {
        try RequiredTool.schemathesis.require()
        let witnessedLog = try NoteSigner.generate(name: "log.example/conformance").verifierKey.text
        let warnings = [
            "missing_auth", "missing_test_data", "base_url_mismatch", "missing_deserializer", "unsupported_regex", "method_not_allowed",
            "constants_extraction", "unmatched_filter", "unresolvable_reference", "low_valid_rate", "rate_limited", "dictionary_mismatch",
            "timeout_units",
        ]
        let result = try await Self.runSchemathesis(
            serverSettings: #", "witnessedLogs": [{"key": "\#(witnessedLog)"}]"#, witness: true,
            arguments: ["--max-examples", "20", "--include-path", "/v1/add-checkpoint", "--warnings", warnings.joined(separator: ",")])
        #expect(result.exitCode == 0, "Schemathesis found answers docs/openapi.yaml does not describe:\n\(Self.report(result))")
        #expect(result.stdout.contains("Tested: 1\n"), "\(Self.report(result))")
    }

    /// Without `longPollSeconds`, GET /v1/generation answers 404 and other methods 405, as the
    /// document says.
    @Test func theLongPollTurnedOffAnswersAsTheDocumentSays() async throws {
        try RequiredTool.schemathesis.require()
        // Every warning but two, which this run gives by design: "missing test data" (the
        // operation's only answer here is its documented 404) and "unused OpenAPI auth" (the one
        // operation tested takes no credential).
        let warnings = [
            "missing_auth", "base_url_mismatch", "validation_mismatch", "missing_deserializer", "unsupported_regex", "method_not_allowed",
            "constants_extraction", "unmatched_filter", "unresolvable_reference", "low_valid_rate", "rate_limited", "dictionary_mismatch",
            "timeout_units",
        ]
        let result = try await Self.runSchemathesis(
            serverSettings: "",
            arguments: ["--max-examples", "10", "--include-path", "/v1/generation", "--warnings", warnings.joined(separator: ",")])
        #expect(result.exitCode == 0, "Schemathesis found answers docs/openapi.yaml does not describe:\n\(Self.report(result))")
        #expect(result.stdout.contains("Tested: 1\n"), "\(Self.report(result))")
    }

    /// Starts `serve` on a fresh data directory with the fixture's authorities and
    /// `serverSettings` (members appended to config.json), runs Schemathesis against it, stops it.
    static func runSchemathesis(serverSettings: String, witness: Bool = false, arguments: [String]) async throws -> ProcessResult {
        let fixture = try ServerFixture()
        defer { fixture.remove() }
        // Schemathesis sends wrong and missing credentials on purpose, hundreds of them; at the
        // default 10 failures a minute every later credential-bearing request would get 429
        // (documented, and accepted by every check) and nothing else would be tested.
        try fixture.writeConfiguration(extra: #", "failedAttemptsPerMinute": 1000000"# + serverSettings)
        if witness { try ServerCLI.run(["witness-keygen"], fixture: fixture).succeeded("tracer-server witness-keygen") }
        // Ids that expired an hour ago and a key of the day before yesterday: the publication at
        // start lists them as batch 1 and key batch 1, the files the document's examples ask for.
        let now = SystemWallClock().now()
        let history = fixture.paths.dataDirectory + "/history.json"
        try JSONEncoder().encode(SubmittedHistory(ids: Histories.entries(count: 8, endingAt: now - 3600))).write(to: URL(fileURLWithPath: history))
        try ServerCLI.run(["append", "--authority", "Health Authority A", history], fixture: fixture).succeeded("tracer-server append")
        let keyHistory = fixture.paths.dataDirectory + "/keys.json"
        let key = SubmittedKey(day: UTCDay(containing: now).number - 2, intervalSeconds: 900, key: DailyKey.random().hex)
        try JSONEncoder().encode(SubmittedKeyHistory(keys: [key])).write(to: URL(fileURLWithPath: keyHistory))
        try ServerCLI.run(["append", "--keys", "--authority", "Health Authority A", keyHistory], fixture: fixture)
            .succeeded("tracer-server append --keys")

        let port = try LoopbackPort.free()
        let logPath = fixture.paths.dataDirectory + "/serve.log"
        _ = FileManager.default.createFile(atPath: logPath, contents: nil)
        let log = try FileHandle(forWritingTo: URL(fileURLWithPath: logPath))
        defer { try? log.close() }
        let server = try ServerCLI.process(["serve", "--bind", "127.0.0.1:\(port)"], fixture: fixture)
        server.standardOutput = FileHandle.nullDevice
        server.standardError = log
        try server.run()
        defer {
            if server.isRunning {
                kill(server.processIdentifier, SIGTERM)
                server.waitUntilExit()
            }
        }
        try await LoopbackPort.waitUntilListening(port, timeout: .seconds(30), orExit: server)
        // The batches are in the log once the publication at start has run.
        let published = await eventually(timeout: .seconds(30), every: .milliseconds(50)) {
            guard FileManager.default.fileExists(atPath: fixture.paths.published.logCheckpointPath),
                  let order = try? fixture.verifiedLog().batches().order else { return false }
            return order.contains("ids 1") && order.contains("keys 1")
        }
        try #require(published, "the server did not publish batch 1 and key batch 1 at start")

        var environment = ProcessInfo.processInfo.environment
        environment["TRACER_AUTHORITY_TOKEN"] = ServerFixture.authorityToken
        // A bound on a run that hangs (a request the server never answers is already cut off
        // after request-timeout): killed by timeout(1), it fails the test. The settings name
        // hooks.py relative to the repository's root, the run's directory.
        let result = try ProcessResult.run(
            "/usr/bin/timeout",
            ["-s", "KILL", "\(timeLimitSeconds)", RequiredTool.schemathesisExecutable] + [
                "--config-file", settings, "--no-color", "run", document, "--url", "http://127.0.0.1:\(port)", "--checks", "all",
            ] + arguments,
            environment: environment, in: root)
        // Killed, timeout(1) ends by the same signal (or says 124 or 137).
        let killed = result.signaled || [124, 137].contains(result.exitCode)
        #expect(!killed, "Schemathesis did not finish within \(timeLimitSeconds) s and was killed")
        if let copy = ProcessInfo.processInfo.environment["TRACER_SCHEMATHESIS_REPORT"] {
            try? (result.stdout + result.stderr).write(toFile: copy, atomically: true, encoding: .utf8)
        }
        #expect(server.isRunning, "tracer-server exited during the run (status \(server.terminationStatus)); its log: \(Self.tail(logPath))")
        return result
    }

    /// Schemathesis's report: the end of its output, where the failures are listed.
    static func report(_ result: ProcessResult) -> String {
        "exit \(result.exitCode)\n\(String(result.stdout.suffix(20_000)))\n\(String(result.stderr.suffix(4_000)))"
    }

    static func tail(_ path: String) -> String {
        String((try? String(contentsOfFile: path, encoding: .utf8))?.suffix(4_000) ?? "(no log)")
    }
}
