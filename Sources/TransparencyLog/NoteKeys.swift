import Crypto
import Foundation

/// The signature kinds this module signs and checks (C2SP signed-note, "Signature types"). Both
/// are Ed25519; a cosignature also signs the time it was made.
public enum NoteSignatureType: UInt8, Sendable {
    /// A plain Ed25519 signature over the note text: the log's own.
    case ed25519 = 0x01
    /// A C2SP tlog-cosignature/v1 timestamped Ed25519 signature: a witness's.
    case cosignatureV1 = 0x04
}

/// A public key as a note verifier knows it: `<name>+<hex key id>+<base64(type || key)>`.
public struct NoteVerifierKey: Hashable, Sendable, CustomStringConvertible {
    public let name: String
    public let keyID: UInt32
    public let type: NoteSignatureType
    /// The 32-byte Ed25519 public key.
    public let publicKey: Data

    public init(name: String, type: NoteSignatureType, publicKey: Curve25519.Signing.PublicKey) throws(SignedNoteError) {
        guard NoteKeyName.isValid(name) else { throw .invalidKeyName(name) }
        self.name = name
        self.type = type
        self.publicKey = publicKey.rawRepresentation
        self.keyID = NoteKeyName.keyID(name: name, type: type, publicKey: self.publicKey)
    }

    /// Parses vkey text. The key id must be the one the name and key call for (the only rule the
    /// spec gives for these types), so a mistyped key never lies dormant.
    public init(text: String) throws(SignedNoteError) {
        // The name and the id hold no +; base64 may, so only the first two separate.
        let parts = text.split(separator: "+", maxSplits: 2, omittingEmptySubsequences: false)
        guard parts.count == 3 else { throw .invalidVerifierKey(text, reason: "it is not <name>+<key id>+<key>") }
        let name = String(parts[0])
        guard NoteKeyName.isValid(name) else { throw .invalidVerifierKey(text, reason: "the name is empty or has a space or +") }
        let hex = parts[1]
        let isLowercaseHex = { (byte: UInt8) in
            (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) || (UInt8(ascii: "a")...UInt8(ascii: "f")).contains(byte)
        }
        guard hex.utf8.count == 8, hex.utf8.allSatisfy(isLowercaseHex), let keyID = UInt32(hex, radix: 16)
        else { throw .invalidVerifierKey(text, reason: "the key id is not 8 lowercase hex digits") }
        guard let material = NoteBase64.decode(parts[2]), let typeByte = material.first else {
            throw .invalidVerifierKey(text, reason: "the key is not canonical base64")
        }
        guard let type = NoteSignatureType(rawValue: typeByte) else {
            throw .invalidVerifierKey(text, reason: "signature type 0x\(String(typeByte, radix: 16)) is not supported")
        }
        let key = Data(material.dropFirst())
        guard key.count == 32, (try? Curve25519.Signing.PublicKey(rawRepresentation: key)) != nil else {
            throw .invalidVerifierKey(text, reason: "the Ed25519 key is not 32 bytes")
        }
        guard keyID == NoteKeyName.keyID(name: name, type: type, publicKey: key) else {
            throw .invalidVerifierKey(text, reason: "the key id does not match the name and key")
        }
        self.name = name
        self.keyID = keyID
        self.type = type
        self.publicKey = key
    }

    /// Any name, id and key, unchecked: for tests of what a verifier does with a hostile set of keys.
    init(uncheckedName name: String, keyID: UInt32, type: NoteSignatureType, publicKey: Data) {
        self.name = name
        self.keyID = keyID
        self.type = type
        self.publicKey = publicKey
    }

    public var text: String {
        "\(name)+\(NoteKeyName.hex(keyID))+\((Data([type.rawValue]) + publicKey).base64EncodedString())"
    }

    public var description: String { "\(name)+\(NoteKeyName.hex(keyID))" }

    /// Whether `signature` over `message` (already framed for the type) is this key's.
    func isValid(signature: some DataProtocol, for message: some DataProtocol) -> Bool {
        guard let key = try? Curve25519.Signing.PublicKey(rawRepresentation: publicKey) else { return false }
        return key.isValidSignature(signature, for: message)
    }
}

