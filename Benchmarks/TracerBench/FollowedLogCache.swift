import Crypto
import Foundation
import Matching
import PositiveListFormat
import TracerCore
import TransparencyLog

/// A node's cache holding a followed list log, as `tracer check --offline` reads it after an
/// update: written for the matching benchmarks, with the server's appender and signer.
struct FollowedLogCache {
    let cacheDirectory: String
    let origin: String
    let entryCount: Int
    let entriesFileBytes: Int
    let stateFileBytes: Int
    let treeSize: UInt64
    let rootHash: MerkleHash
    /// Building the tree, signing and writing, plus `cutSeconds` (cutting batches into entries).
    let writeSeconds: Double
    var store: FollowedLogStore { FollowedLogStore(directory: cacheDirectory + "/log") }

    /// Writes `entries` as the followed log a node holds after following the list's log from its
    /// start: the tree built by the server's appender, a checkpoint with the default origin signed
    /// by the list's key plus the log's timestamp cosignature, and state and entries through
    /// `FollowedLogStore` (what `ListLogUpdater` saves). Checks that the checkpoint opens as the
    /// node opens it before anything is measured.
    static func write(
        _ entries: [Data], to cacheDirectory: String, cutSeconds: Double, signingKey: Curve25519.Signing.PrivateKey, now: UnixSeconds
    ) throws -> FollowedLogCache {
        let started = ContinuousClock.now
        let origin = PositiveListPublicKey(signingKey.publicKey).defaultLogOrigin
        let appended = try LogAppender.append(entries, to: .empty)
        let signer = try NoteSigner(name: origin, privateKey: signingKey)
        let timestamp = try NoteSigner(name: origin, type: .cosignatureV1, privateKey: signingKey)
        let note = try Checkpoint(origin: origin, treeSize: appended.rightEdge.treeSize, rootHash: appended.rootHash)
            .signed(by: [signer, timestamp], timestamp: UInt64(now)).encoded
        let opened = try Checkpoint.open(
            note, origin: origin, logKey: try NoteVerifierKey(name: origin, type: .ed25519, publicKey: signingKey.publicKey),
            witnesses: [timestamp.verifierKey])
        guard opened.checkpoint.treeSize == UInt64(entries.count), opened.checkpoint.rootHash == appended.rightEdge.rootHash,
              opened.cosignatures.first?.cosignatureTime == UInt64(now)
        else { throw BenchmarkFailure("the log's checkpoint does not open as written") }
        let store = FollowedLogStore(directory: cacheDirectory + "/log")
        try store.save(FollowedLogState(checkpointNote: note, edge: appended.rightEdge), appending: entries)
        try Data("{\"lastUpdated\": \(now)}\n".utf8).write(to: URL(fileURLWithPath: cacheDirectory + "/state.json"))
        let size = { (path: String) in ((try? FileManager.default.attributesOfItem(atPath: path))?[.size] as? NSNumber)?.intValue ?? 0 }
        return FollowedLogCache(
            cacheDirectory: cacheDirectory, origin: origin, entryCount: entries.count, entriesFileBytes: size(store.directory + "/entries"),
            stateFileBytes: size(store.directory + "/state"), treeSize: appended.rightEdge.treeSize, rootHash: appended.rootHash,
            writeSeconds: cutSeconds + seconds(ContinuousClock.now - started))
    }
}
