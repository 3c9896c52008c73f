import Testing
import TestTiers
@testable import BLEHost
import BLEHostTestSupport

@Suite(.tags(.unit)) struct HostControllerInterfaceTests {
    func complete(_ opcode: HCIOpcode, credits: UInt8 = 1, _ returnParameters: [UInt8] = [0]) -> [UInt8] {
        [0x04] + CommandCompleteEvent(numHCICommandPackets: credits, opcode: opcode, returnParameters: returnParameters).encode()
    }

    @Test func initSequenceAgainstBumbleAnswers() async throws {
        let transport = FakeTransport(responder: FakeTransport.bumbleLike())
        let hci = HostControllerInterface(transport: transport)
        let info = try await hci.initialize()
        #expect(info.version.hciVersion == 0x09)
        #expect(info.publicAddress.description == "F0:00:00:00:00:01")
        #expect(info.aclBuffers == ACLBufferSize(packetLength: 27, packetCount: 64))
        #expect(info.leFeatures == 0x0001_49FF)
        #expect(info.supportedCommands.count == 64)
        #expect(transport.sentCommands == [
            Reset.opcode, ReadLocalVersionInformation.opcode, ReadLocalSupportedCommands.opcode,
            ReadLocalSupportedFeatures.opcode, ReadBDADDR.opcode, SetEventMask.opcode, LESetEventMask.opcode,
            LEReadBufferSize.opcode, LEReadLocalSupportedFeatures.opcode,
        ])
        #expect(await hci.availableACLCredits == 64)
        await hci.close()
    }

    @Test func fallsBackToSharedBuffersWhenLEBuffersAreZero() async throws {
        let transport = FakeTransport(responder: FakeTransport.bumbleLike(leBufferComplete: hex("04 0e 07 01 02 20 00 00 00 00")))
        let hci = HostControllerInterface(transport: transport)
        let info = try await hci.initialize()
        #expect(transport.sentCommands.contains(ReadBufferSize.opcode))
        #expect(info.aclBuffers == ACLBufferSize(packetLength: 27, packetCount: 64))
        await hci.close()
    }

    @Test func commandWaitsForNumHCICommandPackets() async throws {
        let transport = FakeTransport()
        let hci = HostControllerInterface(transport: transport)
        let first = Task { try await hci.send(LESetScanEnable(true)) }
        #expect(await eventually { transport.sentCommands.count == 1 })
        let second = Task { try await hci.send(LESetAdvertisingEnable(true)) }
        #expect(await eventually { await hci.commandsWaitingForCredit == 1 }, "the second command must wait for a credit")
        #expect(transport.sentCommands == [LESetScanEnable.opcode], "the second command must wait for a credit")

        // The controller completes the first command but grants no further credit (busy): the
        // event that ended the first command is the one that would have released the second.
        transport.inject(complete(LESetScanEnable.opcode, credits: 0))
        _ = try await first.value
        #expect(await hci.commandsWaitingForCredit == 1, "a Command Complete with no credit released a command")
        #expect(transport.sentCommands.count == 1)

        // A credit-only Command Complete (opcode 0x0000) releases the waiting command.
        transport.inject(complete(HCIOpcode(rawValue: 0), credits: 1, []))
        #expect(await eventually { transport.sentCommands.count == 2 })
        transport.inject(complete(LESetAdvertisingEnable.opcode, credits: 1))
        _ = try await second.value
        await hci.close()
    }

    @Test func severalCreditsAllowSeveralCommandsInFlight() async throws {
        let transport = FakeTransport()
        let hci = HostControllerInterface(transport: transport)
        let first = Task { try await hci.send(Reset()) }
        #expect(await eventually { transport.sentCommands.count == 1 })
        transport.inject(complete(Reset.opcode, credits: 3))
        _ = try await first.value
        let tasks = [
            Task { try await hci.send(LESetScanEnable(false)) },
            Task { try await hci.send(LESetAdvertisingEnable(false)) },
            Task { try await hci.send(LECreateConnectionCancel()) },
        ]
        #expect(await eventually { transport.sentCommands.count == 4 })
        transport.inject(complete(LECreateConnectionCancel.opcode, credits: 3))
        transport.inject(complete(LESetAdvertisingEnable.opcode, credits: 3))
        transport.inject(complete(LESetScanEnable.opcode, credits: 3))
        for task in tasks { _ = try await task.value }
        await hci.close()
    }

    @Test func unansweredCommandTimesOutWithTypedErrorAndFreesTheCredit() async throws {
        let transport = FakeTransport()
        var configuration = HostControllerInterface.Configuration()
        configuration.commandTimeout = .milliseconds(150)
        let hci = HostControllerInterface(transport: transport, configuration: configuration)
        let start = ContinuousClock.now
        do {
            _ = try await hci.send(ReadRSSI(connectionHandle: 1))
            Issue.record("no timeout")
        } catch {
            #expect(error == .commandTimedOut(opcode: ReadRSSI.opcode, after: .milliseconds(150)))
        }
        #expect(ContinuousClock.now - start >= .milliseconds(150))
        // The next command is not blocked by the lost credit.
        transport.setResponder(FakeTransport.bumbleLike())
        try await hci.send(Reset())
        await hci.close()
    }

    @Test func failedStatusIsTypedAndNamed() async throws {
        let transport = FakeTransport(responder: FakeTransport.bumbleLike())
        let hci = HostControllerInterface(transport: transport)
        do {
            _ = try await hci.send(ReadRSSI(connectionHandle: 1))
            Issue.record("no error")
        } catch {
            #expect(error == .commandFailed(opcode: ReadRSSI.opcode, status: .unknownCommand))
            #expect(error.description.contains("Unknown HCI Command (0x01)"))
        }

        transport.setResponder { packet in
            guard let opcode = FakeTransport.opcode(of: packet) else { return [] }
            return [[0x04] + CommandStatusEvent(status: .unknownConnectionIdentifier, numHCICommandPackets: 1, opcode: opcode).encode()]
        }
        do {
            try await hci.send(Disconnect(connectionHandle: 9))
            Issue.record("no error")
        } catch {
            #expect(error.status == .unknownConnectionIdentifier)
            #expect(error.description == "HCI command 0x0406 failed: Unknown Connection Identifier (0x02)")
        }
        await hci.close()
    }

    @Test func commandStatusCommandsReturnOnAcceptance() async throws {
        let transport = FakeTransport(responder: FakeTransport.bumbleLike())
        let hci = HostControllerInterface(transport: transport)
        try await hci.send(LECreateConnection(peerAddressType: .random, peerAddress: BluetoothAddress(string: "C0:00:00:00:00:DD")!))
        #expect(transport.sent.last?.h4Encoded == Reference.leCreateConnectionCommand)
        await hci.close()
    }

    @Test func malformedReturnParametersAreTyped() async {
        let transport = FakeTransport { packet in
            [[0x04] + CommandCompleteEvent(numHCICommandPackets: 1, opcode: FakeTransport.opcode(of: packet)!, returnParameters: [0, 1]).encode()]
        }
        let hci = HostControllerInterface(transport: transport)
        await #expect(throws: HCIError.malformedReturnParameters(
            opcode: ReadBDADDR.opcode, .truncated(field: "BD_ADDR", needed: 6, available: 1))) {
            try await hci.send(ReadBDADDR())
        }
        await hci.close()
    }

    @Test func eventsReachSubscribersButCommandEventsDoNot() async throws {
        let transport = FakeTransport(responder: FakeTransport.bumbleLike())
        let hci = HostControllerInterface(transport: transport)
        let events = await hci.events()
        try await hci.send(Reset())
        transport.inject(Reference.numberOfCompletedPackets)
        transport.inject(Reference.legacyAdvertisingReport)
        transport.inject(hex("04 ff 01 00"))
        transport.inject(Reference.centralConnectionComplete)
        var received: [HCIEvent] = []
        for await event in events {
            received.append(event)
            if received.count == 3 { break }
        }
        guard case .leMeta(.advertisingReport) = received[0], case .unknown(code: 0xFF, _) = received[1],
              case .leMeta(.connectionComplete) = received[2] else {
            Issue.record("unexpected events \(received)")
            return
        }
        await hci.close()
    }

    @Test func aclWaitsForCreditsAndNumberOfCompletedPacketsReturnsThem() async throws {
        let transport = FakeTransport()
        let hci = HostControllerInterface(transport: transport)
        await hci.configureACLBuffers(ACLBufferSize(packetLength: 27, packetCount: 2))
        let fragments = (0..<3).map { ACLDataPacket(connectionHandle: 1, packetBoundary: $0 == 0 ? .firstNonFlushable : .continuing, data: [UInt8($0)]) }
        let sending = Task { try await hci.sendACL(fragments) }
        #expect(await eventually { await hci.queuedACLPackets == 1 }, "the third fragment must wait for a completed packet")
        #expect(transport.sentACL.count == 2, "the third fragment must wait for a completed packet")
        #expect(await hci.availableACLCredits == 0)

        transport.inject(Reference.numberOfCompletedPackets)  // handle 1, 1 packet
        try await sending.value
        #expect(transport.sentACL == fragments)

        // Completion reports for packets never sent do not create credits.
        transport.inject([0x04] + NumberOfCompletedPacketsEvent(entries: [.init(connectionHandle: 1, completedPackets: 9)]).encode())
        #expect(await eventually { await hci.availableACLCredits == 2 })
        await hci.close()
    }

    @Test func disconnectionReturnsCreditsAndFailsQueuedData() async throws {
        let transport = FakeTransport()
        let hci = HostControllerInterface(transport: transport)
        await hci.configureACLBuffers(ACLBufferSize(packetLength: 27, packetCount: 1))
        try await hci.sendACL([ACLDataPacket(connectionHandle: 1, packetBoundary: .firstNonFlushable, data: [1])])
        let queued = Task {
            try await hci.sendACL([ACLDataPacket(connectionHandle: 1, packetBoundary: .firstNonFlushable, data: [2])])
        }
        #expect(await eventually { await hci.queuedACLPackets == 1 }, "the second packet did not wait for the credit")
        #expect(await hci.availableACLCredits == 0)
        transport.inject(Reference.disconnectionComplete)
        await #expect(throws: HCIError.connectionClosed(handle: 1)) { try await queued.value }
        #expect(await eventually { await hci.availableACLCredits == 1 })
        // Data for another connection flows again.
        try await hci.sendACL([ACLDataPacket(connectionHandle: 2, packetBoundary: .firstNonFlushable, data: [3])])
        await hci.close()
    }

    @Test func aclBeforeInitializationThrows() async {
        let hci = HostControllerInterface(transport: FakeTransport())
        await #expect(throws: HCIError.aclBuffersUnknown) {
            try await hci.sendACL([ACLDataPacket(connectionHandle: 1, packetBoundary: .firstNonFlushable, data: [1])])
        }
        await hci.close()
    }

    @Test func transportDropFailsPendingCommandsWithTypedError() async throws {
        let transport = FakeTransport()
        let hci = HostControllerInterface(transport: transport)
        let events = await hci.events()
        let pending = Task { try await hci.send(Reset()) }
        #expect(await eventually { transport.sentCommands.count == 1 })
        transport.dropConnection()
        await #expect(throws: HCIError.transport(.disconnected(reason: "test drop"))) { try await pending.value }
        for await _ in events {}  // finishes
        #expect(await hci.failure == .disconnected(reason: "test drop"))
        await #expect(throws: HCIError.transport(.disconnected(reason: "test drop"))) { try await hci.send(Reset()) }
    }

    /// A connection's start and end travel in the same ordered stream as ACL data, so the layer
    /// above can tell data of a closed connection from data of the next one on the same handle.
    @Test func connectionEndsAreOrderedWithACLData() async throws {
        let transport = FakeTransport(responder: FakeTransport.bumbleLike())
        let hci = HostControllerInterface(transport: transport)
        _ = try await hci.initialize()
        transport.inject(Reference.peripheralConnectionComplete)
        transport.inject(Reference.attReadResponseFromController)
        transport.inject(Reference.disconnectionComplete)
        transport.inject(Reference.attMTURequestFromController)
        var iterator = hci.incomingACL.makeAsyncIterator()
        var kinds: [String] = []
        for _ in 0..<4 {
            switch await iterator.next() {
            case .data(let packet)?: kinds.append("data \(packet.connectionHandle)")
            case .connectionComplete(let event)?: kinds.append("opened \(event.connectionHandle)")
            case .connectionClosed(let handle, _)?: kinds.append("closed \(handle)")
            case nil: kinds.append("end")
            }
        }
        #expect(kinds == ["opened 1", "data 1", "closed 1", "data 1"])
        await hci.close()
    }
}
