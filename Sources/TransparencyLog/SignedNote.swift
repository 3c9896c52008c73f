import Foundation

/// Why a signed note (or a key for one) was refused.
public enum SignedNoteError: Error, Equatable, Sendable, CustomStringConvertible {
    case malformed(reason: String)
    case tooLarge(byteCount: Int, limit: Int)
    case tooManySignatures(limit: Int)
    case invalidKeyName(String)
    case invalidVerifierKey(String, reason: String)
    /// Two trusted keys share a name and key id, so a signature line cannot say which one it is.
    case ambiguousKeys(name: String, keyID: UInt32)
    /// A trusted key's signature that does not verify: the whole note is refused.
    case invalidSignature(name: String, keyID: UInt32)
    /// No signature by any trusted key.
    case noTrustedSignature
    case signingFailed(name: String, reason: String)

    public var description: String {
        switch self {
        case let .malformed(reason): "malformed note: \(reason)"
        case let .tooLarge(byteCount, limit): "note of \(byteCount) bytes is over the limit of \(limit)"
        case let .tooManySignatures(limit): "note has more than \(limit) signatures"
        case let .invalidKeyName(name): "\"\(name)\" is not a key name (empty, or has a space or +)"
        case let .invalidVerifierKey(text, reason): "verifier key \"\(text)\": \(reason)"
        case let .ambiguousKeys(name, keyID): "two trusted keys are named \(name)+\(NoteKeyName.hex(keyID))"
        case let .invalidSignature(name, keyID): "the signature by \(name)+\(NoteKeyName.hex(keyID)) does not verify"
        case .noTrustedSignature: "note has no valid signature by a trusted key"
        case let .signingFailed(name, reason): "signing as \(name) failed: \(reason)"
        }
    }
}

/// One signature line: `— <name> base64(key id || signature)`.
public struct NoteSignature: Hashable, Sendable {
    public let name: String
    public let keyID: UInt32
    /// What follows the key id: an Ed25519 signature, or a cosignature's time then signature.
    public let signature: Data

    public init(name: String, keyID: UInt32, signature: Data) {
        self.name = name
        self.keyID = keyID
        self.signature = signature
    }

    public var line: String {
        var payload = Data()
        withUnsafeBytes(of: keyID.bigEndian) { payload.append(contentsOf: $0) }
        payload.append(signature)
        return "— \(name) \(payload.base64EncodedString())\n"
    }
}

/// A signature by a trusted key that verified, with the time a cosignature states.
public struct VerifiedSignature: Hashable, Sendable {
    public let key: NoteVerifierKey
    public let cosignatureTime: UInt64?
}

/// A note whose text has been vouched for by at least one trusted key.
public struct VerifiedNote: Sendable {
    public let text: String
    public let verified: [VerifiedSignature]
    /// Lines by keys the verifier does not know, kept (not checked) so they can be passed on.
    public let unverified: [NoteSignature]
}

/// A C2SP signed note: text ending in a newline, a blank line, then one or more signature lines.
/// Parsing checks the structure only; `verify` decides whether the text may be believed.
public struct SignedNote: Hashable, Sendable {
    /// Checkpoints are a few hundred bytes; the limits keep a hostile note from costing more
    /// than that by much, while allowing the 16 signatures the spec requires and room to spare.
    public static let maximumBytes = 1 << 16
    public static let maximumSignatures = 100

    public let text: String
    public let signatures: [NoteSignature]

    /// A note to sign: `text` must end in a newline and hold no control character but newlines;
    /// signature names must be valid, or the note would not parse back.
    public init(text: String, signatures: [NoteSignature] = []) throws(SignedNoteError) {
        try Self.checkText(text)
        for signature in signatures where !NoteKeyName.isValid(signature.name) { throw .invalidKeyName(signature.name) }
        self.text = text
        self.signatures = signatures
    }

    public var encoded: Data { Data((text + "\n" + signatures.map(\.line).joined()).utf8) }

    /// This note with `signer`'s signature added (replacing an earlier one by the same key).
    public func signed(by signer: NoteSigner, timestamp: UInt64 = 0) throws(SignedNoteError) -> SignedNote {
        let signature = try signer.sign(text: text, timestamp: timestamp)
        let others = signatures.filter { $0.name != signature.name || $0.keyID != signature.keyID }
        return try SignedNote(text: text, signatures: others + [signature])
    }

