import Crypto
import Foundation
import TransparencyLog

/// One authority's log as a node is configured to follow it: where it says it is (the origin
/// every checkpoint must name), the key that signs its checkpoints, and the witnesses of which at
/// least `requiredCosignatures` must have cosigned a checkpoint before the node trusts it.
public struct FollowedLogSource: Sendable, Equatable {
    public var origin: String
    public var logKey: NoteVerifierKey
    public var witnesses: [NoteVerifierKey]
    public var requiredCosignatures: Int

    public init(origin: String, logKey: NoteVerifierKey, witnesses: [NoteVerifierKey] = [], requiredCosignatures: Int = 0) {
        self.origin = origin
        self.logKey = logKey
        self.witnesses = witnesses
        self.requiredCosignatures = requiredCosignatures
    }

    /// The log's own timestamped signature (tlog-cosignature/v1 by the log's key under its name,
    /// docs/positive-list-format.md, "Freshness"): derived, not configured.
    var timestampKey: NoteVerifierKey? {
        guard let key = try? Curve25519.Signing.PublicKey(rawRepresentation: logKey.publicKey) else { return nil }
        return try? NoteVerifierKey(name: logKey.name, type: .cosignatureV1, publicKey: key)
    }
}

/// How the follower reaches a log's files (HTTP with libcurl on a node; memory in tests).
public protocol LogFileFetching: Sendable {
    /// The checkpoint's bytes as served now.
    func checkpoint() async throws -> Data
    /// The bytes of the file at `path` (a tile path under the log's prefix) from byte `offset` on:
    /// a node already holds the start of a partial bundle and asks only for what follows (an
    /// HTTP Range request).
    func file(_ path: String, fromByte offset: Int) async throws -> Data
}

/// Why a log could not be brought up to date. Only `.fork` proves that the log's key signed two
/// histories: two signed checkpoints of one size with different roots, which anyone holding the
/// log's public key can check; the caller keeps both. The others say that this update failed
/// and the held list stays, since a cache or mirror can cause every one of them.
public enum LogFollowError: Error, Sendable, CustomStringConvertible {
    /// The checkpoint does not open: bad or missing signature, another origin, too few witnesses.
    case checkpoint(CheckpointError)
    /// A smaller tree than the one held: an older checkpoint, which a cache that has not caught up
    /// serves as readily as a server rolling back; refused, the held list stays.
    case olderTree(held: UInt64, offered: UInt64)
    /// Two signed checkpoints of the same size with different roots: a split view.
    case fork(size: UInt64, heldNote: Data, offeredNote: Data)
    /// The entries served after the held ones do not lead to the signed root: altered or damaged
    /// files, or a tree that does not extend the held one. Which of the two cannot be told from
    /// the entries alone, so it is refused but not kept as evidence.
    case entriesDoNotLeadToCheckpoint(heldSize: UInt64, offeredSize: UInt64, expectedRoot: MerkleHash, computedRoot: MerkleHash)
    /// The held state does not open with the log's keys or does not match its own checkpoint:
    /// the node's copy is damaged and it must follow the log afresh.
    case heldStateDamaged(String)
    /// A bundle that is not what its path says (cut short, too long, badly framed).
    case bundle(path: String, TileError)
    /// The files could not be fetched.
    case unreachable(String)

    public var description: String {
        switch self {
        case .checkpoint(let error): "the list's checkpoint was refused: \(error)"
        case .olderTree(let held, let offered):
            "the list server (or a cache in front of it) offered a log of \(offered) entries, older than the \(held) this node holds; the held list stays, and the next update asks again"
        case .fork(let size, _, _):
            "the list's key signed two different logs of \(size) entries: the list server shows different lists to different nodes. Both signed checkpoints were kept as evidence; tell the health authority"
        case .entriesDoNotLeadToCheckpoint(let heldSize, let offeredSize, _, _):
            "the entries the list server sent from entry \(heldSize) on do not make the signed log of \(offeredSize) entries (damaged or altered files, or a log that does not extend the one this node holds); they were refused, and the next update tries again"
        case .heldStateDamaged(let reason): "this node's copy of the list log is damaged (\(reason)); it will be downloaded again"
        case .bundle(let path, let error): "the list server sent a damaged file (\(path)): \(error)"
        case .unreachable(let reason): "the list's files could not be fetched: \(reason)"
        }
    }

    /// Whether this is proof of two histories (to keep and to show), not a fault of one update.
    public var isEvidence: Bool {
        if case .fork = self { return true }
        return false
    }
}

