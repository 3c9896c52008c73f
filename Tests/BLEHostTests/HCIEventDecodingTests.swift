import Testing
import TestTiers
@testable import BLEHost
import BLEHostTestSupport

/// Events decode to the field values Bumble's own decoder printed for the same bytes (h4-reference.txt).
@Suite(.tags(.unit)) struct HCIEventDecodingTests {
    func event(_ h4: [UInt8]) throws -> HCIEvent {
        #expect(h4.first == HCIPacketType.event.rawValue)
        return try HCIEvent(decoding: Array(h4.dropFirst()))
    }

    func returnParameters<Command: HCICommandWithReturnParameters>(
        _ h4: [UInt8], of command: Command.Type
    ) throws -> Command.ReturnParameters {
        guard case .commandComplete(let complete) = try event(h4) else { throw PacketDecodingError.invalidValue(field: "event", value: 0) }
        #expect(complete.opcode == Command.opcode)
        #expect(complete.returnParameters.first == 0)
        return try Command.ReturnParameters(decoding: Array(complete.returnParameters.dropFirst()))
    }

    @Test func commandCompleteRoundTrips() throws {
        guard case .commandComplete(let complete) = try event(Reference.resetComplete) else {
            Issue.record("not a Command Complete")
            return
        }
        #expect(complete == CommandCompleteEvent(numHCICommandPackets: 1, opcode: Reset.opcode, returnParameters: [0]))
        #expect([0x04] + complete.encode() == Reference.resetComplete)
    }

    @Test func initSequenceReturnParameters() throws {
        let version = try returnParameters(Reference.readLocalVersionComplete, of: ReadLocalVersionInformation.self)
        #expect(version.hciVersion == 0x09)
        #expect(version.hciSubversion == 0)
        #expect(version.lmpVersion == 0x09)
        #expect(version.companyIdentifier == 0xFFFF)
        #expect(version.lmpSubversion == 0)

        let commands = try returnParameters(Reference.readLocalCommandsComplete, of: ReadLocalSupportedCommands.self)
        #expect(commands.supportedCommands.count == 64)
        #expect(commands.supportedCommands.prefix(4) == [0x20, 0x00, 0x80, 0x03])
        #expect(commands.isSupported(octet: 0, bit: 5))   // Disconnect
        #expect(!commands.isSupported(octet: 64, bit: 0))

        let features = try returnParameters(Reference.readLocalFeaturesComplete, of: ReadLocalSupportedFeatures.self)
        #expect(features.lmpFeatures == 0x8000_0060_0000_0000)

        let address = try returnParameters(Reference.readBDADDRComplete, of: ReadBDADDR.self)
        #expect(address.address.description == "F0:00:00:00:00:01")

        let leBuffers = try returnParameters(Reference.leReadBufferSizeComplete, of: LEReadBufferSize.self)
        #expect(leBuffers.leACLDataPacketLength == 27)
        #expect(leBuffers.totalNumLEACLDataPackets == 64)

        let buffers = try returnParameters(Reference.readBufferSizeComplete, of: ReadBufferSize.self)
        #expect(buffers.aclDataPacketLength == 27)
        #expect(buffers.synchronousDataPacketLength == 0)
        #expect(buffers.totalNumACLDataPackets == 64)
        #expect(buffers.totalNumSynchronousDataPackets == 0)

        let leFeatures = try returnParameters(Reference.leReadFeaturesComplete, of: LEReadLocalSupportedFeatures.self)
        #expect(leFeatures.leFeatures == 0x0001_49FF)
        #expect(!leFeatures.supportsExtendedAdvertising)
        #expect(try LEReadLocalSupportedFeatures.ReturnParameters(decoding: hex("ff 79 01 00 00 00 00 00")).supportsExtendedAdvertising)
    }

    @Test func readRSSIReturnParameters() throws {
        let rssi = try ReadRSSI.ReturnParameters(decoding: hex("01 00 c4"))
        #expect(rssi.connectionHandle == 1)
        #expect(rssi.rssi == -60)
        // Bumble answers status 0x01 with nothing else: the status check comes before decoding.
        guard case .commandComplete(let complete) = try event(Reference.readRSSIUnsupported) else { return }
        #expect(complete.returnParameters == [0x01])
    }

    @Test func commandStatusRoundTrips() throws {
        guard case .commandStatus(let status) = try event(Reference.leCreateConnectionStatus) else {
            Issue.record("not a Command Status")
            return
        }
        #expect(status == CommandStatusEvent(status: .success, numHCICommandPackets: 1, opcode: LECreateConnection.opcode))
        #expect([0x04] + status.encode() == Reference.leCreateConnectionStatus)
        guard case .commandStatus(let disconnect) = try event(Reference.disconnectStatus) else { return }
        #expect(disconnect.opcode == Disconnect.opcode)
    }

    @Test func disconnectionCompleteRoundTrips() throws {
        guard case .disconnectionComplete(let disconnection) = try event(Reference.disconnectionComplete) else {
            Issue.record("not a Disconnection Complete")
            return
        }
        #expect(disconnection == DisconnectionCompleteEvent(status: .success, connectionHandle: 1, reason: .remoteUserTerminatedConnection))
        #expect([0x04] + disconnection.encode() == Reference.disconnectionComplete)
    }

    @Test func numberOfCompletedPacketsRoundTrips() throws {
        guard case .numberOfCompletedPackets(let completed) = try event(Reference.numberOfCompletedPackets) else {
            Issue.record("not NOCP")
            return
        }
        #expect(completed.entries == [.init(connectionHandle: 1, completedPackets: 1)])
        #expect([0x04] + completed.encode() == Reference.numberOfCompletedPackets)
        // Two handles: both handles first, then both counts.
        let two = NumberOfCompletedPacketsEvent(entries: [.init(connectionHandle: 1, completedPackets: 2), .init(connectionHandle: 0x40, completedPackets: 3)])
        #expect(two.encode() == hex("13 09 02 01 00 40 00 02 00 03 00"))
        #expect(try HCIEvent(decoding: two.encode()) == .numberOfCompletedPackets(two))
    }

    @Test func hardwareError() throws {
        #expect(try HCIEvent(decoding: hex("10 01 2a")) == .hardwareError(HardwareErrorEvent(hardwareCode: 0x2a)))
    }

    @Test func connectionCompleteBothRoles() throws {
        guard case .leMeta(.connectionComplete(let peripheral)) = try event(Reference.peripheralConnectionComplete) else {
            Issue.record("not LE Connection Complete")
            return
        }
        #expect(peripheral.status == .success)
        #expect(peripheral.connectionHandle == 1)
        #expect(peripheral.role == .peripheral)
        #expect(peripheral.peerAddressType == .random)
        #expect(peripheral.peerAddress.description == "C0:00:00:00:00:EE")
        #expect(peripheral.connectionInterval == 10)
        #expect(peripheral.peripheralLatency == 0)
        #expect(peripheral.supervisionTimeout == 10)
        #expect(peripheral.centralClockAccuracy == 7)
        #expect(peripheral.localResolvablePrivateAddress == nil)

        guard case .leMeta(let meta) = try event(Reference.centralConnectionComplete), let central = meta.connectionComplete else {
            Issue.record("not LE Connection Complete")
            return
        }
        #expect(central.role == .central)
        #expect(central.peerAddress.description == "C0:00:00:00:00:DD")
        #expect(central.connectionInterval == 0x18)
        #expect(central.supervisionTimeout == 400)
    }

    @Test func enhancedConnectionComplete() throws {
        let bytes = hex("3e 1f 0a 00 02 00 01 01 ee 00 00 00 00 c0 11 11 11 11 11 51 22 22 22 22 22 62 18 00 00 00 90 01 05")
        guard case .leMeta(.enhancedConnectionComplete(let event)) = try HCIEvent(decoding: bytes) else {
            Issue.record("not Enhanced Connection Complete")
            return
        }
        #expect(event.connectionHandle == 2)
        #expect(event.role == .peripheral)
        #expect(event.localResolvablePrivateAddress?.description == "51:11:11:11:11:11")
        #expect(event.peerResolvablePrivateAddress?.description == "62:22:22:22:22:22")
        #expect(event.connectionInterval == 0x18)
        #expect(event.centralClockAccuracy == 5)
    }

    @Test func legacyAdvertisingReports() throws {
        guard case .leMeta(.advertisingReport(let report)) = try event(Reference.legacyAdvertisingReport) else {
            Issue.record("not an advertising report")
            return
        }
        #expect(report.reports.count == 1)
        let first = report.reports[0]
        #expect(first.eventType == 0)
        #expect(first.addressType == .random)
        #expect(first.address.description == "C0:00:00:00:00:DD")
        #expect(first.data == Reference.advertisedAD)
        #expect(first.rssi == -50)
        let sighting = first.sighting
        #expect(sighting.isConnectable && !sighting.isScanResponse)
        #expect(sighting.data.serviceUUIDs128 == [BluetoothUUID(string: Reference.advertisedUUID)!])

        guard case .leMeta(let scanResponse) = try event(Reference.legacyScanResponseReport) else { return }
        #expect(scanResponse.sightings.map(\.isScanResponse) == [true])
    }

    @Test func multipleReportsInOneEvent() throws {
        let bytes = hex("3e 1b 02 02 00 01 dd 00 00 00 00 c0 03 02 01 06 ce 03 00 aa 00 00 00 00 f0 02 01 ff c4")
        guard case .leMeta(.advertisingReport(let event)) = try HCIEvent(decoding: bytes) else {
            Issue.record("not an advertising report")
            return
        }
        #expect(event.reports.count == 2)
        #expect(event.reports[1].eventType == 3)
        #expect(event.reports[1].addressType == .public)
        #expect(event.reports[1].address.description == "F0:00:00:00:00:AA")
        #expect(event.reports[1].data == [0x01, 0xff])
        #expect(event.reports[1].rssi == -60)
    }

    @Test func extendedAdvertisingReports() throws {
        guard case .leMeta(.extendedAdvertisingReport(let event)) = try event(Reference.extendedAdvertisingReport) else {
            Issue.record("not an extended advertising report")
            return
        }
        let report = try #require(event.reports.first)
        #expect(report.eventType == 0x0001)
        #expect(report.isConnectable && !report.isScanResponse)
        #expect(report.addressType == .random)
        #expect(report.address.description == "C0:00:00:00:00:DD")
        #expect(report.primaryPHY == 1 && report.secondaryPHY == 1)
        #expect(report.advertisingSID == 0)
        #expect(report.txPower == 0)
        #expect(report.rssi == -50)
        #expect(report.periodicAdvertisingInterval == 0)
        #expect(report.directAddress == .zero)
        #expect(report.dataStatus == 0)
        #expect(report.data == Reference.advertisedAD)

        guard case .leMeta(let response) = try self.event(Reference.extendedScanResponseReport) else { return }
        #expect(response.sightings.map(\.isScanResponse) == [true])
    }

    @Test func connectionUpdateAndRemoteFeatures() throws {
        let update = try HCIEvent(decoding: hex("3e 0a 03 00 01 00 28 00 00 00 f4 01"))
        guard case .leMeta(.connectionUpdateComplete(let event)) = update else {
            Issue.record("not Connection Update Complete")
            return
        }
        #expect(event.connectionHandle == 1 && event.connectionInterval == 0x28 && event.supervisionTimeout == 500)

        let features = try HCIEvent(decoding: hex("3e 0c 04 00 01 00 ff 49 01 00 00 00 00 00"))
        guard case .leMeta(.readRemoteFeaturesComplete(let remote)) = features else {
            Issue.record("not Read Remote Features Complete")
            return
        }
        #expect(remote.leFeatures == 0x0001_49FF)
    }

    /// A connection handle is the low 12 bits of its field (the top four are reserved), in every
    /// event that carries one; the status and reason octets keep their codes.
    @Test func connectionHandlesDropTheReservedTopBits() throws {
        #expect(try HCIEvent(decoding: hex("05 04 0c 42 f0 13"))
                == .disconnectionComplete(DisconnectionCompleteEvent(
                    status: HCIStatusCode(rawValue: 0x0C), connectionHandle: 0x042, reason: .remoteUserTerminatedConnection)))
        #expect(try HCIEvent(decoding: hex("13 05 01 01 30 02 00"))
                == .numberOfCompletedPackets(NumberOfCompletedPacketsEvent(entries: [.init(connectionHandle: 1, completedPackets: 2)])))
        guard case .leMeta(.connectionUpdateComplete(let update)) = try HCIEvent(decoding: hex("3e 0a 03 3b 01 c0 28 00 00 00 f4 01")) else {
            Issue.record("not Connection Update Complete")
            return
        }
        #expect(update.status == HCIStatusCode(rawValue: 0x3B) && update.connectionHandle == 1)
        guard case .leMeta(.readRemoteFeaturesComplete(let remote)) = try HCIEvent(decoding: hex("3e 0c 04 00 ff ff ff 49 01 00 00 00 00 00")) else {
            Issue.record("not Read Remote Features Complete")
            return
        }
        #expect(remote.connectionHandle == 0x0FFF && remote.leFeatures == 0x0001_49FF)
        #expect(try ReadRSSI.ReturnParameters(decoding: [0x05, 0x20, 0xC4]).connectionHandle == 0x005)
    }

    @Test func unknownEventsAndSubeventsAreKept() throws {
        #expect(try HCIEvent(decoding: hex("ff 02 01 02")) == .unknown(code: 0xFF, parameters: [1, 2]))
        #expect(try HCIEvent(decoding: hex("3e 02 14 aa")) == .leMeta(.unknown(subeventCode: 0x14, parameters: [0xAA])))
    }

    @Test func lengthMismatchThrows() {
        #expect(throws: PacketDecodingError.self) { try HCIEvent(decoding: hex("0e 05 01 03 0c 00")) }
        #expect(throws: PacketDecodingError.trailingBytes(count: 1)) { try HCIEvent(decoding: hex("0e 04 01 03 0c 00 00")) }
    }

    @Test func aclPacketsRoundTrip() throws {
        let fromController = try ACLDataPacket(decoding: Array(Reference.attMTURequestFromController.dropFirst()))
        #expect(fromController.connectionHandle == 1)
        #expect(fromController.packetBoundary == .firstFlushable)
        #expect(fromController.broadcastFlag == 0)
        #expect(fromController.data == hex("03 00 04 00 02 17 00"))
        #expect(fromController.packet.h4Encoded == Reference.attMTURequestFromController)

        let fromHost = ACLDataPacket(connectionHandle: 1, packetBoundary: .firstNonFlushable, data: hex("03 00 04 00 03 17 00"))
        #expect(fromHost.packet.h4Encoded == Reference.attMTUResponseFromHost)
    }
}
