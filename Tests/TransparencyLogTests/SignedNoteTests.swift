import Foundation
import Testing
import TestTiers
@testable import TransparencyLog

/// Signed notes against published bytes: the PeterNeumann and EnochRoot keys and notes of Go's
/// golang.org/x/mod/sumdb/note note_test.go (commit fe2ec04f, TestNewVerifier, TestSign,
/// TestOpen), and the example of the C2SP signed-note spec (signed-note.md, "Example").
@Suite(.tags(.unit)) struct SignedNoteTests {
    static let peterKey = "PeterNeumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW"
    /// Go's "PRIVATE+KEY+PeterNeumann+c74f20a3+<base64(0x01 || seed)>".
    static let peterSeed = Data(base64Encoded: "AYEKFALVFGyNhPJEMzD1QIDr+Y7hfZx09iUvxdXHKDFz")!.dropFirst()
    static let enochKey = "EnochRoot+af0cfe78+ATtqJ7zOtqQtYqOo0CpvDXNlMhV3HeJDpjrASKGLWdop"
    static let text = "If you think cryptography is the answer to your problem,\nthen you don't know what your problem is.\n"
    static let peterSig = "— PeterNeumann x08go/ZJkuBS9UG/SffcvIAQxVBtiFupLLr8pAcElZInNIuGUgYN1FFYC2pZSNXgKvqfqdngotpRZb6KE6RyyBwJnAM=\n"
    static let enochSig = "— EnochRoot rwz+eBzmZa0SO3NbfRGzPCpDckykFXSdeX+MNtCOXm2/5n2tiOHp+vAF1aGrQ5ovTG01oOTGwnWLox33WWd1RvMc+QQ=\n"

    var peter: NoteVerifierKey { get throws { try NoteVerifierKey(text: Self.peterKey) } }
    var enoch: NoteVerifierKey { get throws { try NoteVerifierKey(text: Self.enochKey) } }

    @Test func goVerifierKeysParseAndEncodeBack() throws {
        let key = try peter
        #expect(key.name == "PeterNeumann" && key.keyID == 0xc74f20a3 && key.type == .ed25519)
        // Base64 may hold a +, which must not be taken for a separator.
        for _ in 0..<40 {
            let generated = try NoteSigner.generate(name: "example.com/log").verifierKey
            #expect(try NoteVerifierKey(text: generated.text) == generated)
        }
        #expect(key.text == Self.peterKey)
        #expect(try enoch.keyID == 0xaf0cfe78)
        let signer = try NoteSigner(name: "PeterNeumann", seed: Self.peterSeed)
        #expect(signer.verifierKey == key)
    }

    /// TestNewVerifier's manglings: every proper substring and every byte bumped by one.
    @Test func mangledVerifierKeysAreRefused() {
        let bytes = Array(Self.peterKey.utf8)
        for start in 0...bytes.count {
            for end in (start + 1)..<(bytes.count + 1) where start != 0 || end != bytes.count {
                #expect(throws: SignedNoteError.self) { try NoteVerifierKey(text: String(decoding: bytes[start..<end], as: UTF8.self)) }
            }
        }
        for position in bytes.indices {
            var bumped = bytes
            bumped[position] &+= 1
            #expect(throws: SignedNoteError.self) { try NoteVerifierKey(text: String(decoding: bumped, as: UTF8.self)) }
        }
        // Wrong key length and unknown algorithm, each with a key id adjusted to match.
        #expect(throws: SignedNoteError.self) { try NoteVerifierKey(text: "PeterNeumann+cc469956+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TWBADKEY==") }
        #expect(throws: SignedNoteError.self) { try NoteVerifierKey(text: "PeterNeumann+173116ae+ZRpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW") }
        #expect(throws: SignedNoteError.self) { try NoteVerifierKey(text: "PeterNeumann+C74F20A3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW") }
    }

    /// TestSign: Ed25519 is deterministic, so signing Go's text with Go's key gives Go's bytes.
    @Test func signingReproducesGosNote() throws {
        let signer = try NoteSigner(name: "PeterNeumann", seed: Self.peterSeed)
        let note = try SignedNote(text: Self.text).signed(by: signer)
        #if canImport(CryptoKit)
        // Apple's CryptoKit randomizes Ed25519 signatures, so there only verification is checked.
        #expect(try SignedNote.open(note.encoded, keys: [peter]).verified.count == 1)
        #else
        #expect(String(decoding: note.encoded, as: UTF8.self) == Self.text + "\n" + Self.peterSig)
        #endif
        // Signing again replaces the key's earlier line rather than adding one.
        #expect(try note.signed(by: signer).signatures.count == 1)
        #expect(throws: SignedNoteError.self) { try SignedNote(text: "abc") }
        #expect(throws: SignedNoteError.invalidKeyName("a b")) {
            try SignedNote(text: Self.text, signatures: [NoteSignature(name: "a b", keyID: 1, signature: Data([1]))])
        }
        #expect(throws: SignedNoteError.self) { try NoteSigner(name: "a+b", seed: Data(count: 32)) }
        #expect(throws: SignedNoteError.self) { try NoteSigner(name: "bad name", seed: Data(count: 32)) }
        #expect(throws: SignedNoteError.self) { try NoteSigner(name: "", seed: Data(count: 32)) }
    }

    /// TestOpen.
    @Test func openingFollowsGosRules() throws {
        let both = Data((Self.text + "\n" + Self.peterSig + Self.enochSig).utf8)
        let one = try SignedNote.open(both, keys: [peter])
        #expect(one.text == Self.text)
        #expect(one.verified.map(\.key.name) == ["PeterNeumann"])
        #expect(one.unverified.map(\.name) == ["EnochRoot"])
        let two = try SignedNote.open(both, keys: [peter, enoch])
        #expect(two.verified.map(\.key.name) == ["PeterNeumann", "EnochRoot"] && two.unverified.isEmpty)
        #expect(throws: SignedNoteError.noTrustedSignature) { try SignedNote.open(both, keys: []) }
        // A key that shares only a name, or only an id, with a signature is not its signer.
        let otherPeter = try NoteSigner.generate(name: "PeterNeumann").verifierKey
        #expect(throws: SignedNoteError.noTrustedSignature) { try SignedNote.open(both, keys: [otherPeter]) }

        // Too many signatures.
        let many = Data((Self.text + "\n" + String(repeating: Self.peterSig, count: 101)).utf8)
        #expect(throws: SignedNoteError.tooManySignatures(limit: 100)) { try SignedNote.open(many, keys: [peter]) }
        // Up to the limit, repeats of one valid line count once.
        let repeated = Data((Self.text + "\n" + String(repeating: Self.peterSig, count: 100)).utf8)
        #expect(try SignedNote.open(repeated, keys: [peter]).verified.count == 1)

        // A trusted key's bad signature refuses the whole note.
        let sig = Array(Self.peterSig)
        let damaged = String(sig[..<60]) + "ABCD" + String(sig[60...])
        #expect(throws: SignedNoteError.self) { try SignedNote.open(Data((Self.text + "\n" + damaged).utf8), keys: [peter]) }
        let enochDamaged = Array(Self.enochSig)
        let enochBad = String(enochDamaged[..<60]) + "ABCD" + String(enochDamaged[60...])
        #expect(throws: SignedNoteError.invalidSignature(name: "EnochRoot", keyID: 0xaf0cfe78)) {
            try SignedNote.open(Data((Self.text + "\n" + Self.peterSig + enochBad).utf8), keys: [peter, enoch])
        }
        // But an unknown key's bad line is only set aside.
        #expect(try SignedNote.open(Data((Self.text + "\n" + Self.peterSig + enochBad).utf8), keys: [peter]).unverified.count == 1)

        // Go's malformed messages.
        let malformed = [
            Self.text,
            Self.text + "\n",
            Self.text + "\n" + Self.peterSig.dropLast(),
            "\u{01}" + Self.text + "\n" + Self.peterSig,
            Self.text + "\n" + "— Bad Name x08go/ZJkuBS9UG/SffcvIAQxVBtiFupLLr8pAcElZInNIuGUgYN1FFYC2pZSNXgKvqfqdngotpRZb6KE6RyyBwJnAM=",
            Self.text + "\n" + Self.peterSig + "Unexpected line.\n",
        ]
        for message in malformed {
            #expect(throws: SignedNoteError.self, "\(message)") { try SignedNote.open(Data(message.utf8), keys: [peter]) }
        }
        #expect(throws: SignedNoteError.malformed(reason: "not UTF-8")) {
            try SignedNote.open(Data([0xff]) + Data((Self.text + "\n" + Self.peterSig).utf8), keys: [peter])
        }
    }

    @Test func hostileNotesAreRefusedWithoutTrapping() throws {
        let good = Self.text + "\n" + Self.peterSig
        let hostile: [String] = [
            "", "\n", "\n\n", "\n\n\n", "— PeterNeumann x08go\n", good + "\n", good.replacingOccurrences(of: "— ", with: "-- "),
            good.replacingOccurrences(of: "— PeterNeumann ", with: "— PeterNeumann  "),
            good.replacingOccurrences(of: "— PeterNeumann ", with: "—PeterNeumann "),
            good.replacingOccurrences(of: "=\n", with: "\n"), good.replacingOccurrences(of: "=\n", with: "==\n"),
            good.replacingOccurrences(of: "\n", with: "\r\n"), good.replacingOccurrences(of: "problem,", with: "problem,\t"),
            Self.text + "\n— PeterNeumann \n", Self.text + "\n— PeterNeumann AAAA\n", Self.text + "\n— +x AAAAAAA=\n",
            String(repeating: "x", count: SignedNote.maximumBytes) + "\n\n" + Self.peterSig,
        ]
        for message in hostile {
            #expect(throws: SignedNoteError.self, "\(message.prefix(80))") { try SignedNote.open(Data(message.utf8), keys: [peter]) }
        }
        // Seeded random bytes and random truncations: refused, never a crash.
        var random = SplitMix64(seed: 8032)
        let goodBytes = Array(good.utf8)
        for _ in 0..<500 {
            var bytes = goodBytes
            switch Int.random(in: 0..<3, using: &random) {
            case 0: bytes = Array(bytes.prefix(Int.random(in: 0..<bytes.count, using: &random)))
            case 1: bytes[Int.random(in: 0..<bytes.count, using: &random)] ^= UInt8.random(in: 1...255, using: &random)
            default: bytes = (0..<Int.random(in: 0..<200, using: &random)).map { _ in UInt8.random(in: 0...255, using: &random) }
            }
            if bytes == goodBytes { continue }
            if let note = try? SignedNote.open(bytes, keys: [peter]) {
                // A flipped byte in the text passes only if it still verifies, which it cannot.
                Issue.record("accepted a damaged note: \(note.text)")
            }
        }
    }

    /// The C2SP signed-note example: this vkey verifies this note.
    @Test func specExampleVerifies() throws {
        let key = try NoteVerifierKey(text: "example.com/foo+530d903a+AekyeRrm56hApGFkyQR4ZCbV54Id2LKaANYcrnKv3U2k")
        let note = "This is an example message.\n\n— example.com/foo Uw2QOkn8srV1yJGh2VYRlL1Tnagv1YEq6TfXppzi2ONncAlTgK7Ztg1ERYNZXsYjOBH3mFXmRKuwHjG1Yu72IneyaQM=\n"
        #expect(try SignedNote.open(Data(note.utf8), keys: [key]).text == "This is an example message.\n")
    }

    /// "é" as one code point and as e plus a combining accent are equal Swift Strings but other
    /// bytes, so other key names: the key id (over the bytes) agrees, and still the line is not
    /// taken for the key's.
    @Test func namesAreComparedByTheirBytes() throws {
        let signer = try NoteSigner.generate(name: "caf\u{E9}.example")
        let note = try SignedNote(text: Self.text).signed(by: signer)
        let line = note.signatures[0]
        let respelled = try SignedNote(text: Self.text, signatures: [NoteSignature(name: "cafe\u{301}.example", keyID: line.keyID, signature: line.signature)])
        #expect(try SignedNote.open(note.encoded, keys: [signer.verifierKey]).verified.count == 1)
        #expect(throws: SignedNoteError.noTrustedSignature) { try SignedNote.open(respelled.encoded, keys: [signer.verifierKey]) }
        let checkpoint = try Checkpoint(origin: "caf\u{E9}.example", treeSize: 0, rootHash: MerkleTree.emptyRoot)
        let signed = try checkpoint.signed(by: [signer]).encoded
        #expect(throws: CheckpointError.self) { try Checkpoint.open(signed, origin: "cafe\u{301}.example", logKey: signer.verifierKey) }
    }

    @Test func twoTrustedKeysWithOneNameAndIDAreRefused() throws {
        let key = try peter
        let twin = NoteVerifierKey(
            uncheckedName: key.name, keyID: key.keyID, type: .ed25519, publicKey: try NoteSigner.generate(name: "twin").verifierKey.publicKey)
        let note = Data((Self.text + "\n" + Self.peterSig).utf8)
        #expect(throws: SignedNoteError.ambiguousKeys(name: "PeterNeumann", keyID: 0xc74f20a3)) { try SignedNote.open(note, keys: [key, twin]) }
    }
}
