import Crypto
import Foundation
import PositiveListFormat
import Testing
import TestTiers
import TransparencyLog

/// `log/uploads`: the authority's `acceptUploads` as a note signed by the log's key
/// (docs/positive-list-format.md, "Upload policy").
@Suite(.tags(.unit)) struct UploadPolicyNoteTests {
    let key = Curve25519.Signing.PrivateKey()
    let origin = "tracer-list/3f1c0e9a5b7d2468"

    var signer: NoteSigner { get throws { try NoteSigner(name: origin, privateKey: key) } }
    var verifier: NoteVerifierKey { get throws { try NoteVerifierKey(name: origin, type: .ed25519, publicKey: key.publicKey) } }

    @Test func theTextIsThreeLinesWithTheKindsInOrder() throws {
        #expect(UploadPolicyNote(origin: origin, accepts: .ids).text == "tracer-uploads/v1\ntracer-list/3f1c0e9a5b7d2468\naccept ids\n")
        #expect(UploadPolicyNote(origin: origin, accepts: .keys).text == "tracer-uploads/v1\ntracer-list/3f1c0e9a5b7d2468\naccept keys\n")
        #expect(UploadPolicyNote(origin: origin, accepts: .both).text == "tracer-uploads/v1\ntracer-list/3f1c0e9a5b7d2468\naccept ids keys\n")
        for kinds in [AcceptedUploads.ids, .keys, .both] {
            let policy = UploadPolicyNote(origin: origin, accepts: kinds)
            #expect(try UploadPolicyNote(text: policy.text) == policy)
            let note = try policy.signed(by: signer)
            #expect(try UploadPolicyNote.open(note.encoded, origin: origin, logKey: verifier) == policy)
        }
    }

    @Test(arguments: [
        "tracer-uploads/v1\no\naccept ids", "tracer-uploads/v1\no\n", "tracer-uploads/v1\no\naccept ids\nmore\n",
        "tracer-uploads/v2\no\naccept ids\n", "tracer-uploads/v1\no\naccept\n", "tracer-uploads/v1\no\naccept keys ids\n",
        "tracer-uploads/v1\no\naccept ids ids\n", "tracer-uploads/v1\no\naccept  ids\n", "tracer-uploads/v1\no\naccept ids \n",
        "tracer-uploads/v1\no\naccept places\n", "tracer-uploads/v1\no\nallow ids\n",
    ])
    func anythingButTheExactLinesIsRefused(_ text: String) {
        #expect(throws: UploadPolicyError.self) { try UploadPolicyNote(text: text) }
    }

    @Test func anotherKeyOrAnotherOriginIsRefused() throws {
        let note = try UploadPolicyNote(origin: origin, accepts: .keys).signed(by: signer)
        let otherKey = try NoteVerifierKey(name: origin, type: .ed25519, publicKey: Curve25519.Signing.PrivateKey().publicKey)
        #expect(throws: UploadPolicyError.self) { try UploadPolicyNote.open(note.encoded, origin: origin, logKey: otherKey) }
        // The same key signing a policy for another log of that key.
        let other = "health.example/list"
        let otherNote = try UploadPolicyNote(origin: other, accepts: .keys).signed(by: NoteSigner(name: origin, privateKey: key))
        #expect(throws: UploadPolicyError.otherOrigin(other)) { try UploadPolicyNote.open(otherNote.encoded, origin: origin, logKey: verifier) }
    }

    /// One key signs both notes; neither kind can be taken for the other, whatever the origin
    /// (a checkpoint's third line is base64 without a space; a policy's begins "accept ").
    @Test(arguments: ["tracer-uploads/v1", "5", "tracer-list/3f1c0e9a5b7d2468"])
    func aCheckpointIsNeverAPolicyNorAPolicyACheckpoint(_ origin: String) throws {
        let signer = try NoteSigner(name: origin, privateKey: key)
        let verifier = try NoteVerifierKey(name: origin, type: .ed25519, publicKey: key.publicKey)
        let checkpoint = try Checkpoint(origin: origin, treeSize: 5, rootHash: MerkleHash(base64: "pIJo8WjYlzomRX6d3uJHGkvsfYqq+EVHHGaMTUvjVoQ=")!)
        let signedCheckpoint = try checkpoint.signed(by: [signer])
        #expect(throws: UploadPolicyError.self) { try UploadPolicyNote.open(signedCheckpoint.encoded, origin: origin, logKey: verifier) }
        let policy = try UploadPolicyNote(origin: origin, accepts: .both).signed(by: signer)
        #expect(throws: CheckpointError.self) { try Checkpoint.open(policy.encoded, origin: origin, logKey: verifier) }
    }

    @Test func anOversizedNoteIsRefusedBeforeItIsParsed() throws {
        let bytes = Data(repeating: 0x61, count: UploadPolicyNote.maximumByteCount + 1)
        #expect(throws: UploadPolicyError.malformed("it is over \(UploadPolicyNote.maximumByteCount) bytes")) {
            try UploadPolicyNote.open(bytes, origin: origin, logKey: verifier)
        }
    }
}
