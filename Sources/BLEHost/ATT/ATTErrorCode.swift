/// The Error Code of an ATT Error Response (Core Spec Vol 3 Part F 3.4.1.1, Table 3.4).
/// A struct so that application (0x80-0x9F) and profile (0xE0-0xFF) codes stay representable.
/// It is an `Error` so that GATT read and write callbacks can reject with `throw ATTErrorCode.writeNotPermitted`.
public struct ATTErrorCode: RawRepresentable, Hashable, Sendable, Error, CustomStringConvertible {
    public let rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }
    public init(_ rawValue: UInt8) { self.rawValue = rawValue }

    public static let invalidHandle = ATTErrorCode(0x01)
    public static let readNotPermitted = ATTErrorCode(0x02)
    public static let writeNotPermitted = ATTErrorCode(0x03)
    public static let invalidPDU = ATTErrorCode(0x04)
    public static let insufficientAuthentication = ATTErrorCode(0x05)
    public static let requestNotSupported = ATTErrorCode(0x06)
    public static let invalidOffset = ATTErrorCode(0x07)
    public static let insufficientAuthorization = ATTErrorCode(0x08)
    public static let prepareQueueFull = ATTErrorCode(0x09)
    public static let attributeNotFound = ATTErrorCode(0x0A)
    public static let attributeNotLong = ATTErrorCode(0x0B)
    public static let insufficientEncryptionKeySize = ATTErrorCode(0x0C)
    public static let invalidAttributeValueLength = ATTErrorCode(0x0D)
    public static let unlikelyError = ATTErrorCode(0x0E)
    public static let insufficientEncryption = ATTErrorCode(0x0F)
    public static let unsupportedGroupType = ATTErrorCode(0x10)
    public static let insufficientResources = ATTErrorCode(0x11)
    public static let databaseOutOfSync = ATTErrorCode(0x12)
    public static let valueNotAllowed = ATTErrorCode(0x13)
    // Common Profile and Service Error Codes (Core Spec Supplement Part B).
    public static let writeRequestRejected = ATTErrorCode(0xFC)
    public static let cccdImproperlyConfigured = ATTErrorCode(0xFD)
    public static let procedureAlreadyInProgress = ATTErrorCode(0xFE)
    public static let outOfRange = ATTErrorCode(0xFF)

    public var name: String {
        switch self {
        case .invalidHandle: return "Invalid Handle"
        case .readNotPermitted: return "Read Not Permitted"
        case .writeNotPermitted: return "Write Not Permitted"
        case .invalidPDU: return "Invalid PDU"
        case .insufficientAuthentication: return "Insufficient Authentication"
        case .requestNotSupported: return "Request Not Supported"
        case .invalidOffset: return "Invalid Offset"
        case .insufficientAuthorization: return "Insufficient Authorization"
        case .prepareQueueFull: return "Prepare Queue Full"
        case .attributeNotFound: return "Attribute Not Found"
        case .attributeNotLong: return "Attribute Not Long"
        case .insufficientEncryptionKeySize: return "Insufficient Encryption Key Size"
        case .invalidAttributeValueLength: return "Invalid Attribute Value Length"
        case .unlikelyError: return "Unlikely Error"
        case .insufficientEncryption: return "Insufficient Encryption"
        case .unsupportedGroupType: return "Unsupported Group Type"
        case .insufficientResources: return "Insufficient Resources"
        case .databaseOutOfSync: return "Database Out Of Sync"
        case .valueNotAllowed: return "Value Not Allowed"
        case .writeRequestRejected: return "Write Request Rejected"
        case .cccdImproperlyConfigured: return "CCCD Improperly Configured"
        case .procedureAlreadyInProgress: return "Procedure Already In Progress"
        case .outOfRange: return "Out Of Range"
        default:
            switch rawValue {
            case 0x80...0x9F: return "Application Error"
            case 0xE0...0xFF: return "Profile Error"
            default: return "Reserved Error"
            }
        }
    }

    public var description: String {
        "\(name) (0x" + HexFormat.format(rawValue, digits: 2) + ")"
    }
}
