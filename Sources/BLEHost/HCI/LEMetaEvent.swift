/// LE Meta event (0x3E): the first parameter selects the LE subevent.
public enum LEMetaEvent: Sendable, Equatable {
    case connectionComplete(LEConnectionCompleteEvent)
    case enhancedConnectionComplete(LEConnectionCompleteEvent)
    case advertisingReport(LEAdvertisingReportEvent)
    case extendedAdvertisingReport(LEExtendedAdvertisingReportEvent)
    case connectionUpdateComplete(LEConnectionUpdateCompleteEvent)
    case readRemoteFeaturesComplete(LEReadRemoteFeaturesCompleteEvent)
    case unknown(subeventCode: UInt8, parameters: [UInt8])

    public init(decoding parameters: [UInt8]) throws(PacketDecodingError) {
        var reader = ByteReader(parameters)
        let subevent = try reader.readUInt8("Subevent_Code")
        let rest = reader.readRemaining()
        switch subevent {
        case 0x01: self = .connectionComplete(try LEConnectionCompleteEvent(decoding: rest, enhanced: false))
        case 0x02: self = .advertisingReport(try LEAdvertisingReportEvent(decoding: rest))
        case 0x03: self = .connectionUpdateComplete(try LEConnectionUpdateCompleteEvent(decoding: rest))
        case 0x04: self = .readRemoteFeaturesComplete(try LEReadRemoteFeaturesCompleteEvent(decoding: rest))
        case 0x0A: self = .enhancedConnectionComplete(try LEConnectionCompleteEvent(decoding: rest, enhanced: true))
        case 0x0D: self = .extendedAdvertisingReport(try LEExtendedAdvertisingReportEvent(decoding: rest))
        default: self = .unknown(subeventCode: subevent, parameters: rest)
        }
    }

    /// Either form of connection completion, for code that does not care which the controller sent.
    public var connectionComplete: LEConnectionCompleteEvent? {
        switch self {
        case .connectionComplete(let event), .enhancedConnectionComplete(let event): event
        default: nil
        }
    }
}
