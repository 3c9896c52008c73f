import Foundation
import Testing
import TestTiers
import TransparencyLog

/// Checkpoints (C2SP tlog-checkpoint) and cosignatures (C2SP tlog-cosignature, Ed25519 v1).
@Suite(.tags(.unit)) struct CheckpointTests {
    /// golang.org/x/mod/sumdb/tlog note_test.go (TestFormatTree, TestParseTree): the tree note of
    /// size 123456789012 whose "root" is RecordHash("hello world"), i.e. the leaf hash.
    @Test func goTreeNoteParsesAndFormatsBack() throws {
        let text = "go.sum database tree\n123456789012\nTszzRgjTG6xce+z2AG31kAXYKBgQVtCSCE40HmuwBb0=\n"
        let checkpoint = try Checkpoint(text: text)
        #expect(checkpoint.origin == "go.sum database tree")
        #expect(checkpoint.treeSize == 123_456_789_012)
        #expect(checkpoint.rootHash == MerkleTree.leafHash(Data("hello world".utf8)))
        #expect(checkpoint.extensionLines.isEmpty)
        #expect(checkpoint.text == text)
        #expect(throws: CheckpointError.self) { try Checkpoint(text: "go.sum database tree\n0xabcdef\nTszzRgjTG6xce+z2AG31kAXYKBgQVtCSCE40HmuwBb0=\n") }
        #expect(throws: CheckpointError.self) { try Checkpoint(text: "go.sum database tree\n123456789012\nTszzRgjTG6xce+z2AG31kAXYKBgQVtCSCE40HmuwBTOOBIG=\n") }
    }

    /// A checkpoint sum.golang.org signed, with its real key: transparency-dev/formats
    /// log/note_test.go (commit 0b850f1a, TestSumDBNoteParsing).
    @Test func sumGolangOrgCheckpointOpens() throws {
        let key = try NoteVerifierKey(text: "sum.golang.org+033de0ae+Ac4zctda0e5eza+HJyk9SxEdh+s3Ux18htTTAD8OuAn8")
        let note = "go.sum database tree\n6476701\nmb8QLQIs0Z0yP5Cstq6guj87oXWeC9gEM8oVikmm9Wk=\n\n"
            + "— sum.golang.org Az3grsLX85Gz+s1SiTbgkuqxgItqFq7gsMUEyVnrsa9LM7Us9S+1xbFIGu95949rj4nPRYfvimWEPWL+o3GeoWwOoAw=\n"
        let opened = try Checkpoint.open(Data(note.utf8), origin: "go.sum database tree", logKey: key)
        #expect(opened.checkpoint.treeSize == 6_476_701)
        #expect(opened.checkpoint.rootHash.base64 == "mb8QLQIs0Z0yP5Cstq6guj87oXWeC9gEM8oVikmm9Wk=")
        #expect(throws: CheckpointError.wrongOrigin(expected: "Go rocks but I might have the wrong ID", found: "go.sum database tree")) {
            try Checkpoint.open(Data(note.utf8), origin: "Go rocks but I might have the wrong ID", logKey: key)
        }
        let altered = note.replacingOccurrences(of: "6476701", with: "6476702")
        #expect(throws: CheckpointError.note(.invalidSignature(name: "sum.golang.org", keyID: 0x033de0ae))) {
            try Checkpoint.open(Data(altered.utf8), origin: "go.sum database tree", logKey: key)
        }
    }

    /// The examples of tlog-checkpoint.md and tlog-cosignature.md: the note parses, the
    /// witness's line carries key id 0x8d66cf3f and the time 1679315147 in front of its 64-byte
    /// signature (the spec gives no public key for it, so only the layout is checked).
    @Test func specExamplesParse() throws {
        let body = "example.com/behind-the-sofa\n20852163\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n"
        let note = body + "\n"
            + "— example.com/behind-the-sofa Az3grlgtzPICa5OS8npVmf1Myq/5IZniMp+ZJurmRDeOoRDe4URYN7u5/Zhcyv2q1gGzGku9nTo+zyWE+xeMcTOAYQ8=\n"
            + "— witness.example.com/w1 jWbPPwAAAABkGFDLEZMHwSRaJNiIDoe9DYn/zXcrtPHeolMI5OWXEhZCB9dlrDJsX3b2oyin1nPZqhf5nNo0xUe+mbIUBkBIfZ+qnA==\n"
        let parsed = try SignedNote(parsing: Data(note.utf8))
        #expect(parsed.text == body)
        #expect(try Checkpoint(text: parsed.text).treeSize == 20_852_163)
        let witness = parsed.signatures[1]
        #expect(witness.name == "witness.example.com/w1" && witness.keyID == 0x8d66cf3f)
        #expect(witness.signature.count == 8 + 64)
        #expect(witness.signature.prefix(8).reduce(UInt64(0)) { $0 << 8 | UInt64($1) } == 1_679_315_147)
        #expect(parsed.signatures[0].signature.count == 64)
    }

    @Test func parsingIsStrict() throws {
        let root = MerkleTree.emptyRoot.base64
        let good = "log.example/a\n0\n\(root)\n"
        #expect(try Checkpoint(text: good).treeSize == 0)
        #expect(try Checkpoint(text: "log.example/a\n18446744073709551615\n\(root)\next one\next two\n").extensionLines == ["ext one", "ext two"])
        let refused = [
            "log.example/a\n0\n\(root)", "log.example/a\n00\n\(root)\n", "log.example/a\n01\n\(root)\n",
            "log.example/a\n+1\n\(root)\n", "log.example/a\n-1\n\(root)\n", "log.example/a\n 1\n\(root)\n",
            "log.example/a\n1 \n\(root)\n", "log.example/a\n18446744073709551616\n\(root)\n", "log.example/a\n\n\(root)\n",
            "\n1\n\(root)\n", "log.example/a\n1\n\n", "log.example/a\n1\n\(root.dropLast())\n", "log.example/a\n1\n\(root)=\n",
            "log.example/a\n1\n\(root)\n\n", "log.example/a\n1\n\(root)\next\n\n", "log.example/a\n1\n\(root)\n\next\n",
            "log.example/a\n1\n", "", "\n", "log.example/a\n1\nAAAA\n",
        ]
        for text in refused { #expect(throws: CheckpointError.self, "\(text.debugDescription)") { try Checkpoint(text: text) } }
        #expect(throws: CheckpointError.self) { try Checkpoint(origin: "", treeSize: 1, rootHash: MerkleTree.emptyRoot) }
        #expect(throws: CheckpointError.self) { try Checkpoint(origin: "a\nb", treeSize: 1, rootHash: MerkleTree.emptyRoot) }
        #expect(throws: CheckpointError.self) { try Checkpoint(origin: "a", treeSize: 1, rootHash: MerkleTree.emptyRoot, extensionLines: [""]) }
    }

    @Test func signedCheckpointsOpenWithTheLogKeyAndEnoughWitnesses() throws {
        let origin = "tracer.example/positive-list"
        let log = try NoteSigner.generate(name: origin)
        let witnesses = try (1...3).map { try NoteSigner.generate(name: "witness\($0).example", type: .cosignatureV1) }
        let checkpoint = try Checkpoint(origin: origin, treeSize: 5, rootHash: MerkleTree.rootHash(ofEntries: entries(count: 5)))
        let note = try checkpoint.signed(by: [log] + witnesses.prefix(2), timestamp: 1_679_315_147)
        let bytes = note.encoded

        let opened = try Checkpoint.open(bytes, origin: origin, logKey: log.verifierKey,
                                         witnesses: witnesses.map(\.verifierKey), requiredCosignatures: 2)
        #expect(opened.checkpoint == checkpoint)
        #expect(opened.cosignatures.map(\.key.name) == ["witness1.example", "witness2.example"])
        #expect(opened.cosignatures.allSatisfy { $0.cosignatureTime == 1_679_315_147 })

        #expect(throws: CheckpointError.tooFewCosignatures(valid: 2, required: 3)) {
            try Checkpoint.open(bytes, origin: origin, logKey: log.verifierKey, witnesses: witnesses.map(\.verifierKey), requiredCosignatures: 3)
        }
        #expect(throws: CheckpointError.wrongOrigin(expected: "other.example/log", found: origin)) {
            try Checkpoint.open(bytes, origin: "other.example/log", logKey: log.verifierKey)
        }
        // Witnesses alone do not make a checkpoint: the log's own signature is required.
        let otherLog = try NoteSigner.generate(name: origin)
        #expect(throws: CheckpointError.missingLogSignature(key: otherLog.verifierKey.description)) {
            try Checkpoint.open(bytes, origin: origin, logKey: otherLog.verifierKey, witnesses: witnesses.map(\.verifierKey))
        }
        #expect(throws: CheckpointError.note(.noTrustedSignature)) {
            try Checkpoint.open(bytes, origin: origin, logKey: otherLog.verifierKey)
        }
        // A cosignature moved to another checkpoint, or with its time changed, does not verify.
        let other = try Checkpoint(origin: origin, treeSize: 6, rootHash: checkpoint.rootHash)
        let moved = try SignedNote(text: other.text, signatures: [try log.sign(text: other.text), note.signatures[1]])
        #expect(throws: CheckpointError.note(.invalidSignature(name: "witness1.example", keyID: witnesses[0].verifierKey.keyID))) {
            try Checkpoint.open(moved.encoded, origin: origin, logKey: log.verifierKey, witnesses: [witnesses[0].verifierKey])
        }
        var retimed = note.signatures[1].signature
        retimed[7] ^= 1
        let shifted = try SignedNote(text: note.text, signatures: [note.signatures[0],
            NoteSignature(name: "witness1.example", keyID: witnesses[0].verifierKey.keyID, signature: retimed)])
        #expect(throws: CheckpointError.self) {
            try Checkpoint.open(shifted.encoded, origin: origin, logKey: log.verifierKey, witnesses: [witnesses[0].verifierKey])
        }
        // Cosignature keys encode as vkeys of type 0x04 and parse back.
        let vkey = witnesses[0].verifierKey
        #expect(try NoteVerifierKey(text: vkey.text) == vkey)
        #expect(Data(base64Encoded: String(vkey.text.split(separator: "+", maxSplits: 2)[2]))?.first == 0x04)
    }
}