    /// Splits the bytes of a note into text and signature lines, enforcing the format and the
    /// limits; no signature is checked.
    public init(parsing bytes: some DataProtocol) throws(SignedNoteError) {
        guard bytes.count <= Self.maximumBytes else { throw .tooLarge(byteCount: bytes.count, limit: Self.maximumBytes) }
        guard let whole = String(validating: Array(bytes), as: UTF8.self) else { throw .malformed(reason: "not UTF-8") }
        guard !whole.utf8.contains(where: { $0 < 0x20 && $0 != 0x0A }) else {
            throw .malformed(reason: "a control character other than newline")
        }
        // The text ends at the last blank line; everything after it is signature lines.
        guard let split = whole.range(of: "\n\n", options: .backwards) else {
            throw .malformed(reason: "no blank line before the signatures")
        }
        let text = String(whole[..<whole.index(after: split.lowerBound)])
        let block = whole[split.upperBound...]
        guard !block.isEmpty, block.hasSuffix("\n") else { throw .malformed(reason: "no signature, or a last line without newline") }
        var signatures: [NoteSignature] = []
        for line in block.dropLast().split(separator: "\n", omittingEmptySubsequences: false) {
            guard signatures.count < Self.maximumSignatures else { throw .tooManySignatures(limit: Self.maximumSignatures) }
            signatures.append(try Self.parseSignatureLine(line))
        }
        self.text = text
        self.signatures = signatures
    }

    /// Checks the note against the trusted `keys`: lines by unknown keys are set aside, every
    /// line by a trusted key must verify, and at least one must.
    public func verify(with keys: [NoteVerifierKey]) throws(SignedNoteError) -> VerifiedNote {
        var trusted: [NoteKeyHandle: NoteVerifierKey] = [:]
        for key in keys {
            let handle = NoteKeyHandle(name: key.name, keyID: key.keyID)
            if let other = trusted[handle], other != key { throw .ambiguousKeys(name: key.name, keyID: key.keyID) }
            trusted[handle] = key
        }
        var verified: [VerifiedSignature] = []
        var seen = Set<NoteKeyHandle>()
        var unverified: [NoteSignature] = []
        for signature in signatures {
            guard let key = trusted[NoteKeyHandle(name: signature.name, keyID: signature.keyID)] else {
                if !unverified.contains(signature) { unverified.append(signature) }
                continue
            }
            let time = try Self.check(signature, by: key, text: text)
            if seen.insert(NoteKeyHandle(name: key.name, keyID: key.keyID)).inserted {
                verified.append(VerifiedSignature(key: key, cosignatureTime: time))
            }
        }
        guard !verified.isEmpty else { throw .noTrustedSignature }
        return VerifiedNote(text: text, verified: verified, unverified: unverified)
    }

    /// Parses and verifies in one step.
    public static func open(_ bytes: some DataProtocol, keys: [NoteVerifierKey]) throws(SignedNoteError) -> VerifiedNote {
        try SignedNote(parsing: bytes).verify(with: keys)
    }

    /// A key as a signature line names it. The name is kept as bytes: Swift's String equality
    /// is Unicode-canonical, and a line spelling a name with other bytes names another key.
    private struct NoteKeyHandle: Hashable {
        let name: [UInt8]
        let keyID: UInt32

        init(name: String, keyID: UInt32) {
            self.name = Array(name.utf8)
            self.keyID = keyID
        }
    }

    /// Verifies one line by a trusted key; returns the time a cosignature states.
    private static func check(_ signature: NoteSignature, by key: NoteVerifierKey, text: String) throws(SignedNoteError) -> UInt64? {
        switch key.type {
        case .ed25519:
            guard signature.signature.count == 64, key.isValid(signature: signature.signature, for: Data(text.utf8)) else {
                throw .invalidSignature(name: key.name, keyID: key.keyID)
            }
            return nil
        case .cosignatureV1:
            let bytes = signature.signature
            guard bytes.count == 8 + 64 else { throw .invalidSignature(name: key.name, keyID: key.keyID) }
            let timestamp = bytes.prefix(8).reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
            guard timestamp <= UInt64(Int64.max),
                  key.isValid(signature: bytes.dropFirst(8), for: NoteCosignature.message(text: text, timestamp: timestamp))
            else { throw .invalidSignature(name: key.name, keyID: key.keyID) }
            return timestamp
        }
    }

    private static func parseSignatureLine(_ line: Substring) throws(SignedNoteError) -> NoteSignature {
        guard line.hasPrefix("— ") else { throw .malformed(reason: "a signature line does not start with an em dash and a space") }
        let rest = line.dropFirst(2)
        guard let space = rest.firstIndex(of: " ") else { throw .malformed(reason: "a signature line has no space after the name") }
        let name = String(rest[..<space])
        guard NoteKeyName.isValid(name) else { throw .malformed(reason: "signature name \"\(name)\" is empty or has a space or +") }
        guard let payload = NoteBase64.decode(rest[rest.index(after: space)...]), payload.count >= 5 else {
            throw .malformed(reason: "the signature by \(name) is not canonical base64 of a key id and a signature")
        }
        let keyID = payload.prefix(4).reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
        return NoteSignature(name: name, keyID: keyID, signature: Data(payload.dropFirst(4)))
    }

    private static func checkText(_ text: String) throws(SignedNoteError) {
        guard text.hasSuffix("\n") else { throw .malformed(reason: "the text does not end in a newline") }
        guard !text.utf8.contains(where: { $0 < 0x20 && $0 != 0x0A }) else {
            throw .malformed(reason: "a control character other than newline")
        }
    }
}
