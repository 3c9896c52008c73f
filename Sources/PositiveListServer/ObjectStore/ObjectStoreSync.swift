import Crypto
import Foundation
import Logging
import ObjectStore
import PositiveListFormat
import TracerCore

/// The steps of a sync after which a test may inject a crash.
public enum SyncStep: String, Sendable, CaseIterable {
    case batchUploaded
    case keyBatchUploaded
    case indexUploaded
    case keyIndexUploaded
    case expiredBatchDeleted
    case expiredKeyBatchDeleted
    /// The log's new tiles and bundles are in the bucket, its checkpoint not yet.
    case logTilesUploaded
    /// One more log file this directory no longer has (old history, a superseded partial file)
    /// is deleted from the bucket.
    case logFileDeleted
}

/// What one sync did, by object key.
public struct SyncReport: Sendable, Equatable {
    public var uploadedBatches: [String] = []
    public var uploadedIndexes: [String] = []
    public var deletedBatches: [String] = []
    /// Batches the bucket already held, byte for byte.
    public var presentBatches = 0
    /// Batches the local index names that only the bucket held (another instance published
    /// them), downloaded, checked against the index and kept in the local directory.
    public var fetchedBatches: [String] = []
    /// Indexes left alone because the bucket's is newer (a later generation, published by
    /// another instance since this one last published): this directory is behind, not the bucket.
    public var newerInBucket: [String] = []
    /// Another instance held the publication lock (it is publishing or syncing); nothing was done.
    public var anotherInstanceBusy = false
    /// Log tiles and entry bundles uploaded (format version 3); the checkpoint counts as an index.
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
}

