import Crypto
import Foundation
import Logging
import ObjectStore
import PositiveListFormat
import ServerStorage
import SQLiteServerStore
import TracerCore

/// The steps of a sync after which a test may inject a crash.
public enum SyncStep: String, Sendable, CaseIterable {
    /// The log's new tiles and bundles are in the bucket, its checkpoint not yet.
    case logTilesUploaded
    /// One more log file this directory no longer has (old history, a superseded partial file)
    /// is deleted from the bucket.
    case logFileDeleted
    /// One more object of the retired formats 1 and 2 (`index.tpli`, `batches/N.tplb`,
    /// `keys/index.tpki`, `keys/N.tpkb`) is deleted from the bucket.
    case retiredObjectDeleted
}

/// What one sync did, by object key.
public struct SyncReport: Sendable, Equatable {
    /// Another instance held the publication lock (it is publishing or syncing); nothing was done.
    public var anotherInstanceBusy = false
    /// Objects left alone because the bucket's is newer (`log/checkpoint` of a larger tree,
    /// published by another instance since this one last published): this directory is behind.
    public var newerInBucket: [String] = []
    /// Log tiles and entry bundles uploaded (format version 3).
    public var uploadedLogTiles = 0
    public var uploadedLogCheckpoint = false
    /// `log/uploads` was uploaded (it was missing from the bucket, or differed).
    public var uploadedUploadPolicy = false
    /// The bucket's log is not a prefix of this directory's (another instance's log): not synced.
    public var logDiverges = false
    /// The bucket's log is older than the history this directory keeps, so whether it is a prefix
    /// of this one cannot be checked: not synced (`tracer-server sync` says what to do).
    public var logOlderThanHistory = false
    /// Log files deleted from the bucket: old entry bundles and level-0 tiles this directory
    /// deleted, and superseded partial files.
    public var deletedLogFiles = 0
    /// Such files left for the next syncs (at most ``ObjectStoreSync/logDeletionsPerSync`` a sync).
    public var logFilesLeftToDelete = 0
    /// Objects of the retired formats 1 and 2 deleted from the bucket (an older tracer-server
    /// uploaded them), by key.
    public var deletedRetiredObjects: [String] = []
    /// The live batches the database does not hold the content of yet ("batch 3"), for which
    /// the bucket's retired objects were kept: they may be the only copy.
    public var retiredObjectsKeptFor: [String] = []
}

/// Mirrors the published directory into an S3-compatible bucket, in the order that keeps the
/// bucket valid for nodes at every moment: the upload policy, then the log's new tiles and
/// bundles, then its checkpoint, then deletions of what no node can need
/// (ObjectStoreSync+Log.swift). Each run starts again from the bucket, not from what an earlier
/// run meant to do, so running it again finishes what a crashed run left.
///
/// Last, the objects of the retired formats 1 and 2 (`index.tpli`, `batches/`, `keys/`) that an
/// older tracer-server uploaded are deleted, the indexes first, but only when the database
/// holds the content of every live batch (``SubmissionStore/batchesWithoutContent()``); while
/// it does not, or when the sync was made without a store to ask, they are kept, since they
/// may be the only copy of what such a batch published.
///
/// The publication lock is held throughout (the data directory's lock file, or on PostgreSQL the
/// lock every instance publishes under), so no publication, here or on another instance, changes
/// the log while a sync reads and uploads it, and two syncs never interleave.
public struct ObjectStoreSync: Sendable {
    public typealias FaultInjection = @Sendable (SyncStep) throws -> Void
    /// Takes the publication lock; ``PublishError/anotherInstancePublishing`` when another
    /// instance holds it.
    public typealias LockPublication = @Sendable () async throws(PublishError) -> any PublicationLock

    let client: ObjectStoreClient
    let directory: PublishedDirectory
    let lockPublication: LockPublication
    let publicKey: PositiveListPublicKey
    let logger: Logger
    private let faultInjection: FaultInjection?
    /// Where each sync leaves its outcome (``OutcomeRecord``) for the console; none if nil.
    public var recordPath: String?
    /// Asks the database which live batches lack their content (``SubmissionStore/batchesWithoutContent()``);
    /// nil: the retired objects are never deleted (nothing says they are not the only copy).
    public var batchesWithoutContent: (@Sendable () async throws(ServerStoreError) -> [String])?
    /// The log's state (``ServerPaths/logState``), which says from which bundle on this directory
    /// keeps the log's history; nil: beside the published directory, where the publisher keeps it.
    public var logStatePath: String?

