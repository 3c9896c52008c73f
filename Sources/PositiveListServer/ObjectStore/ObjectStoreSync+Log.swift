import Crypto
import Foundation
import ObjectStore
import PositiveListFormat
import TransparencyLog

extension ObjectStoreSync {
    /// At most this many log files are deleted from the bucket by one sync (which holds the
    /// publication lock): the first sync of a bucket filled before deletion existed may find
    /// tens of thousands of superseded partial files; the rest go at the next syncs.
    public static let logDeletionsPerSync = 1_000

    /// Mirrors the log (format version 3) at a cost flat in its size: the bucket's checkpoint
    /// says which tree it holds, so only the tiles and bundles the local tree adds to it are
    /// uploaded (full ones once, for ever; partial ones as new names; old history this directory
    /// deleted is not uploaded), then the checkpoint. A crash between the two leaves the bucket's
    /// old checkpoint, whose tiles are all there. A bucket holding a larger tree (another instance
    /// published since) is left alone. Once the bucket's checkpoint is this directory's, the log
    /// files this directory no longer has and no node can need are deleted (`pruneBucketLog`).
    func syncLog(into report: inout SyncReport) async throws(ObjectStoreError) {
        guard let local = FileManager.default.contents(atPath: directory.logCheckpointPath) else { return }
        guard let localSize = verifiedTreeSize(local) else {
            // Never spread a checkpoint that nodes would refuse.
            throw .localFiles("\(directory.logCheckpointPath) does not verify with this server's public key")
        }
        let keptFromBundle = Publisher.readLogState(at: logStatePath ?? ListLogState.defaultPath(for: directory))?.history?.keptFromBundle ?? 0
        let checkpointKey = client.location.key(for: "log/checkpoint")
        let remote = try await client.get(checkpointKey)
        if remote == Array(local) {
            try await pruneBucketLog(localSize: localSize, bucketSize: localSize, keptFromBundle: keptFromBundle, into: &report)
            return
        }
        // A bucket checkpoint that does not parse (none yet, damaged) counts as an empty tree.
        let remoteCheckpoint = remote.flatMap { Self.checkpoint(in: Data($0)) }
        let remoteSize = remoteCheckpoint?.treeSize ?? 0
        if remoteSize > localSize {
            report.newerInBucket.append(checkpointKey)
            return
        }
        // The bucket's tree must be a prefix of this one: another instance's log (a directory of
        // its own) is never mixed with this one's, which would fork the log nodes follow.
        if let remoteCheckpoint, remoteSize > 0, localRoot(treeSize: remoteSize, localSize: localSize) != remoteCheckpoint.rootHash {
            // Its root needs a level-0 tile this directory deleted with the old history.
            let tooOld = ((try? TileLayout.tilesForRoot(treeSize: remoteSize)) ?? []).contains { tile in
                guard let current = Self.current(tile, localSize: localSize) else { return false }
                return Publisher.isOldHistory(current.path, keptFromBundle: keptFromBundle)
                    && !FileManager.default.fileExists(atPath: directory.logPath + "/" + current.path)
            }
            if tooOld {
                logger.error("the bucket's log is older than the history this directory keeps, so it cannot be checked to be a prefix of this directory's log; the log was not synced", metadata: [
                    "bucketSize": "\(remoteSize)", "localSize": "\(localSize)", "historyKeptFromEntry": "\(keptFromBundle << 8)",
                    "next": "if this is the only instance publishing to the bucket, delete the bucket's log/checkpoint and sync again",
                ])
                report.logOlderThanHistory = true
                return
            }
            logger.error("the bucket's log is not a prefix of this directory's log; the log was not synced", metadata: [
                "bucketSize": "\(remoteSize)", "localSize": "\(localSize)",
                "next": "keep one instance's log in the bucket (several instances with directories of their own do not share one log yet)",
            ])
            report.logDiverges = true
            return
        }
        let paths = TileLayout.entryBundlesAdded(from: remoteSize, to: localSize).map(\.path)
            + TileLayout.tilesAdded(from: remoteSize, to: localSize).map(\.path)
        for path in paths {
            guard let bytes = FileManager.default.contents(atPath: directory.logPath + "/" + path) else {
                // Deleted here as history no node needs (a bucket that lagged for weeks, or a new one).
                if Publisher.isOldHistory(path, keptFromBundle: keptFromBundle) { continue }
                throw .localFiles("log/\(path) is missing from \(directory.path), though log/checkpoint needs it")
            }
            try await client.put(
                client.location.key(for: "log/" + path), body: Array(bytes), contentType: PublishedFileHeaders.contentType,
                cacheControl: PublishedFileHeaders.batchCacheControl)
            report.uploadedLogTiles += 1
        }
        try inject(.logTilesUploaded)
        try await client.put(checkpointKey, body: Array(local), contentType: PublishedFileHeaders.contentType, cacheControl: PublishedFileHeaders.indexCacheControl)
        report.uploadedLogCheckpoint = true
        try await pruneBucketLog(localSize: localSize, bucketSize: remoteSize, keptFromBundle: keptFromBundle, into: &report)
    }

