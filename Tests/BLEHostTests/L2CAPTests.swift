import Testing
import TestTiers
@testable import BLEHost
import BLEHostTestSupport

@Suite(.tags(.unit)) struct ACLFragmentationTests {
    @Test func shortFrameIsOneFirstFragment() throws {
        let frame = try L2CAPBasicFrame(channelID: 4, payload: hex("03 17 00")).encode()
        let packets = ACLFragmentation.fragments(of: frame, connectionHandle: 1, maximumPacketLength: 27)
        #expect(packets.map(\.packet.h4Encoded) == [Reference.attMTUResponseFromHost])
    }

    @Test func exactlyOneBufferIsOneFragment() throws {
        let frame = try L2CAPBasicFrame(channelID: 4, payload: Array(Reference.attReadByTypeResponseFromHost[9...])).encode()
        #expect(frame.count == 27)
        let packets = ACLFragmentation.fragments(of: frame, connectionHandle: 1, maximumPacketLength: 27)
        #expect(packets.map(\.packet.h4Encoded) == [Reference.attReadByTypeResponseFromHost])
    }

    @Test func longFrameSplitsToTwentySevenByteBuffers() throws {
        let payload = (0..<100).map { UInt8($0) }
        let frame = try L2CAPBasicFrame(channelID: 4, payload: payload).encode()
        let packets = ACLFragmentation.fragments(of: frame, connectionHandle: 0x0042, maximumPacketLength: 27)
        #expect(packets.map(\.data.count) == [27, 27, 27, 23])
        #expect(packets.map(\.packetBoundary) == [.firstNonFlushable, .continuing, .continuing, .continuing])
        #expect(packets.allSatisfy { $0.connectionHandle == 0x0042 })
        #expect(packets.flatMap(\.data) == frame)
        #expect(packets[1].encode().prefix(2) == [0x42, 0x10])  // PB 0b01 in bits 12-13

        var reassembler = ACLReassembler()
        let outcomes = packets.map { reassembler.receive($0) }
        #expect(outcomes.last == .frame(connectionHandle: 0x0042, L2CAPBasicFrame(channelID: 4, payload: payload)))
    }

    @Test func tooLongPayloadThrows() {
        #expect(throws: L2CAPError.payloadTooLong(length: 70_000, limit: 65_535)) {
            try L2CAPBasicFrame(channelID: 4, payload: [UInt8](repeating: 0, count: 70_000)).encode()
        }
    }
}

