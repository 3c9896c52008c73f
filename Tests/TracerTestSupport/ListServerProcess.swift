import Foundation
import Testing
import TestTiers
import TracerCore
#if canImport(Glibc)
import Glibc
#endif

/// A real `tracer-server` for one test: a fresh data directory in the test's scratch directory,
/// a fresh signing key, one authority, `serve` on a free port of 127.0.0.1. Tests stop it with
/// `defer { server.stop() }`.
public final class ListServerProcess {
    public let dataDirectory: String
    public let publicKey: String
    public let token: String
    public let port: Int
    /// The test's scratch directory, HOME of the server's processes.
    public let home: String
    private var process: Process?

    public var url: String { "http://127.0.0.1:\(port)" }
    /// The list log's checkpoint, written last by each publication.
    public var publishedCheckpoint: String { dataDirectory + "/public/log/checkpoint" }

    /// `serving: false` prepares the data directory, key and port without starting `serve`, for
    /// a test whose server comes up later (see `start()`). `settings` are further members of
    /// config.json, such as `"acceptUploads": "keys"`.
    public init(scratch: Scratch, name: String = "server", serving: Bool = true, settings: String = "") throws {
        home = scratch.path
        dataDirectory = scratch.file(name)
        try FileManager.default.createDirectory(atPath: dataDirectory, withIntermediateDirectories: true)
        token = "test-authority-token-" + UUID().uuidString
        let more = settings.isEmpty ? "" : ", " + settings
        try #"{"authorities": [{"name": "Test Health Authority", "token": "\#(token)"}]\#(more)}"#
            .write(toFile: dataDirectory + "/config.json", atomically: true, encoding: .utf8)
        let keygen = try Products.runServer(["keygen"], dataDirectory: dataDirectory, home: home)
        guard keygen.exitCode == 0 else { throw HarnessFailure(description: "tracer-server keygen failed: \(keygen)") }
        publicKey = keygen.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        port = try LoopbackPort.free()
        if serving { try start() }
    }

    deinit { stop() }