    /// Deletes from the bucket, whose checkpoint is now this directory's, the log files this
    /// directory no longer has, by the publisher's rules: the full entry bundles and level-0 tiles
    /// of the history it deleted (before bundle `keptFromBundle`, Publisher+LogHistory.swift), and
    /// superseded partial files (Publisher.prunePartialFiles), except the partial files of the
    /// bucket's checkpoint before this sync (`bucketSize`), which a node may have read in the last
    /// minute. Never a file this directory has, a full tile of level 1 and above, a full bundle or
    /// level-0 tile from `keptFromBundle` on (the newest two bundles among them), nor a partial
    /// file of the checkpoint. Listed from the bucket, so that a sync that stopped is finished by
    /// the next; the listing holds the history kept and one tile of level 1 per 65,536 entries.
    func pruneBucketLog(localSize: UInt64, bucketSize: UInt64, keptFromBundle: UInt64, into report: inout SyncReport) async throws(ObjectStoreError) {
        let prefix = client.location.keyPrefix
        let keptPartials = Set(Publisher.partialPaths(localSize) + Publisher.partialPaths(bucketSize))
        var deletable: [String] = []
        // Listed as "log", without its slash (see `remoteBatches`), and filtered here.
        for object in try await client.list(prefix: prefix + "log") where object.key.hasPrefix(prefix + "log/tile/") {
            let path = String(object.key.dropFirst(prefix.count + "log/".count))
            let superseded = ((try? EntryBundleID(path: path))?.isPartial ?? (try? TileID(path: path))?.isPartial ?? false) && !keptPartials.contains(path)
            guard superseded || Publisher.isOldHistory(path, keptFromBundle: keptFromBundle) else { continue }
            guard !FileManager.default.fileExists(atPath: directory.logPath + "/" + path) else { continue }
            deletable.append(object.key)
        }
        for key in deletable.sorted().prefix(Self.logDeletionsPerSync) {
            try await client.delete(key)
            report.deletedLogFiles += 1
            try inject(.logFileDeleted)
        }
        report.logFilesLeftToDelete = max(0, deletable.count - Self.logDeletionsPerSync)
        if report.deletedLogFiles > 0 {
            logger.info("deleted log files this directory no longer has from the bucket", metadata: [
                "deleted": "\(report.deletedLogFiles)", "left": "\(report.logFilesLeftToDelete)", "historyKeptFromEntry": "\(keptFromBundle << 8)",
            ])
        }
    }

    /// The checkpoint a note states, unverified; nil when it does not parse.
    private static func checkpoint(in bytes: Data) -> Checkpoint? {
        guard let note = try? SignedNote(parsing: bytes) else { return nil }
        return try? Checkpoint(text: note.text)
    }

    /// The root of this directory's log at `treeSize`, from the tiles of its current tree of
    /// `localSize`: the partial tiles of an older tree are pruned two appends later (a bucket
    /// whose sync lagged must still be recognised as a prefix), and a wider tile holds the same
    /// hashes at the same positions. nil when a tile is missing.
    private func localRoot(treeSize: UInt64, localSize: UInt64) -> MerkleHash? {
        var reader = TileHashReader(treeSize: treeSize)
        guard let tiles = try? TileLayout.tilesForRoot(treeSize: treeSize) else { return nil }
        for tile in tiles {
            guard let current = Self.current(tile, localSize: localSize),
                  let bytes = FileManager.default.contents(atPath: directory.logPath + "/" + current.path),
                  (try? reader.add(current, bytes: bytes)) != nil
            else { return nil }
        }
        return try? MerkleProofGenerator.rootHash(treeSize: treeSize, reader: reader)
    }

    /// The version of `tile` (of a smaller tree) that this directory's tree of `localSize` has:
    /// full, or its partial version of that size.
    private static func current(_ tile: TileID, localSize: UInt64) -> TileID? {
        let width = tile.index < TileLayout.fullTileCount(level: tile.level, treeSize: localSize)
            ? TileID.fullWidth : TileLayout.partialWidth(level: tile.level, treeSize: localSize)
        return try? TileID(level: tile.level, index: tile.index, width: width)
    }

    /// Mirrors `log/uploads` (the authority's upload policy) when the bucket's differs: a small
    /// file, read and compared at each sync. One this server's key did not sign is not spread.
    func syncUploadPolicy(into report: inout SyncReport) async throws(ObjectStoreError) {
        guard let local = FileManager.default.contents(atPath: directory.uploadPolicyPath) else { return }
        guard let note = try? SignedNote(parsing: local), let policy = try? UploadPolicyNote(text: note.text),
              let key = try? Curve25519.Signing.PublicKey(rawRepresentation: publicKey.rawRepresentation),
              let verifier = try? NoteVerifierKey(name: policy.origin, type: .ed25519, publicKey: key),
              (try? UploadPolicyNote.open(local, origin: policy.origin, logKey: verifier)) != nil
        else {
            throw .localFiles("\(directory.uploadPolicyPath) does not verify with this server's public key")
        }
        let objectKey = client.location.key(for: UploadPolicyNote.relativePath)
        guard try await client.get(objectKey) != Array(local) else { return }
        try await client.put(objectKey, body: Array(local), contentType: PublishedFileHeaders.contentType, cacheControl: PublishedFileHeaders.indexCacheControl)
        report.uploadedUploadPolicy = true
    }

    /// The tree size of this server's checkpoint, only when this server's key signed it under
    /// the checkpoint's own origin.
    private func verifiedTreeSize(_ bytes: Data) -> UInt64? {
        guard let checkpoint = Self.checkpoint(in: bytes),
              let key = try? Curve25519.Signing.PublicKey(rawRepresentation: publicKey.rawRepresentation),
              let verifier = try? NoteVerifierKey(name: checkpoint.origin, type: .ed25519, publicKey: key),
              (try? Checkpoint.open(bytes, origin: checkpoint.origin, logKey: verifier)) != nil
        else { return nil }
        return checkpoint.treeSize
    }
}