/// A private key that signs notes under a name: the log's (`.ed25519`) or a witness's
/// (`.cosignatureV1`).
public struct NoteSigner: Sendable {
    public let verifierKey: NoteVerifierKey
    /// The 32-byte seed rather than Crypto's key type, which is not Sendable.
    private let seed: Data

    public init(name: String, type: NoteSignatureType = .ed25519, privateKey: Curve25519.Signing.PrivateKey) throws(SignedNoteError) {
        self.verifierKey = try NoteVerifierKey(name: name, type: type, publicKey: privateKey.publicKey)
        self.seed = privateKey.rawRepresentation
    }

    /// From the 32-byte Ed25519 seed a key file holds.
    public init(name: String, type: NoteSignatureType = .ed25519, seed: some DataProtocol) throws(SignedNoteError) {
        guard seed.count == 32, let key = try? Curve25519.Signing.PrivateKey(rawRepresentation: Data(seed)) else {
            throw .signingFailed(name: name, reason: "an Ed25519 seed has 32 bytes, not \(seed.count)")
        }
        try self.init(name: name, type: type, privateKey: key)
    }

    /// A signer with a fresh random key.
    public static func generate(name: String, type: NoteSignatureType = .ed25519) throws(SignedNoteError) -> NoteSigner {
        try NoteSigner(name: name, type: type, privateKey: Curve25519.Signing.PrivateKey())
    }

    public var name: String { verifierKey.name }

    /// The signature line for `text`. `timestamp` (POSIX seconds) is what a cosignature states
    /// and signs; a plain signature ignores it.
    public func sign(text: String, timestamp: UInt64 = 0) throws(SignedNoteError) -> NoteSignature {
        var payload = Data()
        let message: Data
        switch verifierKey.type {
        case .ed25519:
            message = Data(text.utf8)
        case .cosignatureV1:
            guard timestamp <= UInt64(Int64.max) else { throw .malformed(reason: "a cosignature's time is at most 2^63 - 1") }
            withUnsafeBytes(of: timestamp.bigEndian) { payload.append(contentsOf: $0) }
            message = NoteCosignature.message(text: text, timestamp: timestamp)
        }
        do {
            payload.append(try Curve25519.Signing.PrivateKey(rawRepresentation: seed).signature(for: message))
        } catch {
            throw .signingFailed(name: name, reason: String(describing: error))
        }
        return NoteSignature(name: name, keyID: verifierKey.keyID, signature: payload)
    }
}

enum NoteCosignature {
    /// What a tlog-cosignature/v1 signs: a header line, the time line, then the note text.
    static func message(text: String, timestamp: UInt64) -> Data {
        Data("cosignature/v1\ntime \(timestamp)\n\(text)".utf8)
    }
}

enum NoteKeyName {
    /// Non-empty, with no Unicode space and no +, which would make vkeys and signature lines ambiguous.
    static func isValid(_ name: String) -> Bool {
        !name.isEmpty && !name.unicodeScalars.contains { $0.properties.isWhitespace || $0 == "+" || $0.value < 0x20 }
    }

    /// SHA-256(name || 0x0A || type || public key), first four bytes, big-endian.
    static func keyID(name: String, type: NoteSignatureType, publicKey: Data) -> UInt32 {
        var hasher = SHA256()
        hasher.update(data: Data(name.utf8) + [0x0A, type.rawValue] + publicKey)
        return hasher.finalize().prefix(4).reduce(0) { $0 << 8 | UInt32($1) }
    }

    static func hex(_ keyID: UInt32) -> String {
        let digits = String(keyID, radix: 16)
        return String(repeating: "0", count: 8 - digits.count) + digits
    }
}

enum NoteBase64 {
    /// Standard padded base64, only in its canonical spelling: one value, one text.
    static func decode(_ text: some StringProtocol) -> Data? {
        let string = String(text)
        guard let data = Data(base64Encoded: string), data.base64EncodedString() == string else { return nil }
        return data
    }
}
