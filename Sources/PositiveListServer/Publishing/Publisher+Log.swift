import Crypto
import Foundation
import PositiveListFormat
import ServerStorage
import TracerCore
import TransparencyLog
#if canImport(Glibc)
import Glibc
#endif

/// The log's identity: its origin (the checkpoint's first line and the name of both keys) and
/// the note keys nodes configure (format version 3, docs/positive-list-format.md).
public struct ListLogIdentity: Sendable {
    public let origin: String
    /// The log's own signature: plain Ed25519 (signed-note type 0x01) under the origin.
    public let verifierKey: NoteVerifierKey
    /// The same Ed25519 key as a tlog-cosignature/v1 key (type 0x04) under the same name: its
    /// timestamped signature on every checkpoint says when the server last vouched for it.
    public let timestampKey: NoteVerifierKey

    /// `origin` nil: the default, `tracer-list/` and the first 16 hex digits of SHA-256 of the
    /// public key.
    public init(origin: String?, publicKey: Curve25519.Signing.PublicKey) throws(SignedNoteError) {
        let origin = origin ?? Self.defaultOrigin(publicKey: publicKey)
        self.origin = origin
        self.verifierKey = try NoteVerifierKey(name: origin, type: .ed25519, publicKey: publicKey)
        self.timestampKey = try NoteVerifierKey(name: origin, type: .cosignatureV1, publicKey: publicKey)
    }

    public static func defaultOrigin(publicKey: Curve25519.Signing.PublicKey) -> String {
        PositiveListPublicKey(publicKey).defaultLogOrigin
    }

    /// What a configured origin must be: a valid note key name (non-empty, no space or +, no
    /// control character), at most 255 bytes, and not beginning with `cosignature/`, which
    /// would let one of the key's two signature kinds stand for the other.
    public static func problem(origin: String) -> String? {
        if let problem = NoteNameRule.problem(origin, setting: "logOrigin") { return problem }
        guard !origin.hasPrefix("cosignature/") else { return "logOrigin must not begin with cosignature/" }
        return nil
    }
}

/// Which batches the log holds, kept in the data directory beside the database: written after
/// each checkpoint, so it lags the checkpoint after a crash and is then brought up to it from
/// the published entries.
struct ListLogState: Codable, Equatable {
    var treeSize: UInt64
    var lastIDBatch: UInt64
    var lastKeyBatch: UInt64
    /// The tree size before the last append: whose partial files may still be lying about
    /// (see `prunePartialFiles`). Absent in a state written before it was kept.
    var previousTreeSize: UInt64? = nil
    /// Which history the log keeps (``ListLogHistory``, Publisher+LogHistory.swift). Absent in a
    /// state written before old history was deleted: then nothing has been.
    var history: ListLogHistory? = nil

    static let empty = ListLogState(treeSize: 0, lastIDBatch: 0, lastKeyBatch: 0)

    /// Where the publisher keeps it unless told: beside the published directory, in the data
    /// directory (``ServerPaths/logState``).
    static func defaultPath(for directory: PublishedDirectory) -> String {
        (directory.path as NSString).deletingLastPathComponent + "/log-state.json"
    }
}

/// What the log step of one publication did.
public struct ListLogReport: Sendable, Equatable {
    public var treeSize: UInt64 = 0
    public var appendedEntries: Int = 0
    public var appendedIDBatches: [UInt64] = []
    public var appendedKeyBatches: [UInt64] = []
    /// A checkpoint was signed (after an append, or to refresh its time).
    public var checkpointSigned = false
    /// The witnesses whose cosignatures this publication added to the checkpoint, and those
    /// asked that did not cosign (none asked: no witnesses configured, or none missing).
    public var cosignedBy: [String] = []
    public var witnessesFailed: [String] = []
    /// The log index of the first entry whose bundle is kept (older history deleted); nil when
    /// the deletion pass did not run to its end (it is logged).
    public var historyKeptFromEntry: UInt64?
    /// Old entry bundles and level-0 tiles this publication deleted.
    public var deletedHistoryFiles = 0
}

