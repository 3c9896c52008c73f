import BLEHost
import Synchronization

/// An in-memory controller stand-in: records what the host sends and answers through a scripted responder.
package final class FakeTransport: HCITransport {
    package typealias Responder = @Sendable (HCIPacket) -> [[UInt8]]

    package let incoming: AsyncThrowingStream<HCIPacket, any Error>
    private let continuation: AsyncThrowingStream<HCIPacket, any Error>.Continuation
    private let state: Mutex<State>

    private struct State {
        package var sent: [HCIPacket] = []
        var responder: Responder?
        var isClosed = false
    }

    package init(responder: Responder? = nil) {
        (incoming, continuation) = AsyncThrowingStream.makeStream(of: HCIPacket.self, throwing: (any Error).self)
        state = Mutex(State(responder: responder))
    }

    package func send(_ packet: HCIPacket) async throws(HCITransportError) {
        let responder: Responder? = try state.withLock { (state: inout State) throws(HCITransportError) -> Responder? in
            if state.isClosed { throw .closed }
            state.sent.append(packet)
            return state.responder
        }
        for reply in responder?(packet) ?? [] { inject(reply) }
    }

    package func close() async {
        state.withLock { $0.isClosed = true }
        continuation.finish()
    }

    /// Delivers an H4 packet (with indicator byte) as if the controller sent it.
    package func inject(_ h4: [UInt8]) {
        guard let first = h4.first, let type = HCIPacketType(rawValue: first) else { return }
        continuation.yield(HCIPacket(type: type, body: Array(h4.dropFirst())))
    }

    package func dropConnection() {
        state.withLock { $0.isClosed = true }
        continuation.finish(throwing: HCITransportError.disconnected(reason: "test drop"))
    }

    package func setResponder(_ responder: Responder?) { state.withLock { $0.responder = responder } }

    package var sent: [HCIPacket] { state.withLock { $0.sent } }
    package var sentCommands: [HCIOpcode] {
        sent.filter { $0.type == .command && $0.body.count >= 2 }.map { HCIOpcode(rawValue: UInt16($0.body[0]) | UInt16($0.body[1]) << 8) }
    }
    package var sentACL: [ACLDataPacket] { sent.filter { $0.type == .aclData }.compactMap { try? ACLDataPacket(decoding: $0.body) } }
}

extension FakeTransport {
    package static func opcode(of packet: HCIPacket) -> HCIOpcode? {
        guard packet.type == .command, packet.body.count >= 2 else { return nil }
        return HCIOpcode(rawValue: UInt16(packet.body[0]) | UInt16(packet.body[1]) << 8)
    }

    /// Answers like the Bumble controller of h4-reference.txt, with the given LE buffer answer.
    package static func bumbleLike(leBufferComplete: [UInt8] = Reference.leReadBufferSizeComplete) -> Responder {
        { packet in
            guard let opcode = opcode(of: packet) else { return [] }
            switch opcode {
            case Reset.opcode: return [Reference.resetComplete]
            case ReadLocalVersionInformation.opcode: return [Reference.readLocalVersionComplete]
            case ReadLocalSupportedCommands.opcode: return [Reference.readLocalCommandsComplete]
            case ReadLocalSupportedFeatures.opcode: return [Reference.readLocalFeaturesComplete]
            case ReadBDADDR.opcode: return [Reference.readBDADDRComplete]
            case LEReadBufferSize.opcode: return [leBufferComplete]
            case ReadBufferSize.opcode: return [Reference.readBufferSizeComplete]
            case LEReadLocalSupportedFeatures.opcode: return [Reference.leReadFeaturesComplete]
            case ReadRSSI.opcode: return [Reference.readRSSIUnsupported]
            case LECreateConnection.opcode, Disconnect.opcode, LEReadRemoteFeatures.opcode:
                return [[0x04] + CommandStatusEvent(status: .success, numHCICommandPackets: 1, opcode: opcode).encode()]
            default:
                return [[0x04] + CommandCompleteEvent(numHCICommandPackets: 1, opcode: opcode, returnParameters: [0]).encode()]
            }
        }
    }
}
