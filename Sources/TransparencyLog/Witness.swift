import Foundation

/// Why a witness refuses an add-checkpoint request (C2SP tlog-witness), with the HTTP status the
/// spec gives each refusal. The checks run in the spec's order; see `AddCheckpointRequest.check`.
public enum WitnessRefusal: Error, Equatable, Sendable, CustomStringConvertible {
    /// The body is not an add-checkpoint request, or its note or checkpoint does not parse (400).
    case malformed(reason: String)
    /// The request's old size is beyond the checkpoint's size (400).
    case oldSizeBeyondCheckpoint(oldSize: UInt64, treeSize: UInt64)
    /// The witness does not witness this origin (404).
    case unknownLog(origin: String)
    /// No signature by the log's key verifies, or one by it does not (403).
    case untrusted(origin: String, reason: SignedNoteError)
    /// The old size is not the size of the tree the witness last cosigned (409, with that size
    /// as the body: the client sends again from there).
    case oldSizeMismatch(oldSize: UInt64, heldSize: UInt64)
    /// The same size as the tree the witness cosigned, another root: two signed views of one
    /// tree, a split view (409).
    case splitView(treeSize: UInt64, held: MerkleHash, offered: MerkleHash)
    /// The consistency proof does not lead from the tree the witness cosigned to the offered one:
    /// a history that does not extend the cosigned one, or a wrong proof (422).
    case inconsistent(oldSize: UInt64, treeSize: UInt64, reason: MerkleProofError)

    /// The HTTP status tlog-witness answers this refusal with.
    public var httpStatus: Int {
        switch self {
        case .malformed, .oldSizeBeyondCheckpoint: 400
        case .untrusted: 403
        case .unknownLog: 404
        case .oldSizeMismatch, .splitView: 409
        case .inconsistent: 422
        }
    }

    public var description: String {
        switch self {
        case let .malformed(reason):
            "not an add-checkpoint request (\(reason)): send `old <size>`, the consistency proof's hashes in base64, an empty line and the signed checkpoint, each line ending in a newline"
        case let .oldSizeBeyondCheckpoint(oldSize, treeSize):
            "the old size \(oldSize) is beyond the checkpoint's size \(treeSize)"
        case let .unknownLog(origin):
            "this witness does not witness the log \"\(origin)\""
        case let .untrusted(origin, reason):
            "the checkpoint is not signed by the key this witness holds for \"\(origin)\" (\(reason))"
        case let .oldSizeMismatch(oldSize, heldSize):
            "the witness last cosigned a tree of size \(heldSize), not \(oldSize): send the consistency proof from \(heldSize)"
        case let .splitView(treeSize, held, offered):
            "the witness cosigned a tree of size \(treeSize) with root \(held.base64), and this checkpoint gives it the root \(offered.base64): the log shows two trees of one size (a split view); both are kept as evidence"
        case let .inconsistent(oldSize, treeSize, reason):
            "the consistency proof from size \(oldSize) to \(treeSize) does not verify (\(reason)): the tree does not extend the one the witness cosigned, or the proof is wrong"
        }
    }
}

/// The tree a witness last cosigned for one log: what its next answer is checked against.
public struct WitnessedTree: Hashable, Sendable {
    public let size: UInt64
    public let root: MerkleHash

    public init(size: UInt64, root: MerkleHash) {
        self.size = size
        self.root = root
    }
}

/// The body of a C2SP tlog-witness `POST <prefix>/add-checkpoint`: a line `old <size>`, up to 63
/// lines each a consistency proof hash in base64, an empty line, then the signed checkpoint note.
public struct AddCheckpointRequest: Hashable, Sendable {
    /// The spec's limit on proof lines: a consistency proof of trees below 2^64 has fewer.
    public static let maximumProofHashes = 63
    /// A note at its limit, the old size line and 63 proof lines, with room to spare.
    public static let maximumBytes = SignedNote.maximumBytes + 4_096

    public let oldSize: UInt64
    public let proof: [MerkleHash]
    public let note: SignedNote

    public init(oldSize: UInt64, proof: [MerkleHash], note: SignedNote) {
        self.oldSize = oldSize
        self.proof = proof
        self.note = note
    }

    public var encoded: Data {
        Data(("old \(oldSize)\n" + proof.map { $0.base64 + "\n" }.joined() + "\n").utf8) + note.encoded
    }

    /// Parses a request body strictly: one spelling per request (a size without sign or leading
    /// zero, canonical base64 of 32 bytes per proof line, at most 63 of them), then the note by
    /// `SignedNote`'s own rules. Never traps: any byte string either parses or throws `.malformed`.
    public init(parsing bytes: some DataProtocol) throws(WitnessRefusal) {
        guard bytes.count <= Self.maximumBytes else {
            throw .malformed(reason: "the body has \(bytes.count) bytes, more than the \(Self.maximumBytes) a request can need")
        }
        let body = Array(bytes)
        var position = 0
        /// The next line without its newline; nil when no newline is left.
        func nextLine() -> ArraySlice<UInt8>? {
            guard let end = body[position...].firstIndex(of: 0x0A) else { return nil }
            defer { position = end + 1 }
            return body[position..<end]
        }
        guard let first = nextLine(), first.starts(with: Array("old ".utf8)),
              let oldSize = StrictDecimal.parse(first.dropFirst(4))
        else { throw .malformed(reason: "the first line is not `old <size>` with a decimal size") }
        var proof: [MerkleHash] = []
        while true {
            guard let line = nextLine() else { throw .malformed(reason: "no empty line before the checkpoint") }
            if line.isEmpty { break }
            guard proof.count < Self.maximumProofHashes else {
                throw .malformed(reason: "more than \(Self.maximumProofHashes) consistency proof lines")
            }
            guard line.count == 44, let text = String(validating: line, as: UTF8.self), let hash = MerkleHash(base64: text) else {
                throw .malformed(reason: "proof line \(proof.count + 1) is not a hash in canonical base64")
            }
            proof.append(hash)
        }
        do {
            note = try SignedNote(parsing: body[position...])
        } catch {
            throw .malformed(reason: "the checkpoint: \(error)")
        }
        self.oldSize = oldSize
        self.proof = proof
    }