@Suite(.tags(.unit)) struct ACLReassemblerTests {
    func packet(_ handle: UInt16, _ boundary: ACLPacketBoundary, _ data: [UInt8]) -> ACLDataPacket {
        ACLDataPacket(connectionHandle: handle, packetBoundary: boundary, data: data)
    }

    @Test func completeFrameInOneStartFragment() throws {
        var reassembler = ACLReassembler()
        let incoming = try ACLDataPacket(decoding: Array(Reference.attFindByTypeValueRequest.dropFirst()))
        guard case .frame(let handle, let frame) = reassembler.receive(incoming) else {
            Issue.record("no frame")
            return
        }
        #expect(handle == 1)
        #expect(frame.channelID == L2CAPChannelIdentifier.attribute)
        #expect(frame.payload == Array(Reference.attFindByTypeValueRequest[9...]))
    }

    @Test func oversizedDeclaredLengthIsDiscardedWithoutBuffering() {
        var reassembler = ACLReassembler(limits: .init(maximumFrameLength: 1024))
        // Declares 0xFFFF bytes.
        #expect(reassembler.receive(packet(1, .firstFlushable, hex("ff ff 04 00 01 02 03")))
            == .dropped(.declaredLengthTooLong(connectionHandle: 1, length: 0xFFFF)))
        #expect(reassembler.bufferedByteCount == 0)
        // Its continuations are dropped too.
        #expect(reassembler.receive(packet(1, .continuing, [UInt8](repeating: 0, count: 27)))
            == .dropped(.continuationWithoutStart(connectionHandle: 1)))
        // Exactly at the cap is accepted.
        #expect(reassembler.receive(packet(1, .firstFlushable, hex("00 04 04 00"))) == .needMore)
    }

    @Test func unfinishedFrameIsReplacedByNewStart() {
        var reassembler = ACLReassembler()
        #expect(reassembler.receive(packet(1, .firstFlushable, hex("0a 00 04 00 01 02"))) == .needMore)
        #expect(reassembler.receive(packet(1, .firstFlushable, hex("03 00 04 00 0a")))
            == .dropped(.replacedByNewStart(connectionHandle: 1)))
        #expect(reassembler.receive(packet(1, .continuing, hex("06 00")))
            == .frame(connectionHandle: 1, L2CAPBasicFrame(channelID: 4, payload: hex("0a 06 00"))))
    }

    @Test func unfinishedFrameExpiresAfterTimeout() {
        var reassembler = ACLReassembler(limits: .init(maximumFrameLength: 1024, timeout: .seconds(5)))
        let start = ContinuousClock.now
        #expect(reassembler.receive(packet(1, .firstFlushable, hex("0a 00 04 00 01 02")), now: start) == .needMore)
        #expect(reassembler.expireStale(now: start + .seconds(4)) == [])
        #expect(reassembler.handlesInProgress == [1])
        #expect(reassembler.expireStale(now: start + .seconds(6)) == [1])
        #expect(reassembler.bufferedByteCount == 0)
        #expect(reassembler.receive(packet(1, .continuing, hex("03 04 05 06 07 08 09 0a")), now: start + .seconds(6))
            == .dropped(.continuationWithoutStart(connectionHandle: 1)))
    }

    @Test func staleFramesExpireWhenOtherTrafficArrives() {
        var reassembler = ACLReassembler(limits: .init(maximumFrameLength: 1024, timeout: .seconds(5)))
        let start = ContinuousClock.now
        _ = reassembler.receive(packet(1, .firstFlushable, hex("0a 00 04 00")), now: start)
        _ = reassembler.receive(packet(2, .firstFlushable, hex("01 00 04 00 0a")), now: start + .seconds(10))
        #expect(reassembler.handlesInProgress.isEmpty)
    }

    @Test func interleavedHandlesReassembleIndependently() {
        var reassembler = ACLReassembler()
        #expect(reassembler.receive(packet(1, .firstFlushable, hex("04 00 04 00 aa"))) == .needMore)
        #expect(reassembler.receive(packet(2, .firstFlushable, hex("03 00 04 00 bb"))) == .needMore)
        #expect(reassembler.receive(packet(1, .continuing, hex("ab"))) == .needMore)
        #expect(reassembler.receive(packet(2, .continuing, hex("bc bd")))
            == .frame(connectionHandle: 2, L2CAPBasicFrame(channelID: 4, payload: hex("bb bc bd"))))
        #expect(reassembler.receive(packet(1, .continuing, hex("ac ad")))
            == .frame(connectionHandle: 1, L2CAPBasicFrame(channelID: 4, payload: hex("aa ab ac ad"))))
    }

    @Test func overrunDropsTheFrame() {
        var reassembler = ACLReassembler()
        #expect(reassembler.receive(packet(1, .firstFlushable, hex("02 00 04 00 01"))) == .needMore)
        #expect(reassembler.receive(packet(1, .continuing, hex("02 03"))) == .dropped(.overrun(connectionHandle: 1)))
        #expect(reassembler.handlesInProgress.isEmpty)
        #expect(reassembler.receive(packet(1, .firstFlushable, hex("01 00 04 00 01 02"))) == .dropped(.overrun(connectionHandle: 1)))
    }

    @Test func tinyStartFragments() {
        var reassembler = ACLReassembler()
        #expect(reassembler.receive(packet(1, .firstFlushable, [0x01])) == .dropped(.startFragmentTooShort(connectionHandle: 1)))
        #expect(reassembler.receive(packet(1, .firstFlushable, hex("01 00"))) == .needMore)
        #expect(reassembler.receive(packet(1, .continuing, hex("04 00 ee")))
            == .frame(connectionHandle: 1, L2CAPBasicFrame(channelID: 4, payload: [0xEE])))
    }

    @Test func discardOnDisconnection() {
        var reassembler = ACLReassembler()
        _ = reassembler.receive(packet(7, .firstFlushable, hex("0a 00 04 00")))
        reassembler.discard(connectionHandle: 7)
        #expect(reassembler.bufferedByteCount == 0)
    }
}

