/// Why a published file was refused. Each case names the file kind so a node can say which
/// download to retry.
public enum PositiveListFormatError: Error, Equatable, Sendable, CustomStringConvertible {
    public enum FileKind: String, Sendable {
        case batch
        case index
        case keyBatch = "key batch"
        case keyIndex = "key index"
        case logEntry = "log entry"
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
    /// Key batches: groups must be in strictly increasing (day, interval) order, each non-empty.
    case keyGroupsNotSorted(group: Int)
    case emptyKeyGroup(group: Int)
    case keyGroupOutOfRange(group: Int)
    case keysNotSorted(position: Int)
    /// The groups' counts do not add up to the header's key count.
    case keyCountMismatch(header: UInt64, groups: UInt64)
    /// A log entry (format version 3) that breaks a rule of its layout, named in the text.
    case logEntryMalformed(String)

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
        case .keyGroupsNotSorted(let group):
            return "key group \(group) is not after the previous one in (day, interval) order; the file is malformed"
        case .emptyKeyGroup(let group):
            return "key group \(group) holds no keys; the file is malformed"
        case .keyGroupOutOfRange(let group):
            return "key group \(group) has a rotation interval outside 5 s to 24 h or a day beyond the 32-bit window index; the file is malformed"
        case .keysNotSorted(let position):
            return "the key batch's keys are not in strictly increasing order within their group at key \(position); the file is malformed"
        case .keyCountMismatch(let header, let groups):
            return "the key batch's header counts \(header) keys but its groups \(groups); the file is malformed"
        case .logEntryMalformed(let reason):
            return "a log entry is malformed: \(reason)"
        case .invalidPublicKey:
            return "the public key is not a 32-byte Ed25519 key in base64; copy it again from `tracer-server keygen` or `status`"
        }
    }
}
