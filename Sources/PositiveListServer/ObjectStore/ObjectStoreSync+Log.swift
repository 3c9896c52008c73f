import Crypto
import Foundation
import ObjectStore
import PositiveListFormat
import TransparencyLog

extension ObjectStoreSync {
    /// Mirrors the log (format version 3) at a cost flat in its size: the bucket's checkpoint
    /// says which tree it holds, so only the tiles and bundles the local tree adds to it are
    /// uploaded (full ones once, for ever; partial ones as new names), then the checkpoint. A
    /// crash between the two leaves the bucket's old checkpoint, whose tiles are all there.
    /// A bucket holding a larger tree (another instance published since) is left alone.
    func syncLog(into report: inout SyncReport) async throws(ObjectStoreError) {
        guard let local = FileManager.default.contents(atPath: directory.logCheckpointPath) else { return }
        guard let localSize = verifiedTreeSize(local) else {
            // Never spread a checkpoint that nodes would refuse.
            throw .localFiles("\(directory.logCheckpointPath) does not verify with this server's public key")
        }
        let checkpointKey = client.location.key(for: "log/checkpoint")
        let remote = try await client.get(checkpointKey)
        if remote == Array(local) { return }
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
            let width = tile.index < TileLayout.fullTileCount(level: tile.level, treeSize: localSize)
                ? TileID.fullWidth : TileLayout.partialWidth(level: tile.level, treeSize: localSize)
            guard let current = try? TileID(level: tile.level, index: tile.index, width: width),
                  let bytes = FileManager.default.contents(atPath: directory.logPath + "/" + current.path),
                  (try? reader.add(current, bytes: bytes)) != nil
            else { return nil }
        }
        return try? MerkleProofGenerator.rootHash(treeSize: treeSize, reader: reader)
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
