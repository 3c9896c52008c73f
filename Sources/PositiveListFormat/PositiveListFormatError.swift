/// Why a published file was refused. Each case names the file kind so a node can say which
import IDRotation
/// download to retry.
public enum PositiveListFormatError: Error, Equatable, Sendable, CustomStringConvertible {
    public enum FileKind: String, Sendable {
        case batch
        case index
    }

    case truncated(FileKind, byteCount: Int)
    case wrongMagic(FileKind)
    case unsupportedVersion(FileKind, version: UInt8)
    case badSignature(FileKind)
    case lengthMismatch(FileKind, expected: Int, actual: Int)
    case entriesNotSorted(position: Int)
    case malformedWindow(position: Int)
    case timeOutOfRange(UnixTimeField)
    case batchNumberMismatch(expected: UInt64, actual: UInt64)
    case digestMismatch(batchNumber: UInt64)
    case invalidPublicKey

    public enum UnixTimeField: String, Sendable {
        case validFrom, validUntil
    }

    public var description: String {
        switch self {
        case .truncated(let kind, let count):
            return "the \(kind.rawValue) file is too short (\(count) bytes) to be a positive list \(kind.rawValue); download it again"
        case .wrongMagic(let kind):
            return "the file is not a positive list \(kind.rawValue) (wrong magic bytes); check the server address"
        case .unsupportedVersion(let kind, let version):
            return "the \(kind.rawValue) uses format version \(version), which this program does not know; upgrade tracer"
        case .badSignature(let kind):
            return "the \(kind.rawValue)'s signature does not verify with the configured public key; the file was altered or the key is wrong"
        case .lengthMismatch(let kind, let expected, let actual):
            return "the \(kind.rawValue) should be \(expected) bytes by its header but is \(actual); download it again"
        case .entriesNotSorted(let position):
            return "the batch's entries are not in strictly increasing id order at entry \(position); the file is malformed"
        case .malformedWindow(let position):
            return "entry \(position) has a validity window that ends before it starts; the file is malformed"
        case .timeOutOfRange(let field):
            return "a \(field.rawValue) time does not fit the format's 32-bit unsigned seconds"
        case .batchNumberMismatch(let expected, let actual):
            return "the index lists batch \(expected) but the file holds batch \(actual); download it again"
        case .digestMismatch(let number):
            return "batch \(number) does not match the SHA-256 listed in the index; download it again"
        case .invalidPublicKey:
            return "the public key is not a 32-byte Ed25519 key in base64; copy it again from `tracer-server keygen` or `status`"
        }
    }
}
