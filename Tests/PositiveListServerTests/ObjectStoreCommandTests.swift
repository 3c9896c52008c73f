import Foundation
import IDRotation
@testable import ObjectStore
import PositiveListFormat
@testable import PositiveListServer
import Testing
import TestTiers
import TracerCore
import ServerTestSupport
import TracerTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// The `objectStore` configuration section, and `tracer-server sync` and `doctor` as an operator
/// runs them (the built binary, against moto's S3).
@Suite("ObjectStore commands", .tags(.endToEnd), .serialized)
struct ObjectStoreCommandTests {
    static let authorities = #"{"authorities": [{"name": "A", "token": "authority-token-0123456789abcdef"}]"#

    static func parse(_ section: String) throws(ConfigurationError) -> ServerConfiguration {
        try ServerConfiguration.parse(Data((authorities + #", "objectStore": "# + section + "}").utf8), path: "config.json")
    }

    @Test func theSectionIsReadWithDefaultsAndChecked() throws {
        let minimal = try Self.parse(#"{"endpoint": "https://s3.eu-central-1.amazonaws.com/", "bucket": "tracer-list"}"#)
        #expect(minimal.objectStore == ObjectStoreSettings(
            location: ObjectStoreLocation(endpoint: "https://s3.eu-central-1.amazonaws.com", bucket: "tracer-list", region: "us-east-1", keyPrefix: "", pathStyle: true),
            credentialsFile: nil, syncAfterPublish: true))
        let full = try Self.parse(#"""
            {"endpoint": "http://127.0.0.1:9000", "bucket": "b-1", "region": "eu-west-1", "keyPrefix": "tracer/", "pathStyle": false,
             "credentialsFile": "/etc/tracer-server/s3", "syncAfterPublish": false}
            """#)
        #expect(full.objectStore?.location.bucketURL == "http://b-1.127.0.0.1:9000/")
        #expect(full.objectStore?.location.publicListURL == "http://b-1.127.0.0.1:9000/tracer/")
        #expect(full.objectStore?.credentialsFile == "/etc/tracer-server/s3")
        #expect(full.objectStore?.syncAfterPublish == false)
        #expect(try ServerConfiguration.parse(Data((Self.authorities + "}").utf8), path: "c").objectStore == nil)

        #expect(throws: ConfigurationError.unknownSetting(path: "config.json", name: "objectStore.secretAccessKey")) {
            try Self.parse(#"{"endpoint": "http://h", "bucket": "bucket", "secretAccessKey": "x"}"#)
        }
        for (section, phrase) in [
            (#"{"endpoint": "ftp://h", "bucket": "bucket"}"#, "endpoint must be an http or https URL"),
            (#"{"endpoint": "http://h", "bucket": "Bucket_1"}"#, "bucket must be"),
            (#"{"endpoint": "http://h", "bucket": "bucket", "keyPrefix": "tracer"}"#, "keyPrefix must be empty or end in"),
            (#"{"endpoint": "http://h", "bucket": "bucket", "credentialsFile": "s3.env"}"#, "credentialsFile must be an absolute path"),
        ] {
            do {
                _ = try Self.parse(section)
                Issue.record("accepted \(section)")
            } catch {
                #expect(error.description.contains(phrase), "\(error)")
            }
        }
    }

    @Test func credentialsComeFromTheEnvironmentOrAPrivateFileAndAreNeverDescribed() throws {
        let directory = NSTemporaryDirectory() + "/tracer-credentials-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let secret = "very-secret-access-key-0123456789"
        let fromEnvironment = try ObjectStoreCredentials.load(file: nil, environment: ["AWS_ACCESS_KEY_ID": "AKIAEXAMPLE", "AWS_SECRET_ACCESS_KEY": secret])
        #expect(fromEnvironment.accessKeyID == "AKIAEXAMPLE")
        var dumped = ""
        dump(fromEnvironment, to: &dumped)
        for shown in ["\(fromEnvironment)", String(reflecting: fromEnvironment), dumped] {
            #expect(!shown.contains(secret) && !shown.contains("AKIAEXAMPLE"), "\(shown)")
        }
        #expect(throws: ObjectStoreError.missingCredentials) { try ObjectStoreCredentials.load(file: nil, environment: [:]) }
        let token = "FQoGZXIvYXdzEBYaDtemporarysessiontoken"
        let temporary = try ObjectStoreCredentials.load(file: nil, environment: [
            "AWS_ACCESS_KEY_ID": "ASIAEXAMPLE", "AWS_SECRET_ACCESS_KEY": secret, "AWS_SESSION_TOKEN": token])
        #expect(temporary.sessionToken == token && temporary.isTemporary && !fromEnvironment.isTemporary)
        dumped = ""
        dump(temporary, to: &dumped)
        for shown in ["\(temporary)", String(reflecting: temporary), dumped] {
            #expect(!shown.contains(secret) && !shown.contains(token), "\(shown)")
        }
        // An empty AWS_SESSION_TOKEN (a template left unfilled) means none.
        #expect(try !ObjectStoreCredentials.load(file: nil, environment: [
            "AWS_ACCESS_KEY_ID": "AKIAEXAMPLE", "AWS_SECRET_ACCESS_KEY": secret, "AWS_SESSION_TOKEN": ""]).isTemporary)

        let path = directory + "/s3.env"
        try "# sync user\nAWS_ACCESS_KEY_ID=AKIAFILE\nAWS_SECRET_ACCESS_KEY = \(secret)\n".write(toFile: path, atomically: true, encoding: .utf8)
        chmod(path, 0o644)
        #expect(throws: ObjectStoreError.credentialsFileTooOpen(path: path, mode: "644")) { try ObjectStoreCredentials.load(file: path) }
        chmod(path, 0o600)
        let fromFile = try ObjectStoreCredentials.load(file: path, environment: ["AWS_ACCESS_KEY_ID": "ignored", "AWS_SECRET_ACCESS_KEY": "ignored"])
        #expect(fromFile.accessKeyID == "AKIAFILE" && fromFile.secretAccessKey == secret && !fromFile.isTemporary)
        try "AWS_ACCESS_KEY_ID=ASIAFILE\nAWS_SECRET_ACCESS_KEY=\(secret)\nAWS_SESSION_TOKEN=\(token)\n".write(toFile: path, atomically: true, encoding: .utf8)
        chmod(path, 0o600)
        #expect(try ObjectStoreCredentials.load(file: path).sessionToken == token)
        try "AWS_ACCESS_KEY_ID=AKIAFILE\n".write(toFile: path, atomically: true, encoding: .utf8)
        chmod(path, 0o600)
        #expect(throws: ObjectStoreError.malformedCredentialsFile(path: path)) { try ObjectStoreCredentials.load(file: path) }
    }

    @Test func keysAreEncodedAsSigV4ExpectsAndListingsFollowEveryPage() async throws {
        let location = ObjectStoreLocation(endpoint: "https://s3.example.org/", bucket: "b-1", keyPrefix: "tracer/")
        #expect(location.url(forKey: "tracer/batches/12.tplb") == "https://s3.example.org/b-1/tracer/batches/12.tplb")
        #expect(location.url(forKey: "a b/ü+=") == "https://s3.example.org/b-1/a%20b/%C3%BC%2B%3D")
        #expect(S3URIEncoding.query([("prefix", "tracer/batches"), ("list-type", "2")]) == "list-type=2&prefix=tracer%2Fbatches")

        let moto = try await MotoS3Server(buckets: ["pages"])
        defer { moto.stop() }
        let client = try ObjectStoreClient(
            location: ObjectStoreLocation(endpoint: moto.endpoint, bucket: "pages"),
            credentials: ObjectStoreCredentials(accessKeyID: moto.accessKeyID, secretAccessKey: moto.secretAccessKey))
        let keys = (1...7).map { "batches/\($0).tplb" } + ["index.tpli", "keys/1.tpkb"]
        for key in keys { try await client.put(key, body: Array(key.utf8), contentType: "application/octet-stream", cacheControl: "no-cache") }
        let listed = try await client.list(prefix: "batches", pageSize: 2)
        #expect(listed.map(\.key).sorted() == keys.filter { $0.hasPrefix("batches") }.sorted())
        #expect(listed.allSatisfy { $0.size == $0.key.utf8.count && $0.etag.count == 32 })
        #expect(try await client.list(prefix: "", pageSize: 4).count == keys.count)
        #expect(try await client.list(prefix: "nothing").isEmpty)
        try await client.delete("index.tpli")
        try await client.delete("index.tpli")
        #expect(try await client.head("index.tpli") == nil)
        #expect(try await client.get("index.tpli") == nil)
    }

    /// `serve` with the section: refuses to start without its credentials, and otherwise
    /// publishes at start and syncs right after.
    @Test func serveSyncsAfterItsFirstPublication() async throws {
        let fixture = try ServerFixture()
        defer { fixture.remove() }
        let moto = try await MotoS3Server(buckets: ["served"])
        defer { moto.stop() }
        let credentialsPath = fixture.paths.dataDirectory + "/s3-credentials"
        try fixture.writeConfiguration(extra: #", "objectStore": {"endpoint": "\#(moto.endpoint)", "bucket": "served", "credentialsFile": "\#(credentialsPath)"}"#)
        let port = try LoopbackPort.free()
        let refused = try Self.run(["serve", "--bind", "127.0.0.1:\(port)"], fixture: fixture)
        #expect(refused.exitCode == 1 && refused.stderr.contains("Cannot read the object store credentials file"), "\(refused)")

        try "AWS_ACCESS_KEY_ID=\(moto.accessKeyID)\nAWS_SECRET_ACCESS_KEY=\(moto.secretAccessKey)\n".write(toFile: credentialsPath, atomically: true, encoding: .utf8)
        chmod(credentialsPath, 0o600)
        let server = try ServerCLI.start(["serve", "--bind", "127.0.0.1:\(port)"], fixture: fixture)
        defer {
            if server.isRunning { kill(server.processIdentifier, SIGTERM) }
            server.waitUntilExit()
        }
        let client = try ObjectStoreClient(
            location: ObjectStoreLocation(endpoint: moto.endpoint, bucket: "served"),
            credentials: ObjectStoreCredentials(accessKeyID: moto.accessKeyID, secretAccessKey: moto.secretAccessKey))
        var checkpoint: [UInt8]?
        _ = try await eventually(timeout: .seconds(30), every: .milliseconds(200)) {
            checkpoint = try await client.get("log/checkpoint")
            return checkpoint != nil || !server.isRunning
        }
        let local = FileManager.default.contents(atPath: fixture.paths.published.logCheckpointPath).map(Array.init)
        #expect(checkpoint != nil && checkpoint == local, "\(moto.logTail())")
    }

    /// `tracer-server` with extra environment variables (and no AWS_* or TRACER_SERVER_* of the test's own).
    static func run(_ arguments: [String], fixture: ServerFixture, environment extra: [String: String] = [:]) throws -> ProcessResult {
        try ServerCLI.run(arguments, fixture: fixture, environment: extra, dropping: ["AWS_"])
    }

    @Test func syncAndDoctorFromTheCommandLine() async throws {
        let fixture = try ServerFixture()
        defer { fixture.remove() }
        let moto = try await MotoS3Server(buckets: ["cli-list"])
        defer { moto.stop() }
        let credentialsPath = fixture.paths.dataDirectory + "/s3-credentials"
        try fixture.writeConfiguration(extra: #", "objectStore": {"endpoint": "\#(moto.endpoint)", "bucket": "cli-list", "credentialsFile": "\#(credentialsPath)"}"#)
        let history = fixture.paths.dataDirectory + "/history.json"
        try JSONEncoder().encode(SubmittedHistory(ids: Histories.entries(count: 20, endingAt: SystemWallClock().now() - 900)))
            .write(to: URL(fileURLWithPath: history))
        #expect(try Self.run(["append", "--authority", "Health Authority A", history], fixture: fixture).exitCode == 0)
        #expect(try Self.run(["publish"], fixture: fixture).exitCode == 0)

        let missing = try Self.run(["sync"], fixture: fixture)
        #expect(missing.exitCode == 1)
        #expect(missing.stderr.contains("Cannot read the object store credentials file \(credentialsPath)"), "\(missing)")

        try "AWS_ACCESS_KEY_ID=\(moto.accessKeyID)\nAWS_SECRET_ACCESS_KEY=\(moto.secretAccessKey)\n".write(toFile: credentialsPath, atomically: true, encoding: .utf8)
        chmod(credentialsPath, 0o640)
        let open = try Self.run(["sync"], fixture: fixture)
        #expect(open.exitCode == 1 && open.stderr.contains("chmod 600"), "\(open)")
        chmod(credentialsPath, 0o600)

        let first = try Self.run(["sync"], fixture: fixture)
        #expect(first.exitCode == 0, "\(first)\n\(moto.logTail())")
        #expect(first.stdout.contains("Uploaded 2 log tiles and bundles to bucket cli-list, then the checkpoint."), "\(first)")
        let again = try Self.run(["sync"], fixture: fixture)
        #expect(again.stdout.contains("Uploaded 0 log tiles and bundles to bucket cli-list; checkpoint unchanged."), "\(again)")

        let doctor = try Self.run(["doctor"], fixture: fixture)
        #expect(doctor.exitCode == 0, "\(doctor)")
        // log/checkpoint, log/uploads, the entry bundle and its level-0 tile: no index or batch object.
        #expect(doctor.stdout.contains("ok   object store: bucket cli-list at \(moto.endpoint) is reachable, the credentials are accepted, 4 objects"), "\(doctor)")

        // Flags override the section; the environment's key pair stands in for the file.
        let wrong = ["AWS_ACCESS_KEY_ID": moto.accessKeyID, "AWS_SECRET_ACCESS_KEY": "not-the-secret-0123456789"]
        let refused = try Self.run(["doctor", "--credentials-file", "/nonexistent"], fixture: fixture, environment: wrong)
        #expect(refused.exitCode == 1)
        #expect(refused.stdout.contains("FAIL object store: Cannot read the object store credentials file /nonexistent"), "\(refused)")
        let unconfigured = try Self.run(["sync", "--config", "/nonexistent.json", "--endpoint", moto.endpoint, "--bucket", "cli-list"], fixture: fixture, environment: wrong)
        #expect(unconfigured.exitCode == 1)
        #expect(unconfigured.stderr.contains("refused the credentials"), "\(unconfigured)")
        for result in [missing, open, first, again, doctor, refused, unconfigured] {
            #expect(!(result.stdout + result.stderr).contains(moto.secretAccessKey))
            #expect(!(result.stdout + result.stderr).contains("not-the-secret"))
        }
    }
}