public enum ListLogError: Error, Sendable, CustomStringConvertible {
    case checkpointUnreadable(String)
    case stateAhead(state: UInt64, checkpoint: UInt64)
    case damaged(String)

    public var description: String {
        switch self {
        case .checkpointUnreadable(let reason):
            return "The published log's checkpoint does not open with this server's key and origin (\(reason)); nothing was appended. If logOrigin or the signing key changed, restore them: a log cannot change its origin."
        case .stateAhead(let state, let checkpoint):
            return "log-state.json says the log holds \(state) entries but the published checkpoint only \(checkpoint); the published directory was replaced by an older copy. Restore the newest one; nothing was appended."
        case .damaged(let reason):
            return "The published log is damaged (\(reason)); nothing was appended."
        }
    }
}

extension Publisher {
    /// Appends the live batches not yet in the log, ids then keys, each in number order, writes
    /// the tiles, then the checkpoint, then the state; re-signs the checkpoint when its time is
    /// `indexRefreshSeconds` old. Reads only the right edge (and, after a crash between the
    /// checkpoint and the state, the entries between them).
    func publishLog(now: UnixSeconds) async throws -> ListLogReport {
        let identity = logIdentity
        var report = ListLogReport()
        let logDirectory = directory.logPath
        try Self.makeDirectories(logDirectory)
        try writeUploadPolicy()

        // The log as published: its checkpoint (none yet: empty) and when it was last signed.
        var checkpoint: Checkpoint?
        var signedAt: UInt64?
        if let bytes = FileManager.default.contents(atPath: directory.logCheckpointPath) {
            do {
                let opened = try Checkpoint.open(bytes, origin: identity.origin, logKey: identity.verifierKey, witnesses: [identity.timestampKey])
                checkpoint = opened.checkpoint
                signedAt = opened.cosignatures.first { $0.key == identity.timestampKey }?.cosignatureTime
            } catch {
                throw ListLogError.checkpointUnreadable(error.description)
            }
        }
        let size = checkpoint?.treeSize ?? 0
        let read: (String) throws -> Data = { path in
            guard let data = FileManager.default.contents(atPath: logDirectory + "/" + path) else { throw TileError.missingTile(path: path) }
            return data
        }

        var state = Self.readLogState(at: logStatePath) ?? .empty
        if state.treeSize > size { throw ListLogError.stateAhead(state: state.treeSize, checkpoint: size) }
        if state.treeSize < size {
            // A crash after the checkpoint and before the state: read what the entries between say.
            state = try Self.recover(state, upTo: size, read: read)
            try writeLogState(state)
        }
        let edge = try LogRightEdge.load(treeSize: size, expectedRoot: checkpoint?.rootHash, read: read)

        // What the batches published, from the database: any instance on it can append, whatever
        // files its own directory holds.
        let contents = try await store.liveBatchContents(idBatchesAfter: state.lastIDBatch, keyBatchesAfter: state.lastKeyBatch)
        var entries: [Data] = []
        var lastID = state.lastIDBatch
        for batch in contents.idBatches {
            entries += try ListLogEntry.entries(idBatch: batch.number, entries: batch.entries).map { Data(try $0.encode()) }
            report.appendedIDBatches.append(batch.number)
            lastID = max(lastID, batch.number)
        }
        var lastKey = state.lastKeyBatch
        for batch in contents.keyBatches {
            entries += try ListLogEntry.entries(keyBatch: batch.number, records: batch.records).map { Data(try $0.encode()) }
            report.appendedKeyBatches.append(batch.number)
            lastKey = max(lastKey, batch.number)
        }

        report.treeSize = size
        guard !entries.isEmpty else {
            // Nothing new: a new note for the same tree once the last one is old, so that nodes
            // can tell an idle log from a frozen one; and the first publication's empty tree.
            if checkpoint == nil || signedAt.map({ Int64(clamping: $0) <= now - indexRefreshSeconds }) ?? true {
                try await writeCheckpoint(
                    Checkpoint(origin: identity.origin, treeSize: size, rootHash: edge.rootHash), previousSize: size, now: now, report: &report)
                report.checkpointSigned = true
            } else if let checkpoint {
                await completeCosignatures(of: checkpoint, report: &report)
            }
            if Self.readLogState(at: logStatePath) != state { try writeLogState(state) }
            return report
        }

        let result = try LogAppender.append(entries, to: edge)
        let files = result.writes.map { (bytes: [UInt8]($0.bytes), path: logDirectory + "/" + $0.path) }
        for parent in Set(files.map { ($0.path as NSString).deletingLastPathComponent }) { try Self.makeDirectories(parent) }
        // All durable together, not one by one (issue 39's 1 s for a publication). A file beyond
        // the published checkpoint may be left by a run that crashed before its checkpoint; no
        // checkpoint names it, so it is replaced unless it is the same.
        let written = try AtomicFile.writeAll(files)
        for parent in written { Self.removeTemporaryFiles(in: parent) }
        // AtomicFile makes each file's own directory durable, not the directories created for it:
        // after a power cut the checkpoint must not name a tile whose directory entry was lost.
        try Self.syncAncestors(of: written, below: directory.path)
        try await reach(.logTilesWritten)
        try await writeCheckpoint(
            Checkpoint(origin: identity.origin, treeSize: result.rightEdge.treeSize, rootHash: result.rootHash), previousSize: size, now: now,
            report: &report)
        report.checkpointSigned = true
        try await reach(.logCheckpointReplaced)
        let previousSize = state.previousTreeSize
        // The history kept (`history`) is the deletion pass's, carried over as it is.
        state.treeSize = result.rightEdge.treeSize
        state.lastIDBatch = lastID
        state.lastKeyBatch = lastKey
        state.previousTreeSize = size
        try writeLogState(state)
        Self.prunePartialFiles(in: logDirectory, sizes: [previousSize, size].compactMap { $0 }, keeping: [size, state.treeSize])
        report.treeSize = state.treeSize
        report.appendedEntries = entries.count
        return report
    }