/// A successful step: the state to keep and the entries the log gained since the held state.
public struct LogAdvance: Sendable {
    public var state: FollowedLogState
    public var checkpoint: VerifiedCheckpoint
    public var newEntries: [Data]
    /// When the log signed this checkpoint, by its own timestamped signature; nil when it has
    /// none that verifies. What a node compares with `check.max_list_age` to tell a log that
    /// stopped (or a mirror that froze it) from one with nothing new.
    public var signedAt: UInt64?
}

/// Brings a followed log up to date by the right-edge method: verify the checkpoint, download
/// the entries after the held tree (only their bytes, with the start of a partial bundle the node
/// already holds skipped), append them to the held right edge, and accept the checkpoint only if
/// the recomputed root is its root. That proves at once that every new entry is in the signed
/// tree and that the tree extends the held one, since the held edge commits to every earlier
/// entry: no hash tile or proof is fetched, and a node downloads each entry once.
public enum LogFollower {
    public static func advance(
        _ held: FollowedLogState?, source: FollowedLogSource, fetcher: some LogFileFetching
    ) async throws(LogFollowError) -> LogAdvance {
        let (note, verified) = try await fetchCheckpoint(source: source, fetcher: fetcher)
        let signedAt = timestamp(of: verified, source: source)
        let edge = held?.edge ?? .empty
        let offered = verified.checkpoint
        var heldSignedAt: UInt64?
        if let held {
            let opened: VerifiedCheckpoint
            do {
                opened = try open(held.checkpointNote, source: source)
            } catch {
                throw .heldStateDamaged("its checkpoint no longer opens: \(error)")
            }
            guard opened.checkpoint.treeSize == edge.treeSize, opened.checkpoint.rootHash == edge.rootHash else {
                throw .heldStateDamaged("its right edge is not its checkpoint's tree")
            }
            heldSignedAt = timestamp(of: opened, source: source)
        }
        guard offered.treeSize >= edge.treeSize else { throw .olderTree(held: edge.treeSize, offered: offered.treeSize) }
        if let held, offered.treeSize == edge.treeSize {
            guard offered.rootHash == edge.rootHash else { throw .fork(size: edge.treeSize, heldNote: held.checkpointNote, offeredNote: note) }
            // The same tree: keep whichever note was signed last, so that a cache serving an
            // older note of it never makes a current list look outdated.
            if let heldSignedAt, signedAt.map({ $0 < heldSignedAt }) ?? true {
                return LogAdvance(state: held, checkpoint: try open(held.checkpointNote, source: source), newEntries: [], signedAt: heldSignedAt)
            }
            return LogAdvance(state: FollowedLogState(checkpointNote: note, edge: edge), checkpoint: verified, newEntries: [], signedAt: signedAt)
        }
        let entries = try await entries(from: edge, to: offered.treeSize, fetcher: fetcher)
        let appended: AppendResult
        do {
            appended = try LogAppender.append(entries, to: edge)
        } catch {
            throw .bundle(path: "tile/entries", error)
        }
        guard appended.rootHash == offered.rootHash else {
            throw .entriesDoNotLeadToCheckpoint(heldSize: edge.treeSize, offeredSize: offered.treeSize, expectedRoot: offered.rootHash,
                                                computedRoot: appended.rootHash)
        }
        return LogAdvance(state: FollowedLogState(checkpointNote: note, edge: appended.rightEdge), checkpoint: verified, newEntries: entries,
                          signedAt: signedAt)
    }

    /// Follows a log the node holds nothing of without downloading its history: entry bundles
    /// are fetched from the newest backwards until a full bundle holds no live entry (`isLive`:
    /// one that can still match an encounter the node keeps), the right edge at that bundle's
    /// start is read from the served tree's hash tiles, and every fetched entry, that bundle's
    /// included, is appended to that edge: the checkpoint is accepted only if that gives its
    /// root, which proves the tiles and every entry at once. The newest bundle is always taken.
    /// Returns the advance and the log index of the first entry taken.
    public static func start(
        source: FollowedLogSource, fetcher: some LogFileFetching, isLive: (Data) -> Bool
    ) async throws(LogFollowError) -> (advance: LogAdvance, firstIndex: UInt64) {
        let (note, verified) = try await fetchCheckpoint(source: source, fetcher: fetcher)
        let size = verified.checkpoint.treeSize
        let fullWidth = UInt64(TileID.fullWidth)
        var taken: [[Data]] = []
        var start = size
        var bundleIndex: UInt64? = size == 0 ? nil : (size - 1) / fullWidth
        let newest = bundleIndex
        while let index = bundleIndex {
            let width = Int(min(size - index * fullWidth, fullWidth))
            let entries = try await bundle(index: index, width: width, holding: [], fetcher: fetcher)
            // The bundle that ends the walk is taken too: only the root proves that it is the
            // log's and holds nothing live, so an unsigned answer cannot end the walk early with
            // a made-up bundle of old entries. (Retention drops it again at once.)
            taken.append(entries)
            start = index * fullWidth
            if index != newest, !entries.contains(where: isLive) { break }
            bundleIndex = index == 0 ? nil : index - 1
        }
        let edge: LogRightEdge
        do {
            edge = try await LogRightEdge.load(treeSize: start, servedSize: size) { path in try await fetcher.file(path, fromByte: 0) }
        } catch let error as TileError {
            throw .bundle(path: "tile", error)
        } catch {
            throw .unreachable(String(describing: error))
        }
        let entries = taken.reversed().flatMap { $0 }
        let appended: AppendResult
        do {
            appended = try LogAppender.append(entries, to: edge)
        } catch {
            throw .bundle(path: "tile/entries", error)
        }
        guard appended.rootHash == verified.checkpoint.rootHash else {
            throw .entriesDoNotLeadToCheckpoint(heldSize: start, offeredSize: size, expectedRoot: verified.checkpoint.rootHash,
                                                computedRoot: appended.rootHash)
        }
        let advance = LogAdvance(state: FollowedLogState(checkpointNote: note, edge: appended.rightEdge), checkpoint: verified,
                                 newEntries: entries, signedAt: timestamp(of: verified, source: source))
        return (advance, start)
    }

