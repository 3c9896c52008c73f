/// Why the H4 byte stream cannot be framed any further.
public enum H4FramingError: Error, Equatable, Sendable {
    /// The byte where a packet indicator was expected is not one of the known HCI packet types.
    /// The stream is out of step from here on: the transport must be reopened.
    case unknownPacketType(UInt8, streamOffset: Int)
}

/// Cuts an H4 byte stream into HCI packets, accepting bytes in any chunking.
///
/// Lengths come from the packet headers, which are bounded by their field widths (at most 65,535 bytes
/// for ACL), so a hostile stream cannot make the parser buffer more than one maximal packet.
public struct H4FrameParser: Sendable {
    private enum Stage: Sendable {
        case awaitingIndicator
        case readingHeader(HCIPacketType)
        case readingPayload(HCIPacketType, remaining: Int)
        case failed(H4FramingError)
    }

    private var stage: Stage = .awaitingIndicator
    private var current: [UInt8] = []
    private var consumedByteCount = 0

    public init() {}

    /// Feeds more bytes and hands over each packet they complete, in order, as soon as it is complete, so
    /// packets before a bad indicator byte are still delivered. After an error the parser stays failed,
    /// because an H4 stream has no resynchronisation marker.
    public mutating func append<Bytes: Sequence>(
        _ bytes: Bytes, emit: (HCIPacket) -> Void
    ) throws(H4FramingError) where Bytes.Element == UInt8 {
        for byte in bytes {
            if let packet = try consume(byte) { emit(packet) }
        }
    }

    /// Feeds more bytes; returns every packet completed by them. On error, packets completed by the same
    /// call are lost: use `append(_:emit:)` where they matter.
    public mutating func append<Bytes: Sequence>(_ bytes: Bytes) throws(H4FramingError) -> [HCIPacket]
    where Bytes.Element == UInt8 {
        var completed: [HCIPacket] = []
        try append(bytes) { completed.append($0) }
        return completed
    }

    /// Bytes of a packet that has begun but not finished.
    public var pendingByteCount: Int { current.count }

    private mutating func consume(_ byte: UInt8) throws(H4FramingError) -> HCIPacket? {
        defer { consumedByteCount += 1 }
        switch stage {
        case .failed(let error):
            throw error
        case .awaitingIndicator:
            guard let type = HCIPacketType(rawValue: byte) else {
                let error = H4FramingError.unknownPacketType(byte, streamOffset: consumedByteCount)
                stage = .failed(error)
                throw error
            }
            current.removeAll(keepingCapacity: true)
            stage = .readingHeader(type)
            return nil
        case .readingHeader(let type):
            current.append(byte)
            guard current.count == Self.headerLength(of: type) else { return nil }
            let payloadLength = Self.payloadLength(of: type, header: current)
            if payloadLength == 0 { return finish(type) }
            stage = .readingPayload(type, remaining: payloadLength)
            return nil
        case .readingPayload(let type, let remaining):
            current.append(byte)
            if remaining == 1 { return finish(type) }
            stage = .readingPayload(type, remaining: remaining - 1)
            return nil
        }
    }

    private mutating func finish(_ type: HCIPacketType) -> HCIPacket {
        let packet = HCIPacket(type: type, body: current)
        current = []
        stage = .awaitingIndicator
        return packet
    }

    static func headerLength(of type: HCIPacketType) -> Int {
        switch type {
        case .command: 3          // opcode (2), parameter length (1)
        case .aclData: 4          // handle and flags (2), data length (2)
        case .synchronousData: 3  // handle and flags (2), data length (1)
        case .event: 2            // event code (1), parameter length (1)
        case .isochronousData: 4  // handle and flags (2), data length (14 bits of 2)
        }
    }

    /// Reads the payload length from a complete header; `header.count == headerLength(of: type)`.
    static func payloadLength(of type: HCIPacketType, header: [UInt8]) -> Int {
        switch type {
        case .command: Int(header[2])
        case .aclData: Int(header[2]) | Int(header[3]) << 8
        case .synchronousData: Int(header[2])
        case .event: Int(header[1])
        case .isochronousData: (Int(header[2]) | Int(header[3]) << 8) & 0x3FFF
        }
    }
}