    /// Publishes `log/uploads`, the authority's `acceptUploads` signed by the log's key, when the
    /// one in place is missing or says something else (the setting changed, or a server from
    /// before it). An Ed25519 signature from this library is not the same twice, so the text is
    /// compared, not the bytes: an unchanged policy is never rewritten, and its ETag stays.
    func writeUploadPolicy() throws {
        let identity = logIdentity
        let policy = UploadPolicyNote(origin: identity.origin, accepts: keySettings.accepts)
        if let bytes = FileManager.default.contents(atPath: directory.uploadPolicyPath),
           (try? UploadPolicyNote.open(bytes, origin: identity.origin, logKey: identity.verifierKey)) == policy {
            return
        }
        let note = try policy.signed(by: NoteSigner(name: identity.origin, type: .ed25519, privateKey: signingKey))
        try AtomicFile.write(Array(note.encoded), to: directory.uploadPolicyPath)
        Self.removeTemporaryFiles(in: directory.logPath)
    }

    /// Signs `checkpoint` (the log's signature, then its timestamped one), replaces
    /// `log/checkpoint` with it, then has the configured witnesses cosign it (their proofs from the
    /// tiles of the tree just written; `previousSize` for a witness this log has no record of) and
    /// replaces it again with their lines appended.
    ///
    /// Published first, cosigned after: a witness must only ever see a tree this log has
    /// committed to. Were a tree cosigned and its checkpoint then not written (a full disk, a
    /// crash), the next publication could append other entries at the same positions (batches cut
    /// meanwhile come first), and every witness would refuse this log from then on as a fork.
    private func writeCheckpoint(
        _ checkpoint: Checkpoint, previousSize: UInt64, now: UnixSeconds, report: inout ListLogReport
    ) async throws {
        let identity = logIdentity
        let signers = [
            try NoteSigner(name: identity.origin, type: .ed25519, privateKey: signingKey),
            try NoteSigner(name: identity.origin, type: .cosignatureV1, privateKey: signingKey),
        ]
        let note = try checkpoint.signed(by: signers, timestamp: UInt64(max(now, 0)))
        try AtomicFile.write(Array(note.encoded), to: directory.logCheckpointPath)
        Self.removeTemporaryFiles(in: directory.logPath)
        guard let cosigner else { return }
        let result = await cosigner.cosign(note, checkpoint: checkpoint, previousSize: previousSize, proof: proofMaker(for: checkpoint))
        report.cosignedBy = result.cosigned
        report.witnessesFailed = result.failed.map(\.witness)
        guard !result.cosigned.isEmpty else { return }
        addCosignatures(result.note)
    }

