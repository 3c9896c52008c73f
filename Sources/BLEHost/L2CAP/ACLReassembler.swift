/// Rebuilds L2CAP frames from ACL fragments, per connection handle, with limits so that a peer cannot make
/// the host buffer without bound: a declared frame length above `maximumFrameLength` is discarded without
/// buffering, an unfinished frame is dropped when a new one starts or once it is older than `timeout`, and
/// a fragment that would overrun the declared length drops the frame.
public struct ACLReassembler: Sendable {
    public struct Limits: Sendable, Equatable {
        /// Largest L2CAP payload accepted (the ATT MTU is at most 517).
        public var maximumFrameLength: Int
        public var timeout: Duration

        public init(maximumFrameLength: Int = 1024, timeout: Duration = .seconds(10)) {
            self.maximumFrameLength = maximumFrameLength
            self.timeout = timeout
        }
    }

    public enum Outcome: Sendable, Equatable {
        case frame(connectionHandle: UInt16, L2CAPBasicFrame)
        case needMore
        case dropped(DropReason)
    }

    public enum DropReason: Sendable, Equatable {
        case declaredLengthTooLong(connectionHandle: UInt16, length: Int)
        case startFragmentTooShort(connectionHandle: UInt16)
        case continuationWithoutStart(connectionHandle: UInt16)
        case overrun(connectionHandle: UInt16)
        case replacedByNewStart(connectionHandle: UInt16)
    }

    private struct PartialFrame: Sendable {
        var expectedTotal: Int
        var bytes: [UInt8]
        var started: ContinuousClock.Instant
    }

    public let limits: Limits
    private var partials: [UInt16: PartialFrame] = [:]

    public init(limits: Limits = Limits()) { self.limits = limits }

    /// Connection handles with a frame in progress.
    public var handlesInProgress: Set<UInt16> { Set(partials.keys) }
    public var bufferedByteCount: Int { partials.values.reduce(0) { $0 + $1.bytes.count } }

    /// Takes one fragment. When a start fragment replaces an unfinished frame and the new frame is itself
    /// still incomplete, the outcome reports the replacement (the new frame stays buffered).
    public mutating func receive(_ packet: ACLDataPacket, now: ContinuousClock.Instant = .now) -> Outcome {
        expireStale(now: now)
        let handle = packet.connectionHandle
        switch packet.packetBoundary {
        case .firstFlushable, .firstNonFlushable, .complete:
            let replaced = partials.removeValue(forKey: handle) != nil
            guard packet.data.count >= 2 else {
                return .dropped(.startFragmentTooShort(connectionHandle: handle))
            }
            let declared = Int(packet.data[0]) | Int(packet.data[1]) << 8
            guard declared <= limits.maximumFrameLength else {
                return .dropped(.declaredLengthTooLong(connectionHandle: handle, length: declared))
            }
            let outcome = accept(
                PartialFrame(expectedTotal: declared + L2CAPBasicFrame.headerLength, bytes: packet.data, started: now),
                handle: handle)
            if replaced, outcome == .needMore { return .dropped(.replacedByNewStart(connectionHandle: handle)) }
            return outcome
        case .continuing:
            guard var partial = partials.removeValue(forKey: handle) else {
                return .dropped(.continuationWithoutStart(connectionHandle: handle))
            }
            partial.bytes.append(contentsOf: packet.data)
            return accept(partial, handle: handle)
        }
    }

    /// Drops frames older than the timeout; returns their connection handles.
    @discardableResult
    public mutating func expireStale(now: ContinuousClock.Instant = .now) -> [UInt16] {
        let stale = partials.filter { now - $0.value.started > limits.timeout }.map(\.key)
        for handle in stale { partials[handle] = nil }
        return stale
    }

    /// Forgets the frame in progress on a connection that closed.
    public mutating func discard(connectionHandle: UInt16) { partials[connectionHandle] = nil }

    private mutating func accept(_ partial: PartialFrame, handle: UInt16) -> Outcome {
        if partial.bytes.count > partial.expectedTotal { return .dropped(.overrun(connectionHandle: handle)) }
        guard partial.bytes.count == partial.expectedTotal else {
            partials[handle] = partial
            return .needMore
        }
        // Length and bounds were checked above, so decoding cannot fail; a failure would still only drop the frame.
        guard let frame = try? L2CAPBasicFrame(decoding: partial.bytes) else { return .dropped(.overrun(connectionHandle: handle)) }
        return .frame(connectionHandle: handle, frame)
    }
}
