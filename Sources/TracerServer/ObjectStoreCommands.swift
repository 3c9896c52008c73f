import ArgumentParser
import Foundation
import Logging
import ObjectStore
import PositiveListFormat
import PositiveListServer
import ServerStorage

/// Where to sync: the configuration's `objectStore` section, each value overridable by a flag
/// (so `sync` also works without the section, for a one-off copy).
struct ObjectStoreOptions: ParsableArguments {
    @Option(help: "The S3-compatible endpoint URL, e.g. https://s3.eu-central-1.amazonaws.com (objectStore.endpoint).")
    var endpoint: String?

    @Option(help: "The bucket (objectStore.bucket).")
    var bucket: String?

    @Option(help: "The signing region (objectStore.region; default us-east-1).")
    var region: String?

    @Option(name: .customLong("key-prefix"), help: "Prepended to every object key, e.g. tracer/ (objectStore.keyPrefix).")
    var keyPrefix: String?

    @Flag(inversion: .prefixedNo, help: "Address the bucket as ENDPOINT/BUCKET/KEY rather than BUCKET.HOST/KEY (objectStore.pathStyle; default on).")
    var pathStyle: Bool?

    @Option(
        name: .customLong("credentials-file"),
        help: "A mode-0600 file with AWS_ACCESS_KEY_ID=... and AWS_SECRET_ACCESS_KEY=... lines, and AWS_SESSION_TOKEN=... for temporary credentials (objectStore.credentialsFile); default: those environment variables.")
    var credentialsFile: String?

    /// The configured section with the flags applied, or nil when neither names a bucket.
    func settings(configured: ObjectStoreSettings?) throws -> ObjectStoreSettings? {
        guard configured != nil || (endpoint != nil && bucket != nil) else { return nil }
        var location = configured?.location ?? ObjectStoreLocation(endpoint: endpoint ?? "", bucket: bucket ?? "")
        if let endpoint { location.endpoint = endpoint.hasSuffix("/") ? String(endpoint.dropLast()) : endpoint }
        if let bucket { location.bucket = bucket }
        if let region { location.region = region }
        if let keyPrefix { location.keyPrefix = keyPrefix }
        if let pathStyle { location.pathStyle = pathStyle }
        if let problem = location.problems().first { throw ObjectStoreError.invalidSettings(problem) }
        return ObjectStoreSettings(
            location: location, credentialsFile: credentialsFile ?? configured?.credentialsFile,
            syncAfterPublish: configured?.syncAfterPublish ?? false)
    }
}

extension ObjectStoreSettings {
    /// The client, with credentials from the file (read again before each request) or the environment.
    func makeClient() throws -> ObjectStoreClient {
        try ObjectStoreClient(location: location, credentialsFile: credentialsFile, environment: ProcessInfo.processInfo.environment)
    }
}

extension LocationOptions {
    /// The configuration when the file exists; a missing file is fine for commands whose flags can
    /// stand in for it, an invalid one is not.
    func loadConfigurationIfPresent() throws -> ServerConfiguration? {
        guard FileManager.default.fileExists(atPath: resolvedConfigurationPath) else { return nil }
        return try loadConfiguration()
    }

    /// Syncs under `store`'s publication lock; without a store, under the data directory's lock
    /// file (which is the SQLite store's).
    func makeSync(settings: ObjectStoreSettings, store: (any SubmissionStore)?, logger: Logger) throws -> ObjectStoreSync {
        let key = try SigningKeyFile.load(from: resolvedKeyPath)
        let client = try settings.makeClient()
        let publicKey = PositiveListPublicKey(key.publicKey)
        var sync = store.map {
            ObjectStoreSync(client: client, directory: paths.published, store: $0, publicKey: publicKey, logger: logger)
        } ?? ObjectStoreSync(client: client, directory: paths.published, lockPath: paths.publishLock, publicKey: publicKey, logger: logger)
        sync.recordPath = paths.objectStoreSyncRecord
        sync.logStatePath = paths.logState
        return sync
    }
}

struct Sync: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Mirrors the published list log to S3-compatible object storage: new tiles and bundles, then the checkpoint, then deletes what no node needs.",
        discussion: """
            Safe to run again at any time, also after a crash: it starts from the bucket's checkpoint. \
            Index and batch objects an older tracer-server uploaded (index.tpli, batches/, keys/) are deleted \
            once the database holds what every live batch published. \
            Credentials come from AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY or --credentials-file; \
            see deploy/object-store/README.md.
            """)

    @OptionGroup var location: LocationOptions
    @OptionGroup var objectStore: ObjectStoreOptions

    func run() async throws {
        let configuration = try location.loadConfigurationIfPresent()
        guard let settings = try objectStore.settings(configured: configuration?.objectStore) else {
            throw ObjectStoreError.invalidSettings(
                "no bucket to sync to; add an objectStore section to \(location.resolvedConfigurationPath) or pass --endpoint and --bucket")
        }
        // Under the lock the store publishes under (on PostgreSQL every instance's; with SQLite the
        // data directory's lock file); the store also says whether the retired objects are still needed.
        let store: (any SubmissionStore)? = try await location.openStore(configuration: configuration)
        let sync = try location.makeSync(settings: settings, store: store, logger: Logger(label: "tracer-server"))
        let report = try await sync.sync()
        if report.anotherInstanceBusy {
            print("Another tracer-server instance is publishing or syncing right now, and syncs after it; nothing was done. Run this again later if the bucket still lags.")
            return
        }
        let where_ = "bucket \(settings.location.bucket)\(settings.location.keyPrefix.isEmpty ? "" : " under \(settings.location.keyPrefix)")"
        print("Uploaded \(report.uploadedLogTiles) log tiles and bundles to \(where_)\(report.uploadedLogCheckpoint ? ", then the checkpoint" : "; checkpoint unchanged").")
        if !report.deletedRetiredObjects.isEmpty {
            print("Deleted \(report.deletedRetiredObjects.count) index and batch objects an older tracer-server uploaded (index.tpli, batches/, keys/): the list log replaces them.")
        }
        if !report.retiredObjectsKeptFor.isEmpty {
            print("""
                Kept the index and batch objects an older tracer-server uploaded: the database does not hold what \
                \(report.retiredObjectsKeptFor.joined(separator: ", ")) published yet, and the bucket's file may be its only copy. \
                Copy that file from the bucket into \(location.paths.published.path) (batches/ or keys/, same name) and restart \
                tracer-server; the next sync deletes them.
                """)
        }
        if !report.newerInBucket.isEmpty {
            print("""
                Left \(report.newerInBucket.joined(separator: " and ")) alone: the bucket's is newer. If other instances publish \
                to this bucket, one did since this one last published, and this directory catches up at its next publication; \
                if not, this data directory is older than the bucket (restored from a backup?).
                """)
        }
        if report.deletedLogFiles > 0 {
            let left = report.logFilesLeftToDelete > 0 ? " (\(report.logFilesLeftToDelete) more at the next syncs)" : ""
            print("Deleted \(report.deletedLogFiles) log files the published directory no longer has (old history, superseded partial files)\(left).")
        }
        if report.logOlderThanHistory {
            print("""
                Left the bucket's log alone: it is older than the history \(location.paths.published.path) keeps (its last sync was weeks ago), \
                so it cannot be checked to be a prefix of this log. If this server is the only one publishing to the bucket, delete the \
                bucket's log/checkpoint and sync again.
                """)
        }
    }
}