    /// Replaces the published checkpoint with the same note carrying more cosignatures. A write
    /// that fails is logged, not thrown: the published checkpoint is the log's own, of the same
    /// tree, and the next publication asks the witnesses again (`completeCosignatures`).
    private func addCosignatures(_ note: SignedNote) {
        do {
            try AtomicFile.write(Array(note.encoded), to: directory.logCheckpointPath)
            Self.removeTemporaryFiles(in: directory.logPath)
        } catch {
            logger.error("the witnesses' cosignatures could not be added to log/checkpoint; the next publication asks again", metadata: [
                "reason": "\(error)",
            ])
        }
    }

    /// A publication that signs no checkpoint asks the witnesses whose cosignature the published
    /// one lacks (down, or refusing, the last time) again, and adds what they give: a witness that
    /// was down at an append cosigns at the next publication, not only when the tree grows or its
    /// note is refreshed a day later. The log's own signatures are left as they are.
    private func completeCosignatures(of checkpoint: Checkpoint, report: inout ListLogReport) async {
        guard let cosigner, let bytes = FileManager.default.contents(atPath: directory.logCheckpointPath),
              let note = try? SignedNote(parsing: bytes)
        else { return }
        let missing = cosigner.missing(from: note)
        guard !missing.isEmpty else { return }
        let result = await cosigner.cosign(
            note, checkpoint: checkpoint, previousSize: checkpoint.treeSize, asking: missing, proof: proofMaker(for: checkpoint))
        report.cosignedBy = result.cosigned
        report.witnessesFailed = result.failed.map(\.witness)
        guard !result.cosigned.isEmpty else { return }
        addCosignatures(result.note)
    }

    /// Consistency proofs to `checkpoint`'s tree from the published hash tiles: the few tiles of
    /// that tree the proof's nodes lie in (a couple per level, whatever the log's size).
    private nonisolated func proofMaker(for checkpoint: Checkpoint) -> @Sendable (UInt64) throws -> [MerkleHash] {
        let logDirectory = directory.logPath
        let newSize = checkpoint.treeSize
        return { oldSize in try Self.consistencyProof(from: oldSize, to: newSize, logDirectory: logDirectory) }
    }

    static func consistencyProof(from oldSize: UInt64, to newSize: UInt64, logDirectory: String) throws -> [MerkleHash] {
        var reader = TileHashReader(treeSize: newSize)
        for tile in try TileLayout.tilesForConsistency(oldSize: oldSize, newSize: newSize) {
            guard let bytes = FileManager.default.contents(atPath: logDirectory + "/" + tile.path) else {
                throw TileError.missingTile(path: tile.path)
            }
            try reader.add(tile, bytes: bytes)
        }
        return try MerkleProofGenerator.consistencyProof(oldSize: oldSize, newSize: newSize, reader: reader)
    }