    /// The checkpoint as served, and opened with the source's keys.
    static func fetchCheckpoint(
        source: FollowedLogSource, fetcher: some LogFileFetching
    ) async throws(LogFollowError) -> (note: Data, verified: VerifiedCheckpoint) {
        let note: Data
        do {
            note = try await fetcher.checkpoint()
        } catch {
            throw .unreachable(String(describing: error))
        }
        return (note, try open(note, source: source))
    }

    /// Opens a checkpoint with the source's keys: the log's signature, its origin, and at least
    /// k of the named witnesses. The log's own timestamp is opened beside the witnesses but never
    /// counts as one.
    static func open(_ note: Data, source: FollowedLogSource) throws(LogFollowError) -> VerifiedCheckpoint {
        let verified: VerifiedCheckpoint
        do {
            verified = try Checkpoint.open(note, origin: source.origin, logKey: source.logKey,
                                           witnesses: source.witnesses + [source.timestampKey].compactMap { $0 }, requiredCosignatures: 0)
        } catch {
            throw .checkpoint(error)
        }
        let witnessed = verified.cosignatures.filter { source.witnesses.contains($0.key) }.count
        guard witnessed >= source.requiredCosignatures else {
            throw .checkpoint(.tooFewCosignatures(valid: witnessed, required: source.requiredCosignatures))
        }
        return verified
    }

    static func timestamp(of checkpoint: VerifiedCheckpoint, source: FollowedLogSource) -> UInt64? {
        checkpoint.cosignatures.first { $0.key == source.timestampKey }?.cosignatureTime
    }

    /// The entries with indexes held.treeSize ..< newSize, bundle by bundle. The first bundle's
    /// entries the edge already holds are not fetched again: their framed bytes are the start of
    /// every wider version of that bundle, so only the bytes after them are asked for.
    static func entries(from edge: LogRightEdge, to newSize: UInt64, fetcher: some LogFileFetching) async throws(LogFollowError) -> [Data] {
        var entries: [Data] = []
        var index = edge.treeSize
        while index < newSize {
            let bundleIndex = index >> 8
            let width = Int(min(newSize - (bundleIndex << 8), UInt64(TileID.fullWidth)))
            let heldEntries = bundleIndex == edge.treeSize >> 8 ? edge.partialBundleEntries : []
            entries += try await bundle(index: bundleIndex, width: width, holding: heldEntries, fetcher: fetcher).dropFirst(heldEntries.count)
            index = (bundleIndex << 8) + UInt64(width)
        }
        return entries
    }

    /// The entries of bundle `index` at `width`; of its start, the node already holds
    /// `heldEntries`, whose framed bytes are not fetched again.
    static func bundle(index: UInt64, width: Int, holding heldEntries: [Data], fetcher: some LogFileFetching) async throws(LogFollowError) -> [Data] {
        let bundle: EntryBundleID
        do {
            bundle = try EntryBundleID(index: index, width: width)
        } catch {
            throw .bundle(path: "tile/entries", error)
        }
        var prefix = Data()
        if !heldEntries.isEmpty {
            do {
                prefix = try EntryBundle.encode(heldEntries)
            } catch {
                throw .bundle(path: bundle.path, error)
            }
        }
        let rest: Data
        do {
            rest = try await fetcher.file(bundle.path, fromByte: prefix.count)
        } catch {
            throw .unreachable("\(bundle.path): \(error)")
        }
        do {
            return try EntryBundle.decode(prefix + rest, as: bundle)
        } catch {
            throw .bundle(path: bundle.path, error)
        }
    }
}