/// Mirrors the published directory into an S3-compatible bucket, in the order that keeps the
/// bucket valid for nodes at every moment:
/// 1. every batch (ids, then keys) the local indexes name and the bucket lacks is uploaded; one
///    the bucket holds is checked to be the same bytes (its ETag, else a download) and is never
///    rewritten: a differing one stops the sync with `batchDiffers`;
/// 2. then `index.tpli` and `keys/index.tpki`, each only when the bucket's copy differs;
/// 3. only then are batch objects that no local index names (expired ones) deleted.
/// A crash anywhere leaves the previous remote index, which names only objects still there
/// (nothing is deleted before 3), or the new one, whose batches went up in 1. Each run starts
/// again from a listing of the bucket, not from what an earlier run meant to do, so running it
/// again finishes what a crashed run left.
///
/// The publication lock is held throughout (the data directory's lock file, or on PostgreSQL the
/// lock every instance publishes under), so no publication, here or on another instance, replaces
/// an index or removes a batch while a sync reads and uploads them, and two syncs never interleave.
///
/// Several instances on one PostgreSQL database may each keep a published directory of their own,
/// with the bucket as the one they share: an index never replaces a newer one in the bucket (a
/// later generation, from an instance that published since), and a batch that another instance
/// published and this directory lacks is taken from the bucket, checked against the signed index.
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
    /// The log's state (``ServerPaths/logState``), which says from which bundle on this directory
    /// keeps the log's history; nil: beside the published directory, where the publisher keeps it.
    public var logStatePath: String?

    /// Syncs under the lock the server's `store` publishes under.
    public init(
        client: ObjectStoreClient, directory: PublishedDirectory, store: any SubmissionStore,
        publicKey: PositiveListPublicKey, logger: Logger, faultInjection: FaultInjection? = nil
    ) {
        self.init(
            client: client, directory: directory, lockPublication: { () async throws(PublishError) in try await store.lockPublication() },
            publicKey: publicKey, logger: logger, faultInjection: faultInjection)
    }

    /// Syncs under the data directory's lock file (the SQLite store's publication lock).
    public init(
        client: ObjectStoreClient, directory: PublishedDirectory, lockPath: String, publicKey: PositiveListPublicKey, logger: Logger,
        faultInjection: FaultInjection? = nil
    ) {
        self.init(
            client: client, directory: directory,
            lockPublication: { () async throws(PublishError) in try FilePublicationLock.take(path: lockPath) },
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
        "\(report.uploadedBatches.count) batches uploaded, \(report.deletedBatches.count) deleted, \(report.presentBatches) already there"
            + (report.uploadedIndexes.isEmpty ? "" : ", \(report.uploadedIndexes.joined(separator: " and ")) uploaded")
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
                logger.notice("the bucket holds a newer index than this directory; left as it is", metadata: [
                    "indexes": "\(report.newerInBucket.joined(separator: ","))",
                    "next": "none when other instances publish to this bucket (this one catches up at its next publication); with a single instance, this data directory is older than the bucket (restored from a backup?)",
                ])
            }
            logger.info("synced to object store", metadata: [
                "bucket": "\(client.location.bucket)", "prefix": "\(client.location.keyPrefix)",
                "uploadedBatches": "\(report.uploadedBatches.count)", "uploadedIndexes": "\(report.uploadedIndexes.joined(separator: ","))",
                "deletedBatches": "\(report.deletedBatches.count)", "presentBatches": "\(report.presentBatches)",
                "fetchedBatches": "\(report.fetchedBatches.count)", "newerInBucket": "\(report.newerInBucket.joined(separator: ","))",
            ])
            return report
        } catch {
            logger.error("object store sync failed", metadata: ["reason": "\(error)"])
            throw error
        }
    }

    private func syncHoldingLock() async throws(ObjectStoreError) -> SyncReport {
        let readIDs = { (bytes: [UInt8]) throws(PositiveListFormatError) -> VerifiedIndex in
            let index = try PositiveListIndex(verifying: bytes, publicKey: publicKey)
            return VerifiedIndex(generation: index.generation, listings: index.batches)
        }
        let readKeys = { (bytes: [UInt8]) throws(PositiveListFormatError) -> VerifiedIndex in
            let index = try PositiveListKeyIndex(verifying: bytes, publicKey: publicKey)
            return VerifiedIndex(generation: index.generation, listings: index.batches)
        }
        let ids = try readIndex(PositiveListIndex.relativePath, verify: readIDs)
        guard let ids else { throw .localFiles("there is no \(PositiveListIndex.relativePath) in \(directory.path)") }
        let keys = try readIndex(PositiveListKeyIndex.relativePath, verify: readKeys)
        var report = SyncReport()
        // Each index's side (ids, keys) is synced unless the bucket's index is newer than the local
        // one; the bucket's index is read once, and also tells whether ours needs uploading.
        var sides: [Side] = []
        for (local, folder, steps) in [
            (ids, "batches", (SyncStep.batchUploaded, SyncStep.indexUploaded, SyncStep.expiredBatchDeleted)),
            // A directory from before key batches has no key index: its key side is left alone.
            (keys, "keys", (SyncStep.keyBatchUploaded, SyncStep.keyIndexUploaded, SyncStep.expiredKeyBatchDeleted)),
        ] {
            guard let local else { continue }
            let remoteIndex = try await client.get(client.location.key(for: local.relativePath))
            // An index in the bucket that does not verify (none yet, damaged, another key's) is replaced.
            if let remoteIndex, let remote = try? local.verify(remoteIndex), remote.generation > local.generation {
                report.newerInBucket.append(client.location.key(for: local.relativePath))
                continue
            }
            sides.append(Side(
                local: local, remoteIndex: remoteIndex, remoteBatches: try await remoteBatches(in: folder),
                batchStep: steps.0, indexStep: steps.1, deleteStep: steps.2))
        }
        for side in sides {
            try await uploadMissing(side.local.listings, remote: side.remoteBatches, step: side.batchStep, into: &report)
        }
        for side in sides {
            try await uploadIndex(side.local, over: side.remoteIndex, step: side.indexStep, into: &report)
        }
        // The log (format version 3) after the indexes; it deletes only files no node can need.
        try await syncUploadPolicy(into: &report)
        try await syncLog(into: &report)
        for side in sides {
            try await deleteUnlisted(remote: side.remoteBatches, listed: side.local.listings, step: side.deleteStep, into: &report)
        }
        return report
    }

    /// One index and its batches, to be mirrored: the local index, what the bucket holds now.
    private struct Side {
        let local: LocalIndex
        let remoteIndex: [UInt8]?
        let remoteBatches: [String: StoredObject]
        let batchStep: SyncStep
        let indexStep: SyncStep
        let deleteStep: SyncStep
    }

    /// What sync needs of an index (ids or keys): its generation and the batches it names.
    private struct VerifiedIndex {
        let generation: UInt64
        let listings: [PositiveListIndex.BatchListing]
    }

    /// A local index file, its bytes and what it says; nil when the file is absent.
    private struct LocalIndex {
        let relativePath: String
        let bytes: [UInt8]
        let generation: UInt64
        let listings: [PositiveListIndex.BatchListing]
        /// Reads another copy of this index (the bucket's) the way this one was read.
        let verify: ([UInt8]) throws(PositiveListFormatError) -> VerifiedIndex
    }

    private func readIndex(
        _ relativePath: String, verify: @escaping ([UInt8]) throws(PositiveListFormatError) -> VerifiedIndex
    ) throws(ObjectStoreError) -> LocalIndex? {
        guard let data = FileManager.default.contents(atPath: directory.path + "/" + relativePath) else { return nil }
        let bytes = Array(data)
        do {
            let index = try verify(bytes)
            return LocalIndex(
                relativePath: relativePath, bytes: bytes, generation: index.generation, listings: index.listings, verify: verify)
        } catch {
            // Never spread an index that nodes would refuse.
            throw .localFiles("\(relativePath) does not verify with the signing key's public key (\(error))")
        }
    }


    /// The bucket's batch objects under `prefix + folder + "/"`, by relative path. Listed with the
    /// folder name without its slash, and filtered here: moto (the tests' server) refuses the
    /// signature of a listing whose prefix holds an encoded "/" (real S3 does not).
    private func remoteBatches(in folder: String) async throws(ObjectStoreError) -> [String: StoredObject] {
        let prefix = client.location.keyPrefix
        var found: [String: StoredObject] = [:]
        for object in try await client.list(prefix: prefix + folder) where object.key.hasPrefix(prefix) {
            let relative = String(object.key.dropFirst(prefix.count))
            if Self.isBatchPath(relative, folder: folder) { found[relative] = object }
        }
        return found
    }

    /// `batches/N.tplb` or `keys/N.tpkb` with N a decimal number: the only objects sync deletes.
    static func isBatchPath(_ relative: String, folder: String) -> Bool {
        let suffix = folder == "batches" ? ".tplb" : ".tpkb"
        guard relative.hasPrefix(folder + "/"), relative.hasSuffix(suffix) else { return false }
        let number = relative.dropFirst(folder.count + 1).dropLast(suffix.count)
        return !number.isEmpty && number.count <= 20 && number.allSatisfy(\.isASCII) && number.allSatisfy(\.isNumber)
    }

    private func uploadMissing(
        _ listings: [PositiveListIndex.BatchListing], remote: [String: StoredObject], step: SyncStep, into report: inout SyncReport
    ) async throws(ObjectStoreError) {
        for listing in listings {
            let relative = listing.relativePath
            let key = client.location.key(for: relative)
            guard let bytes = try readBatch(listing) else {
                try await fetchBatch(listing, presentInBucket: remote[relative] != nil)
                report.fetchedBatches.append(key)
                continue
            }
            if let stored = remote[relative] {
                try await requireSame(bytes, as: stored, key: key)
                report.presentBatches += 1
                continue
            }
            try await client.put(key, body: bytes, contentType: PublishedFileHeaders.contentType, cacheControl: PublishedFileHeaders.batchCacheControl)
            logger.debug("uploaded batch", metadata: ["key": "\(key)", "bytes": "\(bytes.count)"])
            report.uploadedBatches.append(key)
            try inject(step)
        }
    }

    /// The batch file an index names, checked against the index's SHA-256: a damaged local file
    /// must not become the bucket's immutable copy. Nil when this directory has no such file.
    private func readBatch(_ listing: PositiveListIndex.BatchListing) throws(ObjectStoreError) -> [UInt8]? {
        guard let data = FileManager.default.contents(atPath: directory.path + "/" + listing.relativePath) else { return nil }
        let bytes = Array(data)
        guard Self.matches(bytes, listing) else {
            throw .localFiles("\(listing.relativePath) does not match the SHA-256 the index gives for it (damaged on disk?)")
        }
        return bytes
    }

    private static func matches(_ bytes: [UInt8], _ listing: PositiveListIndex.BatchListing) -> Bool {
        bytes.count == listing.byteCount && Array(SHA256.hash(data: bytes)) == listing.sha256
    }

    /// A batch the local index names but this directory lacks: another instance on the same
    /// database published it and synced it. Taken from the bucket if it is the one the signed
    /// index names, and kept here, so that this instance's next publication finds it too.
    private func fetchBatch(_ listing: PositiveListIndex.BatchListing, presentInBucket: Bool) async throws(ObjectStoreError) {
        let relative = listing.relativePath
        let key = client.location.key(for: relative)
        guard presentInBucket, let bytes = try await client.get(key) else {
            throw .batchNowhere(path: relative, directory: directory.path)
        }
        guard Self.matches(bytes, listing) else {
            throw .batchDiffers(key: key, localBytes: listing.byteCount, remoteBytes: bytes.count)
        }
        do {
            try directory.prepare()
            try AtomicFile.write(bytes, to: directory.path + "/" + relative)
        } catch {
            throw .localFiles("could not keep \(relative) from the bucket in \(directory.path) (\(error))")
        }
        logger.debug("fetched batch another instance published", metadata: ["key": "\(key)", "bytes": "\(bytes.count)"])
    }

    /// The stored object holds `bytes`: its size and MD5 ETag agree, or, when the ETag is not an
    /// MD5 (multipart or KMS-encrypted uploads by something else), its downloaded bytes do.
    private func requireSame(_ bytes: [UInt8], as stored: StoredObject, key: String) async throws(ObjectStoreError) {
        guard stored.size == bytes.count else { throw .batchDiffers(key: key, localBytes: bytes.count, remoteBytes: stored.size) }
        let md5 = Hex.encode(Insecure.MD5.hash(data: bytes))
        if stored.etag.lowercased() == md5 { return }
        if stored.etag.count == 32, stored.etag.allSatisfy(\.isHexDigit) {
            throw .batchDiffers(key: key, localBytes: bytes.count, remoteBytes: stored.size)
        }
        let remote = try await client.get(key)
        guard remote == bytes else { throw .batchDiffers(key: key, localBytes: bytes.count, remoteBytes: remote?.count ?? 0) }
    }

    /// Uploads `index` unless the bucket's copy, read at the start of this sync, is the same bytes.
    private func uploadIndex(
        _ index: LocalIndex, over stored: [UInt8]?, step: SyncStep, into report: inout SyncReport
    ) async throws(ObjectStoreError) {
        let key = client.location.key(for: index.relativePath)
        if stored == index.bytes { return }
        try await client.put(key, body: index.bytes, contentType: PublishedFileHeaders.contentType, cacheControl: PublishedFileHeaders.indexCacheControl)
        logger.debug("uploaded index", metadata: ["key": "\(key)", "batches": "\(index.listings.count)"])
        report.uploadedIndexes.append(key)
        try inject(step)
    }

    private func deleteUnlisted(
        remote: [String: StoredObject], listed: [PositiveListIndex.BatchListing], step: SyncStep, into report: inout SyncReport
    ) async throws(ObjectStoreError) {
        let kept = Set(listed.map(\.relativePath))
        for relative in remote.keys.sorted() where !kept.contains(relative) {
            let key = client.location.key(for: relative)
            try await client.delete(key)
            logger.debug("deleted expired batch", metadata: ["key": "\(key)"])
            report.deletedBatches.append(key)
            try inject(step)
        }
    }

    func inject(_ step: SyncStep) throws(ObjectStoreError) {
        do {
            try faultInjection?(step)
        } catch {
            throw .injectedFault(step.rawValue)
        }
    }
}
