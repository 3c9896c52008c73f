import CurlHTTP
import Foundation
import IDRotation
import Logging
import Matching
import ObjectStore
import PositiveListFormat
import PositiveListServer
import SQLiteServerStore
import Synchronization
import TracerCore
import TracerTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// Publish-to-visible time on an S3-compatible object store (moto's, on 127.0.0.1, with SigV4
/// authentication on): from the start of `publish()` for a batch of 1,000,000 pending ids,
/// through `tracer-server sync`'s work, until an anonymous GET of the log's checkpoint (as a node
/// sends it) returns the new one. Split into publish, the sync's tile and bundle upload, the
/// checkpoint upload, and the wait for the GET. Each round publishes a new million-id batch on
/// top of the previous ones.
struct ObjectStoreBenchmark {
    let directory: String
    let rounds: Int
    let idsPerBatch: Int

    func run() async throws {
        say("# Object storage benchmark (\(Date()))")
        say("\(ProcessInfo.processInfo.activeProcessorCount) cores; moto's S3 on 127.0.0.1 (in-memory, Python), SigV4 checked; \(rounds) rounds of \(idsPerBatch) ids")
        let logger = Logger(label: "bench") { _ in SwiftLogNoOpLogHandler() }
        let paths = ServerPaths(dataDirectory: directory + "/server")
        try FileManager.default.createDirectory(atPath: paths.dataDirectory, withIntermediateDirectories: true)
        let store = try ServerStore.open(path: paths.database, publishedDirectory: paths.published)
        let key = try SigningKeyFile.create(at: paths.signingKey)
        let publicKey = PositiveListPublicKey(key.publicKey)
        let clock = SystemWallClock()
        let publisher = Publisher(
            store: store, directory: paths.published, signingKey: key,
            retentionSeconds: 28 * 86_400, idPublicationDelaySeconds: 0, clock: clock, logger: logger)

        let moto = try await MotoS3Server(buckets: ["bench-list"])
        defer { moto.stop() }
        let client = try ObjectStoreClient(
            location: ObjectStoreLocation(endpoint: moto.endpoint, bucket: "bench-list"),
            credentials: ObjectStoreCredentials(accessKeyID: moto.accessKeyID, secretAccessKey: moto.secretAccessKey))
        let steps = StepClock()
        let sync = ObjectStoreSync(
            client: client, directory: paths.published, lockPath: paths.publishLock, publicKey: publicKey, logger: logger,
            faultInjection: { step in steps.mark(step) })
        let http = CurlHTTPClient()
        let checkpointURL = client.location.publicListURL + "log/checkpoint"

        // An empty list up first, so that every round replaces a checkpoint already in the bucket.
        try await publisher.publish()
        try await sync.sync()

        say("| Round | Ids | Publish | Sync: tiles + bundles upload | Sync: checkpoint | Sync total | GET sees it | Publish to visible |")
        say("| --- | --- | --- | --- | --- | --- | --- | --- |")
        for round in 1...rounds {
            // Appended beforehand, not timed: the figure starts where an hourly publication does.
            try await appendDirectly(idsPerBatch, to: store, now: clock.now(), seed: UInt64(round))
            steps.reset()
            let start = ContinuousClock.now
            let report = try await publisher.publish()
            let published = ContinuousClock.now
            guard let batch = report.newBatch else { throw BenchmarkFailure("round \(round) published no batch") }
            try await sync.sync()
            let synced = ContinuousClock.now
            let expected = try Data(contentsOf: URL(fileURLWithPath: paths.published.logCheckpointPath))
            var attempts = 0
            while true {
                attempts += 1
                let response = try await http.perform(HTTPRequest(url: checkpointURL))
                if response.status == 200, Data(response.body) == expected { break }
                if attempts > 100 { throw BenchmarkFailure("the bucket's checkpoint did not become the new one (last status \(response.status))") }
                try await Task.sleep(for: .milliseconds(10))
            }
            let visible = ContinuousClock.now
            let tilesUploaded = steps.time(of: .logTilesUploaded) ?? synced
            say(String(
                format: "| %d | %d | %.3f s | %.3f s | %.3f s | %.3f s | %.3f s | **%.3f s** |",
                round, batch.idCount, (published - start).seconds, (tilesUploaded - published).seconds, (synced - tilesUploaded).seconds,
                (synced - published).seconds, (visible - synced).seconds, (visible - start).seconds))
        }
    }

    private func appendDirectly(_ count: Int, to store: ServerStore, now: UnixSeconds, seed: UInt64) async throws {
        var generator = SplitMix(state: seed)
        var remaining = count
        while remaining > 0 {
            let size = min(2_688, remaining)
            let entries = (0..<size).map { position in
                let until = now - UnixSeconds(position) * 900
                return PositiveListEntry(id: UserID(rawValue: generator.next()), validFrom: until - 900, validUntil: until)
            }
            _ = try await store.appendHistory(entries, credential: .authority(name: "Bench"), idempotencyKey: nil, now: now)
            remaining -= size
        }
    }
}

/// When each sync step was passed (the sync's fault-injection hook, which never fails here).
private final class StepClock: Sendable {
    private let marks = Mutex<[SyncStep: ContinuousClock.Instant]>([:])

    func reset() { marks.withLock { $0 = [:] } }
    func mark(_ step: SyncStep) { marks.withLock { $0[step] = ContinuousClock.now } }
    func time(of step: SyncStep) -> ContinuousClock.Instant? { marks.withLock { $0[step] } }
}