    func writeLogState(_ state: ListLogState) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        try AtomicFile.write(Array(try encoder.encode(state)) + [0x0A], to: logStatePath, mode: 0o600)
    }

    static func readLogState(at path: String) -> ListLogState? {
        guard let data = FileManager.default.contents(atPath: path) else { return nil }
        return try? JSONDecoder().decode(ListLogState.self, from: data)
    }

    /// The state at `size`, from `state` and the entries published between the two.
    static func recover(_ state: ListLogState, upTo size: UInt64, read: (String) throws -> Data) throws -> ListLogState {
        var recovered = state
        var index = state.treeSize
        while index < size {
            let bundle = try TileLayout.entryBundle(holding: index, treeSize: size)
            let entries = try EntryBundle.decode(try read(bundle.path), as: bundle)
            for position in bundle.entryRange where position >= index && position < size {
                let entry = try ListLogEntry(decoding: Array(entries[Int(position - bundle.entryRange.lowerBound)]))
                switch entry.kind {
                case .ids: recovered.lastIDBatch = max(recovered.lastIDBatch, entry.batchNumber)
                case .keys: recovered.lastKeyBatch = max(recovered.lastKeyBatch, entry.batchNumber)
                }
            }
            index = bundle.entryRange.upperBound
        }
        recovered.treeSize = size
        return recovered
    }

    /// tlog-tiles names a partial tile or bundle by its width, so every append writes new partial
    /// files and, left alone, a tile's narrower versions would all stay: for a bundle of 256
    /// key-batch entries of a few kilobytes, about 150 MB of superseded files (found by
    /// `TracerBench log-bytes`). Kept: the partial files of the tree just published and of the one
    /// before it (a node that read the previous checkpoint, served for up to 60 s, may still ask
    /// for them); deleted: every other file in the partial directories of the trees of `sizes`
    /// (the last two before this append), so that no tile keeps more than two partial versions and
    /// a tile that became full loses its partial directory one append later. Full tiles are never
    /// touched. Best effort: a file that cannot be deleted costs space only.
    static func prunePartialFiles(in logDirectory: String, sizes: [UInt64], keeping kept: [UInt64]) {
        let keep = Set(kept.flatMap(partialPaths))
        let directories = Set(sizes.flatMap(partialPaths).map { ($0 as NSString).deletingLastPathComponent })
        for directory in directories {
            let names = (try? FileManager.default.contentsOfDirectory(atPath: logDirectory + "/" + directory)) ?? []
            for name in names where !keep.contains(directory + "/" + name) {
                unlink(logDirectory + "/" + directory + "/" + name)
            }
            // Empty once the tile is full and no kept checkpoint names a partial version of it.
            rmdir(logDirectory + "/" + directory)
        }
    }

    /// The partial files of the tree of `size`: its partial tile at each level and its partial
    /// bundle (tile paths, below `log/`).
    static func partialPaths(_ size: UInt64) -> [String] {
        var paths = TileLayout.partialTiles(treeSize: size).map(\.path)
        let width = TileLayout.partialWidth(level: 0, treeSize: size)
        if width > 0, let bundle = try? EntryBundleID(index: TileLayout.fullTileCount(level: 0, treeSize: size), width: width) {
            paths.append(bundle.path)
        }
        return paths
    }

    /// fsync of every directory from each of `directories` up to `root`, each once.
    static func syncAncestors(of directories: Set<String>, below root: String) throws(FileWriteError) {
        var synced = Set<String>()
        for directory in directories {
            var current = directory
            while current.hasPrefix(root), current.count >= root.count, synced.insert(current).inserted {
                try AtomicFile.syncDirectory(current)
                if current == root { break }
                current = (current as NSString).deletingLastPathComponent
            }
        }
    }

    static func makeDirectories(_ path: String) throws(FileWriteError) {
        do {
            try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o755])
        } catch {
            throw .cannotCreate(path: path, reason: String(describing: error))
        }
    }

    static func removeTemporaryFiles(in directory: String) {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
        for name in names where name.hasPrefix(AtomicFile.temporaryPrefix) { unlink(directory + "/" + name) }
    }
}
