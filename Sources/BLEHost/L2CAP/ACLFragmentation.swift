/// Cuts an encoded L2CAP frame into ACL packets that fit the controller's buffers: the first marked as the
/// start of a non-flushable frame (PB 0b00, as LE requires from the host), the rest as continuations (PB 0b01).
public enum ACLFragmentation {
    public static func fragments(of frame: [UInt8], connectionHandle: UInt16, maximumPacketLength: Int) -> [ACLDataPacket] {
        let chunkLength = max(1, maximumPacketLength)
        guard !frame.isEmpty else {
            return [ACLDataPacket(connectionHandle: connectionHandle, packetBoundary: .firstNonFlushable, data: [])]
        }
        return stride(from: 0, to: frame.count, by: chunkLength).map { start in
            ACLDataPacket(
                connectionHandle: connectionHandle,
                packetBoundary: start == 0 ? .firstNonFlushable : .continuing,
                data: Array(frame[start..<min(start + chunkLength, frame.count)]))
        }
    }
}
