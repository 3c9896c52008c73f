import Foundation
@testable import ObjectStore
import PositiveListFormat
@testable import PositiveListServer
import Testing
import TestTiers
import TracerCore
import ServerTestSupport
import TracerTestSupport
import TransparencyLog
#if canImport(Glibc)
import Glibc
#endif

/// An object store reached over a network that cuts and stalls connections part-way through
/// uploads, rather than one that is plainly down: a TCP proxy (``FaultyProxy``) between the
/// server and moto.
extension ServerOutageTests {
    /// Every file below the published directory by relative path, temporaries left out.
    static func publishedFiles(_ fixture: ServerFixture) -> [String: [UInt8]] {
        let root = fixture.paths.published.path
        var files: [String: [UInt8]] = [:]
        guard let enumerator = FileManager.default.enumerator(atPath: root) else { return [:] }
        for case let relative as String in enumerator where !(relative as NSString).lastPathComponent.hasPrefix(AtomicFile.temporaryPrefix) {
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: root + "/" + relative, isDirectory: &isDirectory), !isDirectory.boolValue,
                  let data = FileManager.default.contents(atPath: root + "/" + relative)
            else { continue }
            files[relative] = Array(data)
        }
        return files
    }

    /// How the bucket differs from the published directory: a file it lacks, an object with other
    /// bytes, an object the directory does not have. A superseded partial log file (the tree
    /// before the last append, kept for nodes that read the previous checkpoint) is not counted:
    /// a bucket synced in one go from an older tree never needs it.
    static func mirrorProblems(_ client: ObjectStoreClient, of fixture: ServerFixture) async throws -> [String] {
        let local = publishedFiles(fixture)
        let checkpoint = try #require(local["log/checkpoint"], "no log/checkpoint")
        let size = try Checkpoint(text: try SignedNote(parsing: Data(checkpoint)).text).treeSize
        let current = Set(Publisher.partialPaths(size).map { "log/" + $0 })
        var problems: [String] = []
        let objects = try await client.list(prefix: client.location.keyPrefix)
        let remote = Set(objects.map(\.key))
        for (path, bytes) in local.sorted(by: { $0.key < $1.key }) {
            let superseded = path.contains(".p/") && !current.contains(path)
            if !remote.contains(path) {
                if !superseded { problems.append("\(path) is not in the bucket") }
            } else if try await client.get(path) != bytes {
                problems.append("\(path) differs in the bucket")
            }
        }
        for key in remote.sorted() where local[key] == nil { problems.append("\(key) is in the bucket only") }
        return problems
    }

    /// What an upload order that keeps the bucket valid looks like in the uploads the store took
    /// (`connections`, in order): the log's checkpoint after every tile and bundle, and the
    /// checkpoint the last upload of all. Returns what breaks it.
    static func orderProblems(_ connections: [FaultyProxy.Connection], bucket: String) -> [String] {
        let stored = connections.filter { $0.method == "PUT" && $0.status == "200" }.map { String($0.path.dropFirst(bucket.count + 2)) }
        var problems: [String] = []
        guard let lastCheckpoint = stored.lastIndex(of: "log/checkpoint") else {
            return ["the store took no checkpoint: \(stored)"]
        }
        if let retired = stored.first(where: { ObjectStoreSync.isRetiredPath($0) }) { problems.append("\(retired), a retired file, was uploaded") }
        if let late = stored.lastIndex(where: { $0.hasPrefix("log/tile/") }), late > lastCheckpoint { problems.append("\(stored[late]) after the checkpoint") }
        if lastCheckpoint != stored.count - 1 { problems.append("uploads after the checkpoint: \(stored[(lastCheckpoint + 1)...])") }
        return problems
    }

    /// The bucket's endpoint is a proxy that first cuts every upload part-way (serve publishes and
    /// serves all the while, status says the sync fails and why, each sync giving up after a
    /// bounded number of attempts), then passes everything: serve's next sync brings the bucket to
    /// the published directory, in order. Then `tracer-server sync` mirrors the directory into an
    /// empty bucket through the proxy cutting uploads, losing answers and stalling one connection:
    /// one run gets everything there, in order, trying each upload at most three times.
    @Test(.timeLimit(.minutes(4))) func anObjectStoreThatCutsAndStallsUploadsEndsWithTheBucketAsPublishedInOrder() async throws {
        let fixture = try ServerFixture()
        defer { fixture.remove() }
        let moto = try await MotoS3Server(buckets: ["flaky", "fresh"])
        defer { moto.stop() }
        let proxy = try await FaultyProxy(targetPort: moto.port)
        defer { proxy.stop() }
        let credentialsPath = fixture.paths.dataDirectory + "/s3-credentials"
        try "AWS_ACCESS_KEY_ID=\(moto.accessKeyID)\nAWS_SECRET_ACCESS_KEY=\(moto.secretAccessKey)\n".write(toFile: credentialsPath, atomically: true, encoding: .utf8)
        chmod(credentialsPath, 0o600)
        try fixture.writeConfiguration(extra: #", "objectStore": {"endpoint": "\#(proxy.endpoint)", "bucket": "flaky", "credentialsFile": "\#(credentialsPath)"}"#)
        let credentials = ObjectStoreCredentials(accessKeyID: moto.accessKeyID, secretAccessKey: moto.secretAccessKey)
        // The test's own look at the buckets goes to moto directly.
        let bucket = try ObjectStoreClient(location: ObjectStoreLocation(endpoint: moto.endpoint, bucket: "flaky"), credentials: credentials)
        let fresh = try ObjectStoreClient(location: ObjectStoreLocation(endpoint: moto.endpoint, bucket: "fresh"), credentials: credentials)
        let port = try LoopbackPort.free()
        let log = try ServerLog()
        defer { log.remove() }
        let server = try await Self.serve(fixture, port: port, log: log)
        defer { Self.stop(server) }
        let local = { FileManager.default.contents(atPath: fixture.paths.published.logCheckpointPath).map(Array.init) }
        let firstSync = try await eventually(timeout: .seconds(30), every: .milliseconds(100)) { try await bucket.get("log/checkpoint") == local() }
        try #require(firstSync, "serve's first sync did not happen: \(log.text.suffix(2_000))")

        // 1. Every upload cut part-way; a publication meanwhile.
        try await proxy.set(.cut)
        let now = UnixSeconds(Date().timeIntervalSince1970)
        let entries = Histories.entries(count: 40, endingAt: now - 600, seed: 11)
        let answer = await Self.upload(port: port, entries, key: "while-uploads-are-cut")
        #expect(answer?.status == 201, "\(answer?.text ?? "no answer")")
        let publishedLocally = try await eventually(timeout: .seconds(20), every: .milliseconds(50)) {
            Set(try Self.publishedIDs(fixture)) == Set(try Self.ids(entries))
        }
        #expect(publishedLocally, "serve did not publish while uploads were cut: \(log.text.suffix(2_000))")
        var status = try ServerCLI.run(["status"], fixture: fixture)
        let failing = try await eventually(timeout: .seconds(30), every: .milliseconds(200)) {
            status = try ServerCLI.run(["status"], fixture: fixture)
            return status.stdout.contains("Object store sync FAILING")
        }
        #expect(failing && status.exitCode == 1, "\(status)")
        let said = status.stdout.split(separator: "\n").first { $0.contains("FAILING") }.map(String.init) ?? ""
        // Which upload, why, how often it was tried, and what to do.
        #expect(said.contains("Could not upload") && said.contains("tried 3 times") && said.contains("check the endpoint URL and the network"), "\(said)")
        print("status while uploads are cut: \(said)")
        // Several syncs fail, each after its bounded attempts, `serve` trying again at its back-off.
        let retried = await eventually(timeout: .seconds(40), every: .milliseconds(100)) {
            log.text.components(separatedBy: "object store sync failed; trying again").count > 3
        }
        #expect(retried, "serve did not retry the sync: \(log.text.suffix(2_000))")
        let cutUploads = proxy.connections(since: .cut).filter { $0.method == "PUT" }
        #expect(!cutUploads.isEmpty && cutUploads.allSatisfy { $0.fault == "cut" && $0.status == "-" }, "\(cutUploads)")
        // The bucket meanwhile is the old one, still whole: nothing of the new publication landed.
        #expect(try await bucket.get("log/checkpoint") != local())
        try await ObjectStoreSyncTests.expectBucketValid(bucket, of: fixture)

        // The network mends.
        try await proxy.set(.pass)
        let mended = ContinuousClock.now
        let caughtUp = try await eventually(timeout: .seconds(60), every: .milliseconds(50)) {
            try await bucket.get("log/checkpoint") == local()
        }
        let recovery = ContinuousClock.now - mended
        #expect(caughtUp, "the bucket's checkpoint is not the server's \(recovery) after the network mended: \(log.text.suffix(2_000))")
        // A loose bound: the figure (printed below) is the measure; this catches only a recovery that hangs on a shared CI machine.
        #expect(recovery < .seconds(60), "caught up \(recovery) after the network mended")
        let mirror = try await Self.mirrorProblems(bucket, of: fixture)
        #expect(mirror.isEmpty, "\(mirror)")
        let order = Self.orderProblems(proxy.connections(since: .pass), bucket: "flaky")
        #expect(order.isEmpty, "\(order)")
        let healthy = await eventually(timeout: .seconds(10), every: .milliseconds(200)) {
            (try? ServerCLI.run(["status"], fixture: fixture))?.exitCode == 0
        }
        #expect(healthy, "status still fails after the sync caught up")
        Self.stop(server)

        // 2. `tracer-server sync` into an empty bucket, through cuts, lost answers and a stall.
        try await proxy.set(.flaky)
        let started = ContinuousClock.now
        let sync = try ServerCLI.run(["sync", "--bucket", "fresh"], fixture: fixture)
        let took = ContinuousClock.now - started
        #expect(sync.exitCode == 0, "\(sync)")
        let connections = proxy.connections(since: .flaky)
        let faults = Dictionary(grouping: connections.filter { $0.method == "PUT" }, by: \.fault).mapValues(\.count)
        #expect(faults["cut", default: 0] > 0 && faults["drop", default: 0] > 0 && faults["stall"] == 1, "\(faults)")
        let freshMirror = try await Self.mirrorProblems(fresh, of: fixture)
        #expect(freshMirror.isEmpty, "\(freshMirror)")
        let freshOrder = Self.orderProblems(connections, bucket: "fresh")
        #expect(freshOrder.isEmpty, "\(freshOrder)")
        let stored = connections.filter { $0.method == "PUT" && $0.status == "200" && $0.fault == "pass" }.count
        print("FIGURE object-store-cuts: bucket caught up \(Self.seconds(recovery)) s after the network mended (every upload cut before, \(cutUploads.count) cut uploads, status FAILING); lost 0 uploads (\(entries.count) ids published once)")
        print("FIGURE object-store-flaky: `tracer-server sync` into an empty bucket in one run of \(Self.seconds(took)) s through \(faults["cut", default: 0]) cut uploads, \(faults["drop", default: 0]) lost answers and \(faults["stall", default: 0]) stall, \(stored) uploads answered; bucket = published directory, checkpoint last")
    }
}
