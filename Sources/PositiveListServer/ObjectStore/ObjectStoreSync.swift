import Crypto
import Foundation
import Logging
import ObjectStore
import PositiveListFormat

/// The steps of a sync after which a test may inject a crash.
public enum SyncStep: String, Sendable, CaseIterable {
    case batchUploaded
    case keyBatchUploaded
    case indexUploaded
    case keyIndexUploaded
    case expiredBatchDeleted
    case expiredKeyBatchDeleted
}

/// What one sync did, by object key.
public struct SyncReport: Sendable, Equatable {
    public var uploadedBatches: [String] = []
    public var uploadedIndexes: [String] = []
    public var deletedBatches: [String] = []
    /// Batches the bucket already held, byte for byte.
    public var presentBatches = 0
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
/// The publish lock is held throughout, so a publication cannot replace the index or remove a
/// batch while they are being read and uploaded.
public struct ObjectStoreSync: Sendable {
    public typealias FaultInjection = @Sendable (SyncStep) throws -> Void

    let client: ObjectStoreClient
    let directory: PublishedDirectory
    let lockPath: String
    let publicKey: PositiveListPublicKey
    let logger: Logger
    private let faultInjection: FaultInjection?

    public init(
        client: ObjectStoreClient, directory: PublishedDirectory, lockPath: String, publicKey: PositiveListPublicKey, logger: Logger,
        faultInjection: FaultInjection? = nil
    ) {
        self.client = client
        self.directory = directory
        self.lockPath = lockPath
        self.publicKey = publicKey
        self.logger = logger
        self.faultInjection = faultInjection
    }

    @discardableResult
    public func sync() async throws(ObjectStoreError) -> SyncReport {
        do throws(ObjectStoreError) {
            let lock: PublishLock
            do {
                lock = try PublishLock(path: lockPath)
            } catch {
                throw ObjectStoreError.localFiles(error.description)
            }
            defer { withExtendedLifetime(lock) {} }
            let report = try await syncHoldingLock()
            logger.info("synced to object store", metadata: [
                "bucket": "\(client.location.bucket)", "prefix": "\(client.location.keyPrefix)",
                "uploadedBatches": "\(report.uploadedBatches.count)", "uploadedIndexes": "\(report.uploadedIndexes.joined(separator: ","))",
                "deletedBatches": "\(report.deletedBatches.count)", "presentBatches": "\(report.presentBatches)",
            ])
            return report
        } catch {
            logger.error("object store sync failed", metadata: ["reason": "\(error)"])
            throw error
        }
    }

    private func syncHoldingLock() async throws(ObjectStoreError) -> SyncReport {
        let ids = try readIndex(PositiveListIndex.relativePath) { bytes throws(PositiveListFormatError) in
            try PositiveListIndex(verifying: bytes, publicKey: publicKey).batches
        }
        guard let ids else { throw .localFiles("there is no \(PositiveListIndex.relativePath) in \(directory.path)") }
        // A directory from before key batches has no key index: its key side is left alone.
        let keys = try readIndex(PositiveListKeyIndex.relativePath) { bytes throws(PositiveListFormatError) in
            try PositiveListKeyIndex(verifying: bytes, publicKey: publicKey).batches
        }
        var report = SyncReport()
        let remoteIDs = try await remoteBatches(in: "batches")
        let remoteKeys = keys == nil ? [:] : try await remoteBatches(in: "keys")

        try await uploadMissing(ids.listings, remote: remoteIDs, step: .batchUploaded, into: &report)
        if let keys { try await uploadMissing(keys.listings, remote: remoteKeys, step: .keyBatchUploaded, into: &report) }

        try await uploadIndex(ids, step: .indexUploaded, into: &report)
        if let keys { try await uploadIndex(keys, step: .keyIndexUploaded, into: &report) }

        try await deleteUnlisted(remote: remoteIDs, listed: ids.listings, step: .expiredBatchDeleted, into: &report)
        if let keys { try await deleteUnlisted(remote: remoteKeys, listed: keys.listings, step: .expiredKeyBatchDeleted, into: &report) }
        return report
    }

    /// A local index file, its bytes and the batches it names; nil when the file is absent.
    private struct LocalIndex {
        let relativePath: String
        let bytes: [UInt8]
        let listings: [PositiveListIndex.BatchListing]
    }

    private func readIndex(
        _ relativePath: String, batches: ([UInt8]) throws(PositiveListFormatError) -> [PositiveListIndex.BatchListing]
    ) throws(ObjectStoreError) -> LocalIndex? {
        guard let data = FileManager.default.contents(atPath: directory.path + "/" + relativePath) else { return nil }
        let bytes = Array(data)
        do {
            return LocalIndex(relativePath: relativePath, bytes: bytes, listings: try batches(bytes))
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
            let bytes = try readBatch(listing)
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
    /// must not become the bucket's immutable copy.
    private func readBatch(_ listing: PositiveListIndex.BatchListing) throws(ObjectStoreError) -> [UInt8] {
        guard let data = FileManager.default.contents(atPath: directory.path + "/" + listing.relativePath) else {
            throw .localFiles("\(listing.relativePath), named by the index, is missing")
        }
        let bytes = Array(data)
        guard bytes.count == listing.byteCount, Array(SHA256.hash(data: bytes)) == listing.sha256 else {
            throw .localFiles("\(listing.relativePath) does not match the SHA-256 the index gives for it (damaged on disk?)")
        }
        return bytes
    }

    /// The stored object holds `bytes`: its size and MD5 ETag agree, or, when the ETag is not an
    /// MD5 (multipart or KMS-encrypted uploads by something else), its downloaded bytes do.
    private func requireSame(_ bytes: [UInt8], as stored: StoredObject, key: String) async throws(ObjectStoreError) {
        guard stored.size == bytes.count else { throw .batchDiffers(key: key, localBytes: bytes.count, remoteBytes: stored.size) }
        let md5 = Insecure.MD5.hash(data: bytes).map { String(format: "%02x", $0) }.joined()
        if stored.etag.lowercased() == md5 { return }
        if stored.etag.count == 32, stored.etag.allSatisfy(\.isHexDigit) {
            throw .batchDiffers(key: key, localBytes: bytes.count, remoteBytes: stored.size)
        }
        let remote = try await client.get(key)
        guard remote == bytes else { throw .batchDiffers(key: key, localBytes: bytes.count, remoteBytes: remote?.count ?? 0) }
    }

    private func uploadIndex(_ index: LocalIndex, step: SyncStep, into report: inout SyncReport) async throws(ObjectStoreError) {
        let key = client.location.key(for: index.relativePath)
        let md5 = Insecure.MD5.hash(data: index.bytes).map { String(format: "%02x", $0) }.joined()
        if let stored = try await client.head(key), stored.etag.lowercased() == md5, stored.size == index.bytes.count {
            return
        }
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

    private func inject(_ step: SyncStep) throws(ObjectStoreError) {
        do {
            try faultInjection?(step)
        } catch {
            throw .injectedFault(step.rawValue)
        }
    }
}
