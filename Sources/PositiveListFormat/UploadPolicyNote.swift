import Foundation
import TransparencyLog

/// Which uploads the authority takes (its `acceptUploads`), as a note signed by the log's key
/// and published beside the checkpoint (`log/uploads`, docs/positive-list-format.md, "Upload
/// policy"). `tracer report` reads it before it offers a choice, so that a change made on the
/// way cannot push a user toward the linkable kind (keys); the key index's header byte 5 said the
/// same, and the index is being retired (issue 39, item 6).
///
/// The text is three lines: `tracer-uploads/v1`, the log's origin, and `accept` followed by the
/// kinds in a fixed order (` ids`, ` keys`). A checkpoint's third line is a base64 root, which
/// has no space, so the log key's signature on one kind of note never stands for the other.
public struct UploadPolicyNote: Sendable, Equatable {
    public static let relativePath = "log/uploads"
    public static let header = "tracer-uploads/v1"
    /// Far above the ~250 bytes of a policy with a long origin and a few cosignatures.
    public static let maximumByteCount = 8_192

    public let origin: String
    public let accepts: AcceptedUploads

    public init(origin: String, accepts: AcceptedUploads) {
        self.origin = origin
        self.accepts = accepts
    }

    public var text: String {
        var kinds = ""
        if accepts.contains(.ids) { kinds += " ids" }
        if accepts.contains(.keys) { kinds += " keys" }
        return "\(Self.header)\n\(origin)\naccept\(kinds)\n"
    }

    /// Parses a note text strictly: exactly the three lines, at least one kind, each once, in order.
    public init(text: String) throws(UploadPolicyError) {
        guard text.hasSuffix("\n") else { throw .malformed("the text does not end in a newline") }
        let lines = text.dropLast().split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        guard lines.count == 3 else { throw .malformed("it has \(lines.count) lines, not 3") }
        guard lines[0] == Self.header else { throw .malformed("its first line is not \(Self.header)") }
        let words = lines[2].split(separator: " ", omittingEmptySubsequences: false)
        guard words.first == "accept" else { throw .malformed("its third line does not begin with accept") }
        var accepts: AcceptedUploads = []
        for word in words.dropFirst() {
            switch word {
            case "ids" where accepts.isEmpty: accepts.insert(.ids)
            case "keys" where !accepts.contains(.keys): accepts.insert(.keys)
            default: throw .malformed("the kinds are not \"ids\", \"keys\" or \"ids keys\"")
            }
        }
        guard !accepts.isEmpty else { throw .malformed("it names no kind") }
        self.init(origin: lines[1], accepts: accepts)
    }

    /// The note signed by the log's own key (plain Ed25519 under the origin, as the checkpoint's
    /// first signature).
    public func signed(by signer: NoteSigner) throws(SignedNoteError) -> SignedNote {
        try SignedNote(text: text).signed(by: signer)
    }

    /// Verifies `bytes` with the log's verifier key and checks that they name `origin`.
    public static func open(_ bytes: some DataProtocol, origin: String, logKey: NoteVerifierKey) throws(UploadPolicyError) -> UploadPolicyNote {
        guard bytes.count <= maximumByteCount else { throw .malformed("it is over \(maximumByteCount) bytes") }
        let note: VerifiedNote
        do {
            note = try SignedNote.open(bytes, keys: [logKey])
        } catch {
            throw .notSigned(error)
        }
        let policy = try UploadPolicyNote(text: note.text)
        // Byte for byte: String equality would take another spelling of the origin for it.
        guard Array(policy.origin.utf8) == Array(origin.utf8) else { throw .otherOrigin(policy.origin) }
        return policy
    }
}

public enum UploadPolicyError: Error, Equatable, Sendable, CustomStringConvertible {
    case malformed(String)
    /// No valid signature by the log's key.
    case notSigned(SignedNoteError)
    /// Signed by the key, for another log of the same key.
    case otherOrigin(String)

    public var description: String {
        switch self {
        case .malformed(let reason): "the upload policy is not one: \(reason)"
        case .notSigned(let error): "the upload policy is not signed by the list's key (\(error))"
        case .otherOrigin(let origin): "the upload policy is for the log \(origin), not this one"
        }
    }
}
