/// Why a transport failed or stopped. The layer above decides whether to reopen it.
public enum HCITransportError: Error, Equatable, Sendable, CustomStringConvertible {
    /// Opening the transport failed; the message says why and, where known, how to fix it.
    case openFailed(spec: String, reason: String)
    /// The peer closed the connection, or the device went away.
    case disconnected(reason: String)
    /// A read or write system call failed.
    case ioFailed(operation: String, errno: Int32)
    /// The byte stream could not be framed into HCI packets.
    case framing(H4FramingError)
    /// `send` was called after `close`.
    case closed

    public var description: String {
        switch self {
        case .openFailed(let spec, let reason): "cannot open HCI transport \(spec): \(reason)"
        case .disconnected(let reason): "HCI transport disconnected: \(reason)"
        case .ioFailed(let operation, let code): "HCI transport \(operation) failed: \(describeErrno(code))"
        case .framing(let error): "HCI transport lost H4 framing: \(error)"
        case .closed: "HCI transport is closed"
        }
    }
}

/// A byte path to one Bluetooth controller, carrying whole HCI packets both ways.
public protocol HCITransport: Sendable {
    /// Sends one packet (the transport adds the H4 indicator where its medium needs it).
    func send(_ packet: HCIPacket) async throws(HCITransportError)

    /// Packets from the controller, in order. When the transport drops, the stream finishes by
    /// throwing an `HCITransportError`; after `close()` it finishes without an error.
    /// There is exactly one stream per transport, for exactly one consumer.
    var incoming: AsyncThrowingStream<HCIPacket, any Error> { get }

    /// Stops reading and releases the underlying descriptor. Safe to call more than once.
    func close() async
}
