import Crypto
import TracerCore

/// A one-time code an authority gives a diagnosed person so their node can upload its history.
///
/// 12 characters from a 31-symbol alphabet without look-alikes (no 0/O, 1/I/L), about 59 bits,
/// shown as three groups of four. Reading is forgiving: case, spaces and dashes are ignored.
public struct UploadCode: Sendable, Equatable, CustomStringConvertible {
    public static let alphabet = Array("23456789ABCDEFGHJKMNPQRSTUVWXYZ")
    public static let length = 12

    /// The canonical form: 12 alphabet characters, no separators.
    public let canonical: String

    public static func generate() -> UploadCode {
        var generator = SystemRandomNumberGenerator()
        let characters = (0..<length).map { _ in alphabet.randomElement(using: &generator)! }
        return UploadCode(canonical: String(characters))
    }

    private init(canonical: String) {
        self.canonical = canonical
    }

    /// Parses a code as typed by a person; nil when it cannot be a code at all.
    public init?(typed text: String) {
        let cleaned = text.uppercased().filter { $0 != "-" && $0 != " " }
        guard cleaned.count == Self.length, cleaned.allSatisfy(Self.alphabet.contains) else { return nil }
        canonical = cleaned
    }

    /// Grouped for reading aloud or typing: `ABCD-EFGH-JKMN`.
    public var display: String {
        let characters = Array(canonical)
        return stride(from: 0, to: characters.count, by: 4)
            .map { String(characters[$0..<min($0 + 4, characters.count)]) }
            .joined(separator: "-")
    }

    /// What the store keeps instead of the code.
    public var digest: [UInt8] { TokenDigest.of(canonical) }

    /// Never the code itself: logs and error messages get a short tag of its digest.
    public var description: String { "code#" + Hex.encode(digest.prefix(2)) }
}
