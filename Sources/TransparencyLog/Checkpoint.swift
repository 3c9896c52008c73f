import Foundation

/// Why a checkpoint was refused.
public enum CheckpointError: Error, Equatable, Sendable, CustomStringConvertible {
    case malformed(line: Int, reason: String)
    case wrongOrigin(expected: String, found: String)
    case note(SignedNoteError)
    /// The note verified, but not by the log's own key (only by witnesses).
    case missingLogSignature(key: String)
    case tooFewCosignatures(valid: Int, required: Int)

    public var description: String {
        switch self {
        case let .malformed(line, reason): "malformed checkpoint, line \(line): \(reason)"
        case let .wrongOrigin(expected, found): "checkpoint is from \"\(found)\", not \"\(expected)\""
        case let .note(error): "checkpoint note: \(error)"
        case let .missingLogSignature(key): "checkpoint is not signed by the log's key \(key)"
        case let .tooFewCosignatures(valid, required): "checkpoint has \(valid) valid cosignatures of the \(required) required"
        }
    }
}

/// A log's signed statement of its size and root (C2SP tlog-checkpoint): the note text is the
/// origin, the tree size in decimal, the root in base64, then optional extension lines.
public struct Checkpoint: Hashable, Sendable {
    public let origin: String
    public let treeSize: UInt64
    public let rootHash: MerkleHash
    /// Opaque lines after the root; the spec discourages them, as monitors cannot audit them.
    public let extensionLines: [String]

    public init(origin: String, treeSize: UInt64, rootHash: MerkleHash, extensionLines: [String] = []) throws(CheckpointError) {
        guard Self.isValidLine(origin) else { throw .malformed(line: 1, reason: "the origin is empty or has a control character") }
        for (offset, line) in extensionLines.enumerated() where !Self.isValidLine(line) {
            throw .malformed(line: 4 + offset, reason: "an extension line is empty or has a control character")
        }
        self.origin = origin
        self.treeSize = treeSize
        self.rootHash = rootHash
        self.extensionLines = extensionLines
    }

    /// The note text, every line ending in a newline.
    public var text: String {
        ([origin, String(treeSize), rootHash.base64] + extensionLines).map { $0 + "\n" }.joined()
    }

    /// Parses note text strictly: one spelling per checkpoint, so that two texts never claim the
    /// same tree (no leading zeros or signs in the size, canonical base64, no empty line).
    public init(text: String) throws(CheckpointError) {
        guard text.hasSuffix("\n") else { throw .malformed(line: 0, reason: "the text does not end in a newline") }
        let lines = text.dropLast().split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        guard lines.count >= 3 else { throw .malformed(line: lines.count + 1, reason: "fewer than three lines") }
        guard let treeSize = StrictDecimal.parse(lines[1].utf8) else {
            throw .malformed(line: 2, reason: "the tree size is not a decimal without leading zeros below 2^64")
        }
        guard let rootHash = MerkleHash(base64: lines[2]) else {
            throw .malformed(line: 3, reason: "the root is not canonical base64 of 32 bytes")
        }
        try self.init(origin: lines[0], treeSize: treeSize, rootHash: rootHash, extensionLines: Array(lines[3...]))
    }

    /// The signed note of this checkpoint, signed by `signers` in order (the log first, then
    /// cosigners, which sign at `timestamp`).
    public func signed(by signers: [NoteSigner], timestamp: UInt64 = 0) throws(CheckpointError) -> SignedNote {
        do {
            var note = try SignedNote(text: text)
            for signer in signers { note = try note.signed(by: signer, timestamp: timestamp) }
            return note
        } catch {
            throw .note(error)
        }
    }

    /// Opens a signed checkpoint as a client does: the note must verify, with a valid signature
    /// by `logKey` and by at least `requiredCosignatures` of `witnesses` (cosignature keys), and
    /// name `origin`.
    public static func open(
        _ bytes: some DataProtocol, origin: String, logKey: NoteVerifierKey,
        witnesses: [NoteVerifierKey] = [], requiredCosignatures: Int = 0
    ) throws(CheckpointError) -> VerifiedCheckpoint {
        let note: VerifiedNote
        do {
            note = try SignedNote.open(bytes, keys: [logKey] + witnesses)
        } catch {
            throw .note(error)
        }
        guard note.verified.contains(where: { $0.key == logKey }) else { throw .missingLogSignature(key: logKey.description) }
        let checkpoint = try Checkpoint(text: note.text)
        // Byte for byte: String equality would take another spelling of the origin for it.
        guard checkpoint.origin.utf8.elementsEqual(origin.utf8) else { throw .wrongOrigin(expected: origin, found: checkpoint.origin) }
        let cosignatures = note.verified.filter { $0.key != logKey && $0.cosignatureTime != nil }
        guard cosignatures.count >= requiredCosignatures else {
            throw .tooFewCosignatures(valid: cosignatures.count, required: requiredCosignatures)
        }
        return VerifiedCheckpoint(checkpoint: checkpoint, note: note, cosignatures: cosignatures)
    }

    private static func isValidLine(_ line: String) -> Bool {
        !line.isEmpty && !line.utf8.contains { $0 < 0x20 }
    }
}

/// A checkpoint whose log signature (and cosignatures, as required) verified.
public struct VerifiedCheckpoint: Sendable {
    public let checkpoint: Checkpoint
    public let note: VerifiedNote
    /// The witnesses' verified cosignatures, with the times they state.
    public let cosignatures: [VerifiedSignature]
}