    /// Syncs under the lock the server's `store` publishes under.
    public init(
        client: ObjectStoreClient, directory: PublishedDirectory, store: any SubmissionStore,
        publicKey: PositiveListPublicKey, logger: Logger, faultInjection: FaultInjection? = nil
    ) {
        self.init(
            client: client, directory: directory, lockPublication: { () async throws(PublishError) in
                do throws(PublicationLockError) { return try await store.lockPublication() } catch { throw PublishError(error) }
            },
            publicKey: publicKey, logger: logger, faultInjection: faultInjection)
        batchesWithoutContent = { () async throws(ServerStoreError) in try await store.batchesWithoutContent() }
    }

    /// Syncs under the data directory's lock file (the SQLite store's publication lock).
    public init(
        client: ObjectStoreClient, directory: PublishedDirectory, lockPath: String, publicKey: PositiveListPublicKey, logger: Logger,
        faultInjection: FaultInjection? = nil
    ) {
        self.init(
            client: client, directory: directory,
            lockPublication: { () async throws(PublishError) in
                do throws(PublicationLockError) { return try ServerStore.lockPublication(path: lockPath) } catch { throw PublishError(error) }
            },
            publicKey: publicKey, logger: logger, faultInjection: faultInjection)
    }

    public init(
        client: ObjectStoreClient, directory: PublishedDirectory, lockPublication: @escaping LockPublication,
        publicKey: PositiveListPublicKey, logger: Logger, faultInjection: FaultInjection? = nil
    ) {
        self.client = client
        self.directory = directory
        self.lockPublication = lockPublication
        self.publicKey = publicKey
        self.logger = logger
        self.faultInjection = faultInjection
    }

    @discardableResult
    public func sync() async throws(ObjectStoreError) -> SyncReport {
        do throws(ObjectStoreError) {
            let report = try await lockedSync()
            if let recordPath, !report.anotherInstanceBusy {
                OutcomeRecord(at: Self.now(), succeeded: true, detail: Self.summary(report)).write(to: recordPath)
            }
            return report
        } catch {
            if let recordPath { OutcomeRecord(at: Self.now(), succeeded: false, detail: error.description).write(to: recordPath) }
            throw error
        }
    }

    private static func now() -> Int64 { Int64(Date().timeIntervalSince1970) }

    private static func summary(_ report: SyncReport) -> String {
        "\(report.uploadedLogTiles) log tiles uploaded"
            + (report.uploadedLogCheckpoint ? ", checkpoint uploaded" : "")
            + (report.deletedLogFiles > 0 ? ", \(report.deletedLogFiles) old log files deleted" : "")
            + (report.deletedRetiredObjects.isEmpty ? "" : ", \(report.deletedRetiredObjects.count) retired index and batch objects deleted")
            + (report.newerInBucket.isEmpty ? "" : "; the bucket holds a newer \(report.newerInBucket.joined(separator: " and "))")
    }

    private func lockedSync() async throws(ObjectStoreError) -> SyncReport {
        do throws(ObjectStoreError) {
            let lock: any PublicationLock
            do {
                lock = try await lockPublication()
            } catch .anotherInstancePublishing {
                logger.info("object store sync left to another instance, which is publishing or syncing now")
                var report = SyncReport()
                report.anotherInstanceBusy = true
                return report
            } catch {
                throw ObjectStoreError.publicationLockUnavailable(error.description)
            }
            let report: SyncReport
            do {
                report = try await syncHoldingLock()
            } catch {
                await lock.release()
                throw error
            }
            await lock.release()
            if !report.newerInBucket.isEmpty {
                logger.notice("the bucket holds a newer log than this directory; left as it is", metadata: [
                    "objects": "\(report.newerInBucket.joined(separator: ","))",
                    "next": "none when other instances publish to this bucket (this one catches up at its next publication); with a single instance, this data directory is older than the bucket (restored from a backup?)",
                ])
            }
            logger.info("synced to object store", metadata: [
                "bucket": "\(client.location.bucket)", "prefix": "\(client.location.keyPrefix)",
                "uploadedLogTiles": "\(report.uploadedLogTiles)", "uploadedLogCheckpoint": "\(report.uploadedLogCheckpoint)",
                "deletedLogFiles": "\(report.deletedLogFiles)", "deletedRetiredObjects": "\(report.deletedRetiredObjects.count)",
            ])
            return report
        } catch {
            logger.error("object store sync failed", metadata: ["reason": "\(error)"])
            throw error
        }
    }

