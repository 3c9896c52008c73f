import Crypto
import Foundation
import Testing
import TestTiers
@testable import TransparencyLog

/// C2SP tlog-witness: the add-checkpoint body as bytes, the witness's checks in the spec's order,
/// and the answers a log reads back (the 409's size, the 200's cosignature lines).
@Suite(.tags(.unit)) struct WitnessProtocolTests {
    /// The example request of tlog-witness.md, "add-checkpoint", byte for byte.
    static let specExample = """
        old 20852014
        PlRNCrwHpqhGrupue0L7gxbjbMiKA9temvuZZDDpkaw=
        jrJZDmY8Y7SyJE0MWLpLozkIVMSMZcD5kvuKxPC3swk=
        5+pKlUdi2LeF/BcMHBn+Ku6yhPGNCswZZD1X/6QgPd8=
        /6WVhPs2CwSsb5rYBH5cjHV/wSmA79abXAwhXw3Kj/0=

        example.com/behind-the-sofa
        20852163
        CsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=

        — example.com/behind-the-sofa Az3grlgtzPICa5OS8npVmf1Myq/5IZniMp+ZJurmRDeOoRDe4URYN7u5/Zhcyv2q1gGzGku9nTo+zyWE+xeMcTOAYQ8=
        — example.com/behind-the-sofa opLqBQsREYCgu6xQkYQwJr9fo45a62DN9EdmHXnZdXNqlcVGlCum2Wks+49/V6267UEjw6QUXTS5Rovnzv++qbSzm9Q=

        """

    @Test func theSpecsExampleParsesAndEncodesBackByteForByte() throws {
        let bytes = Data(Self.specExample.utf8)
        let request = try AddCheckpointRequest(parsing: bytes)
        #expect(request.oldSize == 20_852_014)
        #expect(request.proof.map(\.base64) == [
            "PlRNCrwHpqhGrupue0L7gxbjbMiKA9temvuZZDDpkaw=", "jrJZDmY8Y7SyJE0MWLpLozkIVMSMZcD5kvuKxPC3swk=",
            "5+pKlUdi2LeF/BcMHBn+Ku6yhPGNCswZZD1X/6QgPd8=", "/6WVhPs2CwSsb5rYBH5cjHV/wSmA79abXAwhXw3Kj/0=",
        ])
        #expect(request.note.signatures.count == 2)
        let checkpoint = try request.checkpoint()
        #expect(checkpoint.origin == "example.com/behind-the-sofa" && checkpoint.treeSize == 20_852_163)
        #expect(checkpoint.rootHash.base64 == "CsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=")
        #expect(request.encoded == bytes)
        // The smallest request: no proof, the empty tree.
        let empty = "old 0\n\nlog.example/a\n0\n\(MerkleTree.emptyRoot.base64)\n\n— log.example/a AAAAAAE=\n"
        let parsed = try AddCheckpointRequest(parsing: Data(empty.utf8))
        #expect(parsed.oldSize == 0 && parsed.proof.isEmpty && parsed.encoded == Data(empty.utf8))
    }

    @Test func malformedBodiesAreRefusedWithA400() throws {
        let note = "log.example/a\n5\n\(MerkleTree.emptyRoot.base64)\n\n— log.example/a AAAAAAE=\n"
        let proofLine = MerkleTree.emptyRoot.base64 + "\n"
        let cases: [(String, String)] = [
            ("", "empty"),
            ("old 3\n", "no empty line"),
            ("old 3\n\n", "no note"),
            ("old 03\n\n" + note, "leading zero"),
            ("old -3\n\n" + note, "sign"),
            ("old +3\n\n" + note, "plus sign"),
            ("old 18446744073709551616\n\n" + note, "2^64"),
            ("old 3 \n\n" + note, "trailing space"),
            ("Old 3\n\n" + note, "capital"),
            ("old\n\n" + note, "no size"),
            ("old 3\r\n\r\n" + note, "CRLF"),
            ("old 3\n" + "AAAA\n\n" + note, "short hash"),
            ("old 3\n" + MerkleTree.emptyRoot.base64.dropLast() + "\n\n" + note, "hash without padding"),
            ("old 3\n" + MerkleTree.emptyRoot.hex + "\n\n" + note, "hash in hex"),
            ("old 3\n" + String(repeating: proofLine, count: 64) + "\n" + note, "64 proof lines"),
            ("old 3\n\n" + note.dropLast(), "note without final newline"),
            ("old 3\n\nlog.example/a\n5\nnot a root\n\n— log.example/a AAAAAAE=\n", "root not base64"),
        ]
        for (body, what) in cases {
            let refusal = #expect(throws: WitnessRefusal.self, "\(what)") {
                let request = try AddCheckpointRequest(parsing: Data(body.utf8))
                _ = try request.checkpoint()
            }
            #expect(refusal?.httpStatus == 400, "\(what): \(String(describing: refusal))")
        }
        // 63 proof lines is the limit, not an error.
        let sixtyThree = try AddCheckpointRequest(parsing: Data(("old 3\n" + String(repeating: proofLine, count: 63) + "\n" + note).utf8))
        #expect(sixtyThree.proof.count == 63)
        // Bigger than any request can be, refused before reading it.
        #expect(throws: WitnessRefusal.self) { try AddCheckpointRequest(parsing: Data(count: AddCheckpointRequest.maximumBytes + 1)) }
        // Invalid UTF-8 in the proof section.
        #expect(throws: WitnessRefusal.self) { try AddCheckpointRequest(parsing: Data([0x6f, 0x6c, 0x64, 0x20, 0x31, 0x0a, 0xff, 0x0a, 0x0a])) }
    }

    /// Hostile bytes never trap: seeded garbage from the request's own alphabet, and every
    /// truncation and one-byte change of a valid request.
    @Test func garbageNeverTraps() throws {
        var random = SplitMix64(seed: 39)
        let pieces = ["old ", "0", "1", "9", "\n", "\n\n", "=", "A", "+", "/", "— ", " ", "log.example/a", "\u{00}", "\u{ff}", "-"]
        for _ in 0..<5_000 {
            let text = (0..<Int.random(in: 0...40, using: &random)).map { _ in pieces.randomElement(using: &random)! }.joined()
            _ = try? AddCheckpointRequest(parsing: Data(text.utf8)).checkpoint()
        }
        let valid = Array(Self.specExample.utf8)
        for cut in 0...valid.count { _ = try? AddCheckpointRequest(parsing: valid.prefix(cut)) }
        for _ in 0..<2_000 {
            var mutated = valid
            mutated[Int.random(in: 0..<mutated.count, using: &random)] = UInt8.random(in: 0...255, using: &random)
            _ = try? AddCheckpointRequest(parsing: mutated).checkpoint()
        }
    }

    // MARK: The witness's checks

    struct Log {
        let signer: NoteSigner
        var origin: String { signer.name }
        var key: NoteVerifierKey { signer.verifierKey }

        init(origin: String = "log.example/a") throws {
            signer = try NoteSigner.generate(name: origin)
        }

        /// A signed checkpoint of `entries` and the request from `oldSize`, its proof from `entries`' own tree.
        func request(_ entries: [Data], from oldSize: UInt64, proofFromOwnTree: Bool = true) throws -> AddCheckpointRequest {
            let leaves = entries.map(MerkleTree.leafHash)
            let checkpoint = try Checkpoint(origin: origin, treeSize: UInt64(entries.count), rootHash: MerkleTree.rootHash(ofLeafHashes: leaves))
            let proof = try MerkleProofGenerator.consistencyProof(oldSize: oldSize, newSize: UInt64(entries.count), reader: InMemoryTree(leafHashes: leaves))
            return AddCheckpointRequest(oldSize: oldSize, proof: proof, note: try checkpoint.signed(by: [signer]))
        }

        func tree(_ entries: [Data]) -> WitnessedTree {
            WitnessedTree(size: UInt64(entries.count), root: MerkleTree.rootHash(ofEntries: entries))
        }
    }

    @Test func aCheckpointThatExtendsTheHeldTreePasses() throws {
        let log = try Log()
        let first = entries(count: 3)
        let grown = entries(count: 9)
        // Never cosigned: only old 0, with an empty proof.
        #expect(try log.request(first, from: 0).check(logKey: log.key, held: nil).treeSize == 3)
        // From the held tree, with the proof from it.
        #expect(try log.request(grown, from: 3).check(logKey: log.key, held: log.tree(first)).treeSize == 9)
        // The same tree again (a newer note of it): cosigned again.
        #expect(try log.request(first, from: 3).check(logKey: log.key, held: log.tree(first)).treeSize == 3)
        // Other signatures on the note are ignored.
        let other = try NoteSigner.generate(name: "someone.else/w", type: .cosignatureV1)
        let request = try log.request(grown, from: 3)
        let cosigned = AddCheckpointRequest(oldSize: 3, proof: request.proof, note: try request.note.signed(by: other, timestamp: 5))
        #expect(try cosigned.check(logKey: log.key, held: log.tree(first)).treeSize == 9)
    }

    /// The 409 with the held size: the old size must be exactly the size last cosigned.
    @Test func anotherOldSizeIsAConflictNamingTheHeldSize() throws {
        let log = try Log()
        let held = log.tree(entries(count: 3))
        #expect(throws: WitnessRefusal.oldSizeMismatch(oldSize: 0, heldSize: 3)) {
            try log.request(entries(count: 5), from: 0).check(logKey: log.key, held: held)
        }
        #expect(throws: WitnessRefusal.oldSizeMismatch(oldSize: 4, heldSize: 3)) {
            try log.request(entries(count: 5), from: 4).check(logKey: log.key, held: held)
        }
        #expect(throws: WitnessRefusal.oldSizeMismatch(oldSize: 2, heldSize: 0)) {
            try log.request(entries(count: 5), from: 2).check(logKey: log.key, held: nil)
        }
        #expect(WitnessRefusal.oldSizeMismatch(oldSize: 4, heldSize: 3).httpStatus == 409)
        // A smaller tree than the old size: 400, before the 409.
        let rollback = try log.request(entries(count: 2), from: 0)
        let beyond = AddCheckpointRequest(oldSize: 3, proof: [], note: rollback.note)
        #expect(throws: WitnessRefusal.oldSizeBeyondCheckpoint(oldSize: 3, treeSize: 2)) { try beyond.check(logKey: log.key, held: held) }
    }

    @Test func aSplitViewAndARewrittenHistoryAreRefused() throws {
        let log = try Log()
        let held = log.tree(entries(count: 4))
        // Same size, another root: 409, a split view.
        let forked = try log.request(entries(count: 4, from: 100), from: 4)
        #expect(throws: WitnessRefusal.splitView(treeSize: 4, held: held.root, offered: MerkleTree.rootHash(ofEntries: entries(count: 4, from: 100)))) {
            try forked.check(logKey: log.key, held: held)
        }
        // A bigger tree whose history differs, with a valid proof within its own tree: 422.
        let rewritten = entries(count: 2) + entries(count: 5, from: 200)
        let refusal = #expect(throws: WitnessRefusal.self) { try log.request(rewritten, from: 4).check(logKey: log.key, held: held) }
        // 4 is a power of two: the proof leaves the old root out, so the new root is what fails.
        guard case .inconsistent(4, 7, .rootMismatch) = refusal else { Issue.record("\(String(describing: refusal))"); return }
        #expect(refusal?.httpStatus == 422)
        // A proof where none belongs (old 0) and a proof cut short are inconsistent too.
        let request = try log.request(entries(count: 9), from: 4)
        let noProof = AddCheckpointRequest(oldSize: 4, proof: [], note: request.note)
        #expect(throws: WitnessRefusal.inconsistent(oldSize: 4, treeSize: 9, reason: .wrongProofLength(expected: request.proof.count, actual: 0))) {
            try noProof.check(logKey: log.key, held: held)
        }
        let spurious = AddCheckpointRequest(oldSize: 0, proof: request.proof, note: request.note)
        #expect(throws: WitnessRefusal.self) { try spurious.check(logKey: log.key, held: nil) }
    }

    @Test func aCheckpointTheLogDidNotSignIsRefusedWithA403() throws {
        let log = try Log()
        let impostor = try Log(origin: log.origin)
        let request = try impostor.request(entries(count: 3), from: 0)
        let refusal = #expect(throws: WitnessRefusal.self) { try request.check(logKey: log.key, held: nil) }
        #expect(refusal == .untrusted(origin: log.origin, reason: .noTrustedSignature))
        #expect(refusal?.httpStatus == 403)
        // A line by the log's key that does not verify (the text changed after signing).
        let signed = try log.request(entries(count: 3), from: 0)
        let altered = try SignedNote(text: "log.example/a\n3\n\(MerkleTree.emptyRoot.base64)\n", signatures: signed.note.signatures)
        #expect(throws: WitnessRefusal.untrusted(origin: log.origin, reason: .invalidSignature(name: log.origin, keyID: log.key.keyID))) {
            try AddCheckpointRequest(oldSize: 0, proof: [], note: altered).check(logKey: log.key, held: nil)
        }
    }

    // MARK: The answers a log reads

    @Test func theSizeOfA409IsReadStrictly() {
        #expect(WitnessAnswer.size(inBody: Data("0\n".utf8)) == 0)
        #expect(WitnessAnswer.size(inBody: Data("50\n".utf8)) == 50)
        #expect(WitnessAnswer.size(inBody: Data("18446744073709551615\n".utf8)) == .max)
        for body in ["", "\n", "50", "050\n", "5 0\n", "-1\n", "50\n\n", "18446744073709551616\n", "0x10\n"] {
            #expect(WitnessAnswer.size(inBody: Data(body.utf8)) == nil, "\(body.debugDescription)")
        }
        #expect(WitnessAnswer.sizeBody(42) == "42\n")
    }

    @Test func cosignatureLinesAreTakenOnlyFromTheWitnessAndMustVerify() throws {
        let log = try Log()
        let note = try log.request(entries(count: 3), from: 0).note
        let witness = try NoteSigner.generate(name: "witness.example/w1", type: .cosignatureV1)
        let other = try NoteSigner.generate(name: "witness.example/w2", type: .cosignatureV1)
        let line = try witness.sign(text: note.text, timestamp: 1_700_000_000)
        let body = try other.sign(text: note.text, timestamp: 1).line + line.line
        #expect(try WitnessAnswer.cosignatures(inBody: Data(body.utf8), for: note, witness: witness.verifierKey) == [line])
        // The line added to the note: a checkpoint that needs one cosignature by the witness opens.
        let cosigned = try SignedNote(text: note.text, signatures: note.signatures + [line])
        let opened = try Checkpoint.open(cosigned.encoded, origin: log.origin, logKey: log.key, witnesses: [witness.verifierKey], requiredCosignatures: 1)
        #expect(opened.cosignatures.first?.cosignatureTime == 1_700_000_000)
        // None by the witness, a line over another text, garbage: refused.
        #expect(throws: SignedNoteError.noTrustedSignature) {
            try WitnessAnswer.cosignatures(inBody: Data(try other.sign(text: note.text).line.utf8), for: note, witness: witness.verifierKey)
        }
        let elsewhere = try witness.sign(text: "log.example/a\n4\n\(MerkleTree.emptyRoot.base64)\n", timestamp: 1).line
        #expect(throws: SignedNoteError.invalidSignature(name: witness.name, keyID: witness.verifierKey.keyID)) {
            try WitnessAnswer.cosignatures(inBody: Data(elsewhere.utf8), for: note, witness: witness.verifierKey)
        }
        for garbage in ["", "ok\n", "\n\n— x AAAAAAE=\n", line.line + "\n"] {
            #expect(throws: SignedNoteError.self, "\(garbage.debugDescription)") {
                try WitnessAnswer.cosignatures(inBody: Data(garbage.utf8), for: note, witness: witness.verifierKey)
            }
        }
    }
}