@Suite(.tags(.unit)) struct FixedChannelResponderTests {
    @Test func acceptsConnectionParameterUpdate() throws {
        let request = LESignalingCommand(
            code: 0x12, identifier: 0x07,
            data: ConnectionParameterUpdateRequest(intervalMin: 0x18, intervalMax: 0x28, latency: 0, timeout: 0x2A).encode())
        #expect(request.encode() == hex("12 07 08 00 18 00 28 00 00 00 2a 00"))
        let reply = try #require(LESignalingResponder.reply(to: request.encode()))
        #expect(reply.encode() == hex("13 07 02 00 00 00"))
        #expect(try ConnectionParameterUpdateResponse(decoding: reply.data).result == ConnectionParameterUpdateResponse.accepted)
        #expect(try LESignalingCommand(decoding: reply.encode()) == reply)
    }

    @Test func rejectsUnknownRequestsAsNotUnderstood() throws {
        // LE Credit Based Connection Request: this host offers no dynamic channels.
        let request = hex("14 03 0a 00 80 00 40 00 f7 00 05 00 0a 00")
        let reply = try #require(LESignalingResponder.reply(to: request))
        #expect(reply.encode() == hex("01 03 02 00 00 00"))
        #expect(try CommandReject(decoding: reply.data) == CommandReject(reason: CommandReject.commandNotUnderstood))
        // A malformed parameter update is rejected too.
        #expect(LESignalingResponder.reply(to: hex("12 04 02 00 18 00"))?.code == LESignalingCommand.commandRejectCode)
        // Length field disagreeing with the frame.
        #expect(LESignalingResponder.reply(to: hex("12 05 08 00 18 00"))?.code == LESignalingCommand.commandRejectCode)
    }

    @Test func neverAnswersResponsesOrGarbage() {
        #expect(LESignalingResponder.reply(to: hex("01 03 02 00 00 00")) == nil)  // Command Reject
        #expect(LESignalingResponder.reply(to: hex("13 07 02 00 00 00")) == nil)  // Parameter update response
        #expect(LESignalingResponder.reply(to: hex("16 01 04 00 40 00 01 00")) == nil)  // Credit indication
        #expect(LESignalingResponder.reply(to: hex("14 00 00 00")) == nil)  // identifier 0
        #expect(LESignalingResponder.reply(to: hex("14 01")) == nil)
        #expect(LESignalingResponder.reply(to: []) == nil)
    }

    @Test func refusesPairing() throws {
        let request = SecurityManagerPDU.pairingRequest(.init(
            ioCapability: 0x03, oobDataFlag: 0, authenticationRequirements: 0x0D, maximumEncryptionKeySize: 16,
            initiatorKeyDistribution: 0x07, responderKeyDistribution: 0x07))
        #expect(request.encode() == hex("01 03 00 0d 10 07 07"))
        #expect(try SecurityManagerPDU(decoding: request.encode()) == request)
        let reply = try #require(SecurityManagerResponder.reply(to: request.encode()))
        #expect(reply.encode() == hex("05 05"))
        #expect(SecurityManagerResponder.reply(to: hex("0b 0d"))?.encode() == hex("05 05"))
        #expect(SecurityManagerResponder.reply(to: hex("05 05")) == nil)
        #expect(SecurityManagerResponder.reply(to: hex("01 03")) == nil)  // truncated request
        #expect(SecurityManagerResponder.reply(to: []) == nil)
        #expect(try SecurityManagerPDU(decoding: hex("0c 01 02")) == .other(code: 0x0C, data: [1, 2]))
    }
}