    /// The checkpoint the note states, not yet verified: its origin says which log's key and
    /// which cosigned tree the request is checked against.
    public func checkpoint() throws(WitnessRefusal) -> Checkpoint {
        do {
            return try Checkpoint(text: note.text)
        } catch {
            throw .malformed(reason: "the checkpoint: \(error)")
        }
    }

    /// tlog-witness's checks for a known log, in the spec's order: the note is signed by
    /// `logKey` (other lines ignored; 403), the old size is not beyond the checkpoint's (400) and
    /// is the size of `held`, the tree last cosigned (nil: none, size 0; 409 with the held size),
    /// a checkpoint of the held size has the held root (409, a split view), and the proof leads
    /// from the held tree to the checkpoint's (422). Returns the checkpoint to cosign.
    ///
    /// The caller looks the origin up first (404 when it witnesses no such log), and must check
    /// and record the new tree atomically: two requests checked against the same held tree could
    /// otherwise roll it back.
    public func check(logKey: NoteVerifierKey, held: WitnessedTree?) throws(WitnessRefusal) -> Checkpoint {
        let checkpoint = try checkpoint()
        do {
            _ = try note.verify(with: [logKey])
        } catch {
            throw .untrusted(origin: checkpoint.origin, reason: error)
        }
        guard oldSize <= checkpoint.treeSize else { throw .oldSizeBeyondCheckpoint(oldSize: oldSize, treeSize: checkpoint.treeSize) }
        let held = held ?? WitnessedTree(size: 0, root: MerkleTree.emptyRoot)
        guard oldSize == held.size else { throw .oldSizeMismatch(oldSize: oldSize, heldSize: held.size) }
        if checkpoint.treeSize == held.size, checkpoint.rootHash != held.root {
            throw .splitView(treeSize: held.size, held: held.root, offered: checkpoint.rootHash)
        }
        do {
            try MerkleProof.verifyConsistency(
                oldSize: held.size, newSize: checkpoint.treeSize, oldRoot: held.root, newRoot: checkpoint.rootHash, proof: proof)
        } catch {
            throw .inconsistent(oldSize: held.size, treeSize: checkpoint.treeSize, reason: error)
        }
        return checkpoint
    }
}

/// The answers of tlog-witness's add-checkpoint besides refusals: the cosignature lines (200)
/// and the size a 409 names.
public enum WitnessAnswer {
    /// The `Content-Type` of a 409's body, which holds the size the witness last cosigned.
    public static let sizeContentType = "text/x.tlog.size"

    /// The body of a 409 that names `size`: the decimal and a newline.
    public static func sizeBody(_ size: UInt64) -> String { "\(size)\n" }

    /// The size in a 409's body, or nil when the body is not exactly a decimal and a newline.
    public static func size(inBody body: some DataProtocol) -> UInt64? {
        let bytes = Array(body)
        guard bytes.last == 0x0A else { return nil }
        return StrictDecimal.parse(bytes.dropLast())
    }

    /// The signature lines a 200 holds that are `witness`'s and verify over `note`'s text; lines
    /// by other keys are ignored (as the spec says a client must). Throws when the body is not
    /// signature lines, when none is by `witness`, or when one by it does not verify.
    public static func cosignatures(
        inBody body: some DataProtocol, for note: SignedNote, witness: NoteVerifierKey
    ) throws(SignedNoteError) -> [NoteSignature] {
        // As the spec suggests: the lines after the checkpoint's text form a note to verify.
        let lines = try SignedNote(parsing: Data(note.text.utf8) + Data("\n".utf8) + Data(body))
        guard lines.text == note.text else { throw .malformed(reason: "the answer is not signature lines") }
        let own = lines.signatures.filter { $0.name.utf8.elementsEqual(witness.name.utf8) && $0.keyID == witness.keyID }
        _ = try SignedNote(text: note.text, signatures: own).verify(with: [witness])
        return own
    }
}

/// A size as the C2SP texts write one: ASCII decimal digits, no sign, no leading zero but in `0`,
/// below 2^64.
enum StrictDecimal {
    static func parse(_ digits: some Collection<UInt8>) -> UInt64? {
        guard !digits.isEmpty, digits.count <= 20, digits.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }),
              digits.count == 1 || digits.first != UInt8(ascii: "0")
        else { return nil }
        var value: UInt64 = 0
        for digit in digits {
            let (shifted, overflow) = value.multipliedReportingOverflow(by: 10)
            let (sum, carry) = shifted.addingReportingOverflow(UInt64(digit - UInt8(ascii: "0")))
            guard !overflow, !carry else { return nil }
            value = sum
        }
        return value
    }
}
