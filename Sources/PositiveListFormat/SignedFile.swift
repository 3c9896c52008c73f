import Crypto
import Foundation

/// The signature trailer of the retired signed files (formats 1 and 2), which a server reads
/// once on upgrade: each ends with a 64-byte Ed25519 signature over all bytes before it. No
/// program writes them any more (the tests' writers are in Tests/RetiredFormatWriters).
public enum SignedFile {
    public static let signatureByteCount = 64

    /// How a reader treats a file's signature trailer.
    enum SignatureCheck {
        case verify(Curve25519.Signing.PublicKey)
        /// Only for the fuzz targets (Fuzz/): a fuzzer cannot forge signatures, so without this
        /// it would never reach the structure checks that follow. No public API takes it.
        case skipForFuzzing
        /// The caller checked the whole file's SHA-256 against a digest it trusts more than the
        /// file (`init(recorded:listedAs:)`): the digest vouches for it as the signature would.
        case digestChecked
    }

    /// The body of a signed file whose trailer passes `check`.
    static func verifiedBody(
        _ file: [UInt8], kind: PositiveListFormatError.FileKind, minimumBodySize: Int, check: SignatureCheck
    ) throws(PositiveListFormatError) -> ArraySlice<UInt8> {
        guard file.count >= minimumBodySize + signatureByteCount else {
            throw .truncated(kind, byteCount: file.count)
        }
        let bodyEnd = file.count - signatureByteCount
        let body = file[..<bodyEnd]
        let signature = file[bodyEnd...]
        if case .verify(let publicKey) = check, !publicKey.isValidSignature(signature, for: body) { throw .badSignature(kind) }
        return body
    }
}

/// A server's public key as nodes configure it: 32 bytes in standard base64.
///
/// Kept as raw bytes because swift-crypto's key types are not `Sendable` on every platform.
public struct PositiveListPublicKey: Sendable, Equatable {
    public let rawRepresentation: [UInt8]

    public init(_ key: Curve25519.Signing.PublicKey) {
        rawRepresentation = Array(key.rawRepresentation)
    }

    public init(base64: String) throws(PositiveListFormatError) {
        guard let raw = Data(base64Encoded: base64.trimmingCharacters(in: .whitespacesAndNewlines)),
              (try? Curve25519.Signing.PublicKey(rawRepresentation: raw)) != nil
        else { throw .invalidPublicKey }
        rawRepresentation = Array(raw)
    }

    /// The key, rebuilt from bytes that both initializers have already checked.
    public var key: Curve25519.Signing.PublicKey {
        // swiftlint:disable:next force_try
        try! Curve25519.Signing.PublicKey(rawRepresentation: rawRepresentation)
    }

    public var base64: String { Data(rawRepresentation).base64EncodedString() }

    /// The origin of the list log this key signs when its server sets none (`logOrigin`), and so
    /// the one a node expects when it sets none (`list.origin`): `tracer-list/` and the first 16
    /// hex digits of SHA-256 of the key.
    public var defaultLogOrigin: String {
        "tracer-list/" + SHA256.hash(data: rawRepresentation).prefix(8).map { String(format: "%02x", $0) }.joined()
    }
}