    /// Starts `serve` and waits until it listens and has published its first (empty) log.
    public func start() throws {
        let process = try Products.server(["serve", "--bind", "127.0.0.1:\(port)"], dataDirectory: dataDirectory, home: home)
        process.standardInput = FileHandle.nullDevice
        let log = home + "/server-\(UUID().uuidString).log"
        _ = FileManager.default.createFile(atPath: log, contents: nil)
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: log))
        process.standardOutput = handle
        process.standardError = handle
        try process.run()
        try? handle.close()
        self.process = process
        // The checkpoint is the first publication's last file, after log/uploads (from which
        // `tracer report` reads what the server accepts).
        let ready = try eventuallyBlocking(timeout: .seconds(20), every: .milliseconds(20)) {
            guard process.isRunning else {
                let text = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
                throw HarnessFailure(description: "tracer-server serve exited with \(process.terminationStatus): \(text.suffix(2000))")
            }
            return LoopbackPort.isListening(port) && FileManager.default.fileExists(atPath: publishedCheckpoint)
        }
        guard ready else {
            stop()
            throw HarnessFailure(description: "tracer-server did not listen on \(port) within 20 s")
        }
    }

    /// SIGTERM, then SIGKILL if it has not stopped within 5 s; waits for it either way.
    public func stop() {
        guard let process else { return }
        self.process = nil
        guard process.isRunning else { return }
        kill(process.processIdentifier, SIGTERM)
        _ = eventuallyBlocking(timeout: .seconds(5), every: .milliseconds(5)) { !process.isRunning }
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
    }

    /// What a health authority does: `POST /v1/codes` with its bearer token.
    public func issueCode() throws -> String {
        try RequiredTool.curl.require()
        let result = try Products.run(
            "/usr/bin/curl",
            ["-sS", "--fail-with-body", "-X", "POST", "-H", "Authorization: Bearer \(token)", url + "/v1/codes"], home: home)
        guard result.exitCode == 0 else { throw HarnessFailure(description: "POST /v1/codes failed: \(result)") }
        let answer = try Check.json(result.stdout)
        return try #require(answer["code"] as? String, "no code in \(result.stdout)")
    }

    /// What a health authority's upload does: `POST /v1/histories` of `count` random ids that
    /// ended ten minutes ago (due at once, past the server's clock-skew allowance), with its
    /// bearer token; `serve` publishes them soon after.
    public func uploadIDs(count: Int) throws {
        try RequiredTool.curl.require()
        let end = UnixSeconds(Date().timeIntervalSince1970) - 600
        let ids = (0..<count).map { position in
            let until = end - UnixSeconds(position) * 900
            return #"{"id": "\#(UserID.random().hex)", "validFrom": \#(until - 900), "validUntil": \#(until)}"#
        }
        let result = try Products.run(
            "/usr/bin/curl",
            ["-sS", "--fail-with-body", "-X", "POST", "-H", "Authorization: Bearer \(token)", "-H", "Content-Type: application/json",
             "--data", #"{"ids": ["# + ids.joined(separator: ", ") + "]}", url + "/v1/histories"], home: home)
        guard result.exitCode == 0 else { throw HarnessFailure(description: "POST /v1/histories failed: \(result)") }
    }

    /// `tracer-server append --keys` of `records` (a JSON file in the data directory), as an
    /// authority appends a key history; requires success.
    public func appendKeys(_ records: [DailyKeyRecord]) throws {
        let file = dataDirectory + "/keys-\(UUID().uuidString).json"
        try (#"{"keys": ["# + records.map { #"{"day": \#($0.day.number), "intervalSeconds": \#($0.intervalSeconds), "key": "\#($0.key.hex)"}"# }
            .joined(separator: ", ") + "]}").write(toFile: file, atomically: true, encoding: .utf8)
        let append = try runServer(["append", "--authority", "Test Health Authority", "--keys", file])
        guard append.exitCode == 0 else { throw HarnessFailure(description: "tracer-server append --keys failed: \(append)") }
    }

    /// `tracer-server publish`; returns its stdout.
    @discardableResult
    public func publish() throws -> String {
        try publish(extra: []).stdout
    }

    /// `tracer-server publish` with more arguments (`--demo-key-clock T`); requires success.
    public func publish(extra: [String]) throws -> ProcessResult {
        let result = try runServer(["publish"] + extra)
        guard result.exitCode == 0 else { throw HarnessFailure(description: "tracer-server publish failed: \(result)") }
        return result
    }

    /// `tracer-server` with `arguments` on this server's data directory (`status`, `console
    /// add-account`, ...), waited for; `input` on its stdin.
    public func runServer(_ arguments: [String], input: String? = nil) throws -> ProcessResult {
        try Products.runServer(arguments, dataDirectory: dataDirectory, home: home, input: input)
    }
}

extension Products {
    /// What every variable `tracer-server` reads begins with (ServerSettingRegistryTests checks
    /// that each setting's variable does).
    public static let serverVariablePrefix = "TRACER_SERVER_"

    /// `tracer-server` with `arguments` on `dataDirectory`, not started: the one way the tests
    /// start it. None of the runner's `TRACER_SERVER_` variables reach it, since a setting there
    /// would override the test's config.json. With `home`, the child gets the environment of
    /// ``environment(home:overrides:)`` and runs in `home`; otherwise the runner's environment.
    /// Variables starting with one of `dropping` are left out too; `overrides` come last.
    public static func server(
        _ arguments: [String], dataDirectory: String, home: String? = nil, dropping prefixes: [String] = [],
        overrides: [String: String] = [:]
    ) throws -> Process {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: try path(of: "tracer-server"))
        process.arguments = arguments
        let inherited = home.map { Self.environment(home: $0) } ?? ProcessInfo.processInfo.environment
        let dropped = [serverVariablePrefix] + prefixes
        var childEnvironment = inherited.filter { variable in !dropped.contains { variable.key.hasPrefix($0) } }
        childEnvironment["TRACER_SERVER_DATA_DIR"] = dataDirectory
        childEnvironment.merge(overrides) { _, given in given }
        process.environment = childEnvironment
        if let home { process.currentDirectoryURL = URL(fileURLWithPath: home) }
        return process
    }

    /// ``server(_:dataDirectory:home:dropping:overrides:)`` in `home`, run to its end (60 s at
    /// most) with `input` on its stdin.
    public static func runServer(_ arguments: [String], dataDirectory: String, home: String, input: String? = nil) throws -> ProcessResult {
        try ProcessResult.collect(try server(arguments, dataDirectory: dataDirectory, home: home), input: input, timeout: .seconds(60))
    }
}
