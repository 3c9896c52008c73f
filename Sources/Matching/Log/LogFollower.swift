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

/// Why a log could not be brought up to date. `.rollback` and `.notAnExtension` are evidence
/// that the authority (or whoever holds its key) showed this node two histories; the caller keeps
/// both signed checkpoints.
public enum LogFollowError: Error, Sendable, CustomStringConvertible {
    /// The checkpoint does not open: bad or missing signature, another origin, too few witnesses.
    case checkpoint(CheckpointError)
    /// A smaller tree than one already verified.
    case rollback(held: UInt64, offered: UInt64, heldNote: Data, offeredNote: Data)
    /// The offered tree is not the held one extended: the same size with another root, or the
    /// entries served after the held ones do not lead to the offered root (a fork, or a rewritten
    /// or altered entry).
    case notAnExtension(heldSize: UInt64, offeredSize: UInt64, expectedRoot: MerkleHash, computedRoot: MerkleHash, heldNote: Data, offeredNote: Data)
    /// A bundle that is not what its path says (cut short, too long, badly framed).
    case bundle(path: String, TileError)
    /// The files could not be fetched.
    case unreachable(String)

    public var description: String {
        switch self {
        case .checkpoint(let error): "the list's checkpoint was refused: \(error)"
        case .rollback(let held, let offered, _, _):
            "the list server offered a log of \(offered) entries after this node had verified \(held): a list cannot shrink, so it was refused and both signed checkpoints were kept"
        case .notAnExtension(let heldSize, let offeredSize, _, _, _, _):
            "the list server's log of \(offeredSize) entries does not extend the \(heldSize) this node verified (a fork or a rewritten entry); it was refused and both signed checkpoints were kept"
        case .bundle(let path, let error): "the list server sent a damaged file (\(path)): \(error)"
        case .unreachable(let reason): "the list's files could not be fetched: \(reason)"
        }
    }

    /// Whether this is proof of two histories (to keep and to show), not a transient fault.
    public var isEvidence: Bool {
        switch self {
        case .rollback, .notAnExtension: true
        default: false
        }
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
        let note: Data
        do {
            note = try await fetcher.checkpoint()
        } catch {
            throw .unreachable(String(describing: error))
        }
        let verified: VerifiedCheckpoint
        let timestampKey = source.timestampKey
        do {
            // The log's own timestamp is opened beside the witnesses but does not count as one.
            verified = try Checkpoint.open(note, origin: source.origin, logKey: source.logKey,
                                           witnesses: source.witnesses + [timestampKey].compactMap { $0 }, requiredCosignatures: 0)
        } catch {
            throw .checkpoint(error)
        }
        let witnessed = verified.cosignatures.filter { source.witnesses.contains($0.key) }.count
        guard witnessed >= source.requiredCosignatures else {
            throw .checkpoint(.tooFewCosignatures(valid: witnessed, required: source.requiredCosignatures))
        }
        let signedAt = verified.cosignatures.first { $0.key == timestampKey }?.cosignatureTime
        let edge = held?.edge ?? .empty
        let offered = verified.checkpoint
        guard offered.treeSize >= edge.treeSize else {
            throw .rollback(held: edge.treeSize, offered: offered.treeSize, heldNote: held?.checkpointNote ?? Data(), offeredNote: note)
        }
        let entries = try await entries(from: edge, to: offered.treeSize, fetcher: fetcher)
        let appended: AppendResult
        do {
            appended = try LogAppender.append(entries, to: edge)
        } catch {
            throw .bundle(path: "tile/entries", error)
        }
        guard appended.rootHash == offered.rootHash else {
            throw .notAnExtension(heldSize: edge.treeSize, offeredSize: offered.treeSize, expectedRoot: offered.rootHash,
                                  computedRoot: appended.rootHash, heldNote: held?.checkpointNote ?? Data(), offeredNote: note)
        }
        return LogAdvance(state: FollowedLogState(checkpointNote: note, edge: appended.rightEdge), checkpoint: verified, newEntries: entries,
                          signedAt: signedAt)
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
            let bundle: EntryBundleID
            do {
                bundle = try EntryBundleID(index: bundleIndex, width: width)
            } catch {
                throw .bundle(path: "tile/entries", error)
            }
            let heldEntries = bundleIndex == edge.treeSize >> 8 ? edge.partialBundleEntries : []
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
            let decoded: [Data]
            do {
                decoded = try EntryBundle.decode(prefix + rest, as: bundle)
            } catch {
                throw .bundle(path: bundle.path, error)
            }
            entries += decoded.dropFirst(heldEntries.count)
            index = (bundleIndex << 8) + UInt64(width)
        }
        return entries
    }
}
