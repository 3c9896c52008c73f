import Testing
import TestTiers
@testable import BLEHost
import BLEHostTestSupport

@Suite(.tags(.unit)) struct L2CAPLayerTests {
    func makeStack() async throws -> (FakeTransport, HostControllerInterface, L2CAPLayer) {
        let transport = FakeTransport(responder: FakeTransport.bumbleLike())
        let hci = HostControllerInterface(transport: transport)
        _ = try await hci.initialize()
        let layer = await L2CAPLayer(hci: hci)
        return (transport, hci, layer)
    }

    func aclFromController(cid: UInt16, payload: [UInt8], handle: UInt16 = 1) throws -> [UInt8] {
        let frame = try L2CAPBasicFrame(channelID: cid, payload: payload).encode()
        return ACLDataPacket(connectionHandle: handle, packetBoundary: .firstFlushable, data: frame).packet.h4Encoded
    }

    @Test func attPayloadsReachTheChannelAndRepliesGoOutAsReferenceBytes() async throws {
        let (transport, hci, layer) = try await makeStack()
        let channel = await layer.attChannel(connectionHandle: 1)
        transport.inject(Reference.attMTURequestFromController)
        var iterator = channel.incoming.makeAsyncIterator()
        #expect(await iterator.next() == hex("02 17 00"))
        try await channel.send(hex("03 17 00"))
        #expect(transport.sent.last?.h4Encoded == Reference.attMTUResponseFromHost)
        await hci.close()
    }

    @Test func attDataArrivingBeforeTheChannelIsRequestedIsKept() async throws {
        let (transport, hci, layer) = try await makeStack()
        transport.inject(Reference.attReadResponseFromController)
        // The frame is in before anyone asks for the channel: receiving it made the channel.
        #expect(await eventually { await layer.attChannelHandles == [1] })
        var iterator = await layer.attChannel(connectionHandle: 1).incoming.makeAsyncIterator()
        #expect(await iterator.next() == hex("0b c1 c2 c3 c4 c5 c6 c7 c8"))
        await hci.close()
    }

    @Test func largePayloadIsFragmentedToTheControllerBuffers() async throws {
        let (transport, hci, layer) = try await makeStack()
        let channel = await layer.attChannel(connectionHandle: 1)
        let payload = [0x1B] + (0..<99).map { UInt8($0) }
        try await channel.send(payload)
        let fragments = transport.sentACL
        #expect(fragments.map(\.data.count) == [27, 27, 27, 23])
        #expect(fragments.map(\.packetBoundary) == [.firstNonFlushable, .continuing, .continuing, .continuing])
        #expect(fragments.flatMap(\.data) == [100, 0, 4, 0] + payload)
        await hci.close()
    }

    @Test func fragmentedIncomingFrameIsReassembled() async throws {
        let (transport, hci, layer) = try await makeStack()
        let channel = await layer.attChannel(connectionHandle: 1)
        let payload = (0..<60).map { UInt8($0) }
        let frame = try L2CAPBasicFrame(channelID: 4, payload: payload).encode()
        for (index, packet) in ACLFragmentation.fragments(of: frame, connectionHandle: 1, maximumPacketLength: 27).enumerated() {
            let incoming = ACLDataPacket(connectionHandle: 1, packetBoundary: index == 0 ? .firstFlushable : .continuing, data: packet.data)
            transport.inject(incoming.packet.h4Encoded)
        }
        var iterator = channel.incoming.makeAsyncIterator()
        #expect(await iterator.next() == payload)
        await hci.close()
    }

    @Test func connectionParameterUpdateIsAccepted() async throws {
        let (transport, hci, layer) = try await makeStack()
        transport.inject(try aclFromController(cid: 5, payload: hex("12 07 08 00 18 00 28 00 00 00 2a 00")))
        #expect(await eventually { !transport.sentACL.isEmpty })
        #expect(transport.sentACL.first?.data == hex("06 00 05 00 13 07 02 00 00 00"))
        await hci.close()
        withExtendedLifetime(layer) {}  // the layer answers only while someone holds it
    }

    @Test func unknownSignalingIsRejectedAndPairingRefused() async throws {
        let (transport, hci, layer) = try await makeStack()
        transport.inject(try aclFromController(cid: 5, payload: hex("14 03 0a 00 80 00 40 00 f7 00 05 00 0a 00")))
        transport.inject(try aclFromController(cid: 6, payload: hex("01 03 00 0d 10 07 07")))
        #expect(await eventually { transport.sentACL.count == 2 })
        #expect(transport.sentACL.map(\.data) == [hex("06 00 05 00 01 03 02 00 00 00"), hex("02 00 06 00 05 05")])
        await hci.close()
        withExtendedLifetime(layer) {}
    }

    @Test func unknownChannelsAndOversizedFramesAreDropped() async throws {
        let (transport, hci, layer) = try await makeStack()
        let channel = await layer.attChannel(connectionHandle: 1)
        transport.inject(try aclFromController(cid: 0x0040, payload: [1, 2, 3]))
        transport.inject(ACLDataPacket(connectionHandle: 1, packetBoundary: .firstFlushable, data: hex("ff 7f 04 00 01")).packet.h4Encoded)
        transport.inject(ACLDataPacket(connectionHandle: 1, packetBoundary: .continuing, data: [UInt8](repeating: 2, count: 27)).packet.h4Encoded)
        transport.inject(Reference.attMTURequestFromController)
        var iterator = channel.incoming.makeAsyncIterator()
        #expect(await iterator.next() == hex("02 17 00"))
        #expect(transport.sentACL.isEmpty)
        await hci.close()
    }

    @Test func disconnectionFinishesTheChannelAndStopsItsSends() async throws {
        let (transport, hci, layer) = try await makeStack()
        let channel = await layer.attChannel(connectionHandle: 1)
        transport.inject(Reference.disconnectionComplete)
        for await _ in channel.incoming {}
        await #expect(throws: L2CAPError.channelClosed(connectionHandle: 1, channelID: 4)) { try await channel.send([0x0a, 0x01, 0x00]) }
        // A new connection reusing the handle gets a fresh channel.
        let reused = await layer.attChannel(connectionHandle: 1)
        #expect(reused !== channel)
        await hci.close()
    }

    /// A controller reuses a closed connection's handle at once (a flood of short connections
    /// does it all the time): the next connection's first request must reach that connection's
    /// channel, not die with the closed one's. (When the close came from a second stream, this
    /// lost requests only under scheduling pressure, as in HostilePeerTests' flood on a loaded
    /// machine; here it checks the ordered path end to end.)
    @Test func dataOfTheNextConnectionOnAReusedHandleIsKeptForIt() async throws {
        let (transport, hci, layer) = try await makeStack()
        for round in 0..<20 {
            let closing = await layer.attChannel(connectionHandle: 1)
            transport.inject(Reference.disconnectionComplete)
            transport.inject(Reference.attMTURequestFromController)
            for await _ in closing.incoming {}
            let next = await layer.attChannel(connectionHandle: 1)
            #expect(next !== closing)
            let received = await withTaskGroup(of: [UInt8]?.self) { group in
                group.addTask {
                    var iterator = next.incoming.makeAsyncIterator()
                    return await iterator.next()
                }
                group.addTask {
                    try? await Task.sleep(for: .seconds(2))
                    return nil
                }
                let first = await group.next() ?? nil
                group.cancelAll()
                return first
            }
            #expect(received == hex("02 17 00"), "round \(round): the request went to the closed connection")
        }
        await hci.close()
    }
}