    private func syncHoldingLock() async throws(ObjectStoreError) -> SyncReport {
        var report = SyncReport()
        try await syncUploadPolicy(into: &report)
        try await syncLog(into: &report)
        try await deleteRetiredObjects(into: &report)
        return report
    }

    /// Deletes the bucket's objects of the retired formats 1 and 2, indexes first, once the
    /// database holds every live batch's content; see the type's comment.
    private func deleteRetiredObjects(into report: inout SyncReport) async throws(ObjectStoreError) {
        // Only once the bucket holds this directory's log (or a newer one): until then the
        // retired objects are all the bucket offers.
        guard FileManager.default.fileExists(atPath: directory.logCheckpointPath), !report.logDiverges, !report.logOlderThanHistory else { return }
        let prefix = client.location.keyPrefix
        var found: [String] = []
        // Listed by name without a slash, and filtered here: moto (the tests' server) refuses the
        // signature of a listing whose prefix holds an encoded "/" (real S3 does not).
        for name in ["index.tpli", "batches", "keys"] {
            for object in try await client.list(prefix: prefix + name) where object.key.hasPrefix(prefix) {
                let relative = String(object.key.dropFirst(prefix.count))
                if Self.isRetiredPath(relative) { found.append(relative) }
            }
        }
        guard !found.isEmpty else { return }
        guard let batchesWithoutContent else {
            logger.notice("retired index and batch objects left in the bucket: this sync cannot ask the database whether they are still needed")
            return
        }
        let unfilled: [String]
        do {
            unfilled = try await batchesWithoutContent()
        } catch {
            // The log is synced; these wait for a sync that can ask.
            logger.warning("retired index and batch objects left in the bucket", metadata: [
                "reason": "the database could not say whether they are still needed: \(error)",
                "next": "check the database with `tracer-server doctor`; the next sync deletes them",
            ])
            return
        }
        guard unfilled.isEmpty else {
            report.retiredObjectsKeptFor = unfilled
            logger.warning("retired index and batch objects kept in the bucket", metadata: [
                "reason": "\(unfilled.joined(separator: ", ")) live without its content in the database; the bucket's file may be its only copy",
                "next": "copy the file into the published directory (batches/ or keys/) and restart tracer-server; the next sync then deletes them",
            ])
            return
        }
        // The indexes first: a node or CDN reading the bucket meanwhile never finds one naming a
        // batch already gone.
        let indexes = [PositiveListIndex.relativePath, PositiveListKeyIndex.relativePath]
        for relative in found.sorted(by: { (indexes.contains($0) ? 0 : 1, $0) < (indexes.contains($1) ? 0 : 1, $1) }) {
            let key = client.location.key(for: relative)
            try await client.delete(key)
            report.deletedRetiredObjects.append(key)
            try inject(.retiredObjectDeleted)
        }
        logger.notice("retired index and batch objects deleted from the bucket: the list log replaces them", metadata: [
            "objects": "\(report.deletedRetiredObjects.count)",
        ])
    }

    /// `index.tpli`, `keys/index.tpki`, `batches/N.tplb` or `keys/N.tpkb` with N a decimal
    /// number: what an older tracer-server uploaded, and the only retired objects sync deletes.
    static func isRetiredPath(_ relative: String) -> Bool {
        if relative == PositiveListIndex.relativePath || relative == PositiveListKeyIndex.relativePath { return true }
        for (folder, suffix) in [("batches", ".tplb"), ("keys", ".tpkb")] {
            guard relative.hasPrefix(folder + "/"), relative.hasSuffix(suffix) else { continue }
            let number = relative.dropFirst(folder.count + 1).dropLast(suffix.count)
            return !number.isEmpty && number.count <= 20 && number.allSatisfy(\.isASCII) && number.allSatisfy(\.isNumber)
        }
        return false
    }

    func inject(_ step: SyncStep) throws(ObjectStoreError) {
        do {
            try faultInjection?(step)
        } catch {
            throw .injectedFault(step.rawValue)
        }
    }
}
