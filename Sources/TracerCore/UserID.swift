import Crypto

/// Why bytes or text could not be read as a `UserID`.
public enum UserIDError: Error, Equatable, Sendable, CustomStringConvertible {
    case wrongByteCount(Int)
    case invalidHex(String)

    public var description: String {
        switch self {
        case .wrongByteCount(let count):
            return "a userId is exactly 8 bytes, got \(count)"
        case .invalidHex:
            // The rejected text is not echoed: it may be an id typed by a person.
            return "a userId is written as exactly 16 hexadecimal characters"
        }
    }
}

/// The 8-byte identifier a node broadcasts during one rotation window: derived from the day's
/// key (`IDDerivation`), and indistinguishable from random to anyone without that key.
///
/// Interpolating a `UserID` into a string yields only its short tag, so a full id cannot reach
/// a log by accident; code that must show or transmit the id asks for `hex` or `bytes`.
public struct UserID: Hashable, Comparable, Sendable, CustomStringConvertible, CustomDebugStringConvertible {
    public static let byteCount = 8

    /// The 8 bytes read as a big-endian integer, so that integer order equals byte order.
    public let rawValue: UInt64

    public init(rawValue: UInt64) {
        self.rawValue = rawValue
    }

    public init<Bytes: Collection>(bytes: Bytes) throws(UserIDError) where Bytes.Element == UInt8 {
        guard bytes.count == Self.byteCount else { throw .wrongByteCount(bytes.count) }
        rawValue = bytes.reduce(0) { $0 << 8 | UInt64($1) }
    }

    public init(hex: String) throws(UserIDError) {
        guard hex.utf8.count == 2 * Self.byteCount, let bytes = Hex.decode(hex) else { throw .invalidHex(hex) }
        rawValue = bytes.reduce(0) { $0 << 8 | UInt64($1) }
    }

    /// A fresh id from the operating system's CSPRNG (`getrandom(2)` on Linux).
    public static func random() -> UserID {
        var generator = SystemRandomNumberGenerator()
        return random(using: &generator)
    }

    public static func random<Generator: RandomNumberGenerator>(using generator: inout Generator) -> UserID {
        UserID(rawValue: generator.next())
    }

    public var bytes: [UInt8] {
        (0..<Self.byteCount).map { UInt8(truncatingIfNeeded: rawValue >> (8 * (7 - $0))) }
    }

    /// Lowercase hexadecimal, 16 characters: for people and for the positive list, never for logs.
    public var hex: String { Hex.encode(bytes) }

    /// A short, non-reversible label: the first 2 bytes of SHA-256 of the id. Many ids share a
    /// tag, which is the point: a tag tells log lines apart without identifying anyone.
    public var tag: String {
        let digest = SHA256.hash(data: bytes)
        return "id#" + Hex.encode(digest.prefix(2))
    }

    public var description: String { tag }
    public var debugDescription: String { tag }

    public static func < (lhs: UserID, rhs: UserID) -> Bool { lhs.rawValue < rhs.rawValue }

    /// The id stored in a signed 64-bit SQLite integer column (same bits).
    public var databaseValue: Int64 { Int64(bitPattern: rawValue) }
    public init(databaseValue: Int64) { rawValue = UInt64(bitPattern: databaseValue) }
}
