import Foundation
@testable import TransparencyLog

/// A log's verifier key and the tree a witness holds for it: what a request is checked against.
private let logKey = try? NoteVerifierKey(text: "example.org/tracer-list+58d752fd+AddamAGCsQq31Uv+08lkBzoO4XLz2qYjJa8CGmj3B1Ea")
private let held = WitnessedTree(size: 5, root: MerkleTree.emptyRoot)

/// A `POST /v1/add-checkpoint` body (C2SP tlog-witness), from anyone: parsed, encoded back, its
/// checkpoint read and checked as a witness of that log would (the signature stops a forged one,
/// so its size and proof also go to the consistency check directly); and the same bytes as a
/// witness's answer to a log: a 409's size, a 200's cosignature lines.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Data(bytes: data, count: size)
    _ = WitnessAnswer.size(inBody: bytes)
    guard let request = try? AddCheckpointRequest(parsing: bytes) else { return 0 }
    _ = request.encoded
    if let logKey { _ = try? request.check(logKey: logKey, held: held) }
    if let checkpoint = try? request.checkpoint() {
        _ = try? MerkleProof.verifyConsistency(
            oldSize: request.oldSize, newSize: checkpoint.treeSize, oldRoot: held.root, newRoot: checkpoint.rootHash, proof: request.proof)
        if let logKey {
            _ = try? WitnessAnswer.cosignatures(inBody: bytes.suffix(from: bytes.startIndex + min(bytes.count, 8)), for: request.note, witness: logKey)
        }
    }
    return 0
}
