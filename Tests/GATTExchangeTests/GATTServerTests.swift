import Testing
import TestTiers
import TracerCore
@testable import BLEHost
import BLEHostTestSupport
@testable import GATTExchange

/// The server as a phone would see it: exact request bytes in, exact answers out.
@Suite("GATT server behaviour", .tags(.unit))
struct GATTServerTests {
    private func errorResponse(_ opcode: UInt8, _ handle: UInt16, _ code: ATTErrorCode) -> [UInt8] {
        [0x01, opcode, UInt8(truncatingIfNeeded: handle), UInt8(truncatingIfNeeded: handle >> 8), code.rawValue]
    }

    private func harness(_ writes: CallbackRecorder<PeerIDWrite> = CallbackRecorder()) throws -> ServerHarness {
        try ServerHarness(services: [tracerService(writes: writes)])
    }

    @Test func unknownRequestOpcodeIsNotSupported() async throws {
        let setup = try harness()
        #expect(try await setup.peer.exchange([0x3F, 0x01, 0x02]) == errorResponse(0x3F, 0, .requestNotSupported))
        #expect(try await setup.peer.exchange([0x0E, 0x01, 0x00, 0x02, 0x00]) == errorResponse(0x0E, 0, .requestNotSupported))
        #expect(try await setup.peer.exchange([0x20, 0x01, 0x00, 0x02, 0x00]) == errorResponse(0x20, 0, .requestNotSupported))
        await setup.close()
    }

    @Test func malformedRequestsAreInvalidPDU() async throws {
        let setup = try harness()
        #expect(try await setup.peer.exchange([0x0A, 0x01]) == errorResponse(0x0A, 0, .invalidPDU))
        #expect(try await setup.peer.exchange([0x0A, 0x01, 0x00, 0x00]) == errorResponse(0x0A, 0, .invalidPDU))
        #expect(try await setup.peer.exchange([0x08, 0x01, 0x00, 0xFF, 0xFF, 0x03]) == errorResponse(0x08, 0, .invalidPDU))
        #expect(try await setup.peer.exchange([0x04, 0x01, 0x00]) == errorResponse(0x04, 0, .invalidPDU))
        #expect(try await setup.peer.exchange([0x18, 0x07]) == errorResponse(0x18, 0, .invalidPDU))
        #expect(try await setup.peer.exchange([0x02]) == errorResponse(0x02, 0, .invalidPDU))
        await setup.close()
    }

    @Test func invalidHandlesAndRanges() async throws {
        let setup = try harness()
        #expect(try await setup.peer.exchange([0x0A, 0x00, 0x00]) == errorResponse(0x0A, 0, .invalidHandle))
        #expect(try await setup.peer.exchange([0x0A, 0xFF, 0xFF]) == errorResponse(0x0A, 0xFFFF, .invalidHandle))
        #expect(try await setup.peer.exchange([0x0C, 0x40, 0x00, 0x00, 0x00]) == errorResponse(0x0C, 0x40, .invalidHandle))
        #expect(try await setup.peer.exchange([0x12, 0x00, 0x00, 0x01]) == errorResponse(0x12, 0, .invalidHandle))
        #expect(try await setup.peer.exchange([0x04, 0x00, 0x00, 0xFF, 0xFF]) == errorResponse(0x04, 0, .invalidHandle))
        #expect(try await setup.peer.exchange([0x04, 0x05, 0x00, 0x04, 0x00]) == errorResponse(0x04, 5, .invalidHandle))
        #expect(try await setup.peer.exchange([0x06, 0x09, 0x00, 0x01, 0x00, 0x00, 0x28]) == errorResponse(0x06, 9, .invalidHandle))
        #expect(try await setup.peer.exchange([0x08, 0x00, 0x00, 0xFF, 0xFF, 0x03, 0x28]) == errorResponse(0x08, 0, .invalidHandle))
        #expect(try await setup.peer.exchange([0x10, 0x03, 0x00, 0x02, 0x00, 0x00, 0x28]) == errorResponse(0x10, 3, .invalidHandle))
        // A valid range past the last attribute finds nothing.
        #expect(try await setup.peer.exchange([0x04, 0x00, 0x10, 0xFF, 0xFF]) == errorResponse(0x04, 0x1000, .attributeNotFound))
        await setup.close()
    }

    @Test func findInformationOverTheWholeRange() async throws {
        let setup = try harness()
        var found: [(UInt16, BluetoothUUID)] = []
        var start: UInt16 = 1
        while true {
            let answer = try #require(await setup.peer.exchange(ATTFindInformationRequest(range: .init(start: start, end: 0xFFFF)).encode()))
            let pdu = try ATTPDU(decoding: answer)
            if case .errorResponse(let error) = pdu {
                #expect(error.errorCode == .attributeNotFound)
                #expect(error.handle == start)
                break
            }
            guard case .findInformationResponse(let response) = pdu else { Issue.record("unexpected \(pdu)"); break }
            #expect(answer.count <= ATTBearerConfiguration.defaultMTU)
            found += response.entries.map { ($0.handle, $0.type) }
            start = (response.entries.last?.handle ?? 0xFFFE) + 1
        }
        #expect(found.map(\.0) == Array(1...TracerLayout.last))
        let expectedTypes: [BluetoothUUID] = [
            .primaryService, .characteristic, .deviceName, .characteristic, .appearance,
            .primaryService,
            .primaryService, .characteristic, TracerService.peerIDCharacteristicUUID,
            .characteristic, TracerService.peerIDWriteCharacteristicUUID,
        ]
        #expect(found.map(\.1) == expectedTypes)
        await setup.close()
    }

    @Test func readByGroupTypeListsServicesAndRejectsOtherGroupTypes() async throws {
        let setup = try harness()
        let answer = try #require(await setup.peer.exchange([0x10, 0x01, 0x00, 0xFF, 0xFF, 0x00, 0x28]))
        // 16-bit service UUIDs come first; the 128-bit Tracer UUID needs its own response.
        #expect(answer == bytesFromHex("11 06 01 00 05 00 00 18 06 00 06 00 01 18"))
        let tracer = try #require(await setup.peer.exchange([0x10, 0x07, 0x00, 0xFF, 0xFF, 0x00, 0x28]))
        #expect(tracer == [0x11, 0x14, 0x07, 0x00, 0x0B, 0x00] + TracerService.serviceUUID.littleEndianBytes)
        #expect(try await setup.peer.exchange([0x10, 0x0C, 0x00, 0xFF, 0xFF, 0x00, 0x28]) == errorResponse(0x10, 0x0C, .attributeNotFound))
        #expect(try await setup.peer.exchange([0x10, 0x01, 0x00, 0xFF, 0xFF, 0x03, 0x28]) == errorResponse(0x10, 1, .unsupportedGroupType))
        #expect(try await setup.peer.exchange([0x10, 0x01, 0x00, 0xFF, 0xFF] + TracerService.serviceUUID.littleEndianBytes)
                == errorResponse(0x10, 1, .unsupportedGroupType))
        await setup.close()
    }

    @Test func findByTypeValueMatchesServiceUUIDsInEitherWidth() async throws {
        let setup = try harness()
        let tracer = try #require(await setup.peer.exchange([0x06, 0x01, 0x00, 0xFF, 0xFF, 0x00, 0x28] + TracerService.serviceUUID.littleEndianBytes))
        #expect(tracer == [0x07, 0x07, 0x00, 0x0B, 0x00])
        let gap = try #require(await setup.peer.exchange([0x06, 0x01, 0x00, 0xFF, 0xFF, 0x00, 0x28, 0x00, 0x18]))
        #expect(gap == [0x07, 0x01, 0x00, 0x05, 0x00])
        let gapAsLongUUID = try #require(await setup.peer.exchange([0x06, 0x01, 0x00, 0xFF, 0xFF, 0x00, 0x28] + BluetoothUUID.genericAccessService.littleEndian128Bytes))
        #expect(gapAsLongUUID == [0x07, 0x01, 0x00, 0x05, 0x00])
        #expect(try await setup.peer.exchange([0x06, 0x08, 0x00, 0xFF, 0xFF, 0x00, 0x28] + TracerService.serviceUUID.littleEndianBytes)
                == errorResponse(0x06, 8, .attributeNotFound))
        await setup.close()
    }

    @Test func readByTypeReadsByUUIDAndStopsAtAccessErrors() async throws {
        let setup = try harness()
        let byUUID = try #require(await setup.peer.exchange([0x08, 0x01, 0x00, 0xFF, 0xFF] + TracerService.peerIDCharacteristicUUID.littleEndianBytes))
        #expect(byUUID == [0x09, 0x0A, 0x09, 0x00] + sampleID.bytes)
        let writeOnly = try #require(await setup.peer.exchange([0x08, 0x01, 0x00, 0xFF, 0xFF] + TracerService.peerIDWriteCharacteristicUUID.littleEndianBytes))
        #expect(writeOnly == errorResponse(0x08, TracerLayout.writeValue, .readNotPermitted))
        await setup.close()
    }

    @Test func readsOfDeclarationsAndValues() async throws {
        let setup = try harness()
        #expect(try await setup.peer.exchange([0x0A, 0x07, 0x00]) == [0x0B] + TracerService.serviceUUID.littleEndianBytes)
        #expect(try await setup.peer.exchange([0x0A, 0x08, 0x00])
                == [0x0B, 0x02, 0x09, 0x00] + TracerService.peerIDCharacteristicUUID.littleEndianBytes)
        #expect(try await setup.peer.exchange([0x0A, 0x0A, 0x00])
                == [0x0B, 0x0C, 0x0B, 0x00] + TracerService.peerIDWriteCharacteristicUUID.littleEndianBytes)
        #expect(try await setup.peer.exchange([0x0A, 0x03, 0x00]) == [0x0B] + Array("Tracer".utf8))
        #expect(try await setup.peer.exchange([0x0A, 0x05, 0x00]) == [0x0B, 0x00, 0x00])
        #expect(try await setup.peer.exchange([0x0A, 0x09, 0x00]) == [0x0B] + sampleID.bytes)
        await setup.close()
    }

    @Test func writesToReadOnlyAttributesAreRefused() async throws {
        let writes = CallbackRecorder<PeerIDWrite>()
        let setup = try harness(writes)
        #expect(try await setup.peer.exchange([0x12, 0x07, 0x00, 0x01, 0x02]) == errorResponse(0x12, 7, .writeNotPermitted))
        #expect(try await setup.peer.exchange([0x12, 0x09, 0x00] + sampleID.bytes) == errorResponse(0x12, 9, .writeNotPermitted))
        #expect(try await setup.peer.exchange([0x12, 0x03, 0x00, 0x41]) == errorResponse(0x12, 3, .writeNotPermitted))
        #expect(await writes.values.isEmpty)
        await setup.close()
    }

    @Test func readBlobOffsets() async throws {
        let longValue = (0..<60).map { UInt8($0) }
        let setup = try ServerHarness(services: [GATTServiceDefinition(uuid: 0xFFF0, characteristics: [
            GATTCharacteristicDefinition(uuid: 0xFFF1, properties: .read, value: .computed { longValue }),
        ])])
        // Handles: 7 service, 8 declaration, 9 value.
        #expect(try await setup.peer.exchange([0x0A, 0x09, 0x00]) == [0x0B] + Array(longValue[0..<22]))
        #expect(try await setup.peer.exchange([0x0C, 0x09, 0x00, 22, 0x00]) == [0x0D] + Array(longValue[22..<44]))
        #expect(try await setup.peer.exchange([0x0C, 0x09, 0x00, 44, 0x00]) == [0x0D] + Array(longValue[44..<60]))
        #expect(try await setup.peer.exchange([0x0C, 0x09, 0x00, 60, 0x00]) == [0x0D])
        #expect(try await setup.peer.exchange([0x0C, 0x09, 0x00, 61, 0x00]) == errorResponse(0x0C, 9, .invalidOffset))
        // A short fixed-length value is read whole with Read (3.4.4.5).
        #expect(try await setup.peer.exchange([0x0C, 0x05, 0x00, 0x00, 0x00]) == errorResponse(0x0C, 5, .attributeNotLong))
        await setup.close()
    }

    @Test func preparedWritesAreNotSupported() async throws {
        let writes = CallbackRecorder<PeerIDWrite>()
        let setup = try harness(writes)
        #expect(try await setup.peer.exchange([0x16, 0x0B, 0x00, 0x00, 0x00] + sampleID.bytes) == errorResponse(0x16, 0x0B, .requestNotSupported))
        #expect(try await setup.peer.exchange([0x18, 0x01]) == errorResponse(0x18, 0, .requestNotSupported))
        #expect(try await setup.peer.exchange([0x18, 0x00]) == errorResponse(0x18, 0, .requestNotSupported))
        #expect(await writes.values.isEmpty)
        await setup.close()
    }

    @Test func commandsAreNeverAnswered() async throws {
        let writes = CallbackRecorder<PeerIDWrite>()
        let setup = try harness(writes)
        for command in [[0x52, 0x0B, 0x00] + Array(sampleID.bytes.prefix(7)),   // wrong length
                        [0x52, 0x0B, 0x00] + sampleID.bytes + [0x01],           // wrong length
                        [0x52, 0x09, 0x00] + sampleID.bytes,                    // read-only characteristic
                        [0x52, 0x00, 0x00, 0x01],                               // invalid handle
                        [0x52, 0x01],                                           // malformed
                        [0x7F, 0x01, 0x02],                                     // unknown command
                        [0xD2, 0x0B, 0x00] + sampleID.bytes + Array(repeating: 0, count: 12)] { // signed write
            try await setup.peer.send(command)
        }
        // The next request's answer is the first PDU back: nothing answered the commands.
        #expect(try await setup.peer.exchange([0x0A, 0x09, 0x00]) == [0x0B] + sampleID.bytes)
        #expect(await setup.peer.pendingCount == 0)
        #expect(await writes.values.isEmpty)

        try await setup.peer.send([0x52, 0x0B, 0x00] + sampleID.bytes)
        #expect(try await setup.peer.exchange([0x0A, 0x09, 0x00]) == [0x0B] + sampleID.bytes)
        #expect(await writes.values == [PeerIDWrite(id: sampleID)])
        await setup.close()
    }

    @Test func clientCharacteristicConfiguration() async throws {
        let setup = try ServerHarness(services: [GATTServiceDefinition(uuid: 0xFFF0, characteristics: [
            GATTCharacteristicDefinition(uuid: 0xFFF1, properties: [.read, .notify], value: .constant([1])),
        ])])
        // Handles: 7 service, 8 declaration, 9 value, 10 CCCD.
        #expect(try await setup.peer.exchange([0x04, 0x0A, 0x00, 0x0A, 0x00]) == [0x05, 0x01, 0x0A, 0x00, 0x02, 0x29])
        #expect(try await setup.peer.exchange([0x0A, 0x0A, 0x00]) == [0x0B, 0x00, 0x00])
        #expect(try await setup.peer.exchange([0x12, 0x0A, 0x00, 0x01]) == errorResponse(0x12, 0x0A, .invalidAttributeValueLength))
        #expect(try await setup.peer.exchange([0x12, 0x0A, 0x00, 0x03, 0x00]) == [0x13])
        // Indications were not offered, so only the notification bit is kept.
        #expect(try await setup.peer.exchange([0x0A, 0x0A, 0x00]) == [0x0B, 0x01, 0x00])
        #expect(await setup.server.clientConfiguration(forValueHandle: 9) == 0x0001)
        await setup.close()
    }

    /// Whatever arrives, a request gets exactly one answer and nothing else does.
    @Test func randomGarbageGetsExactlyTheRequiredAnswers() async throws {
        let setup = try harness()
        var generator = SplitMix64(seed: 0x6A7B_A6E0)
        let sentinel: [UInt8] = [0x0A, 0x01, 0x00]
        let sentinelAnswer: [UInt8] = [0x0B, 0x00, 0x18]
        for _ in 0..<400 {
            let length = Int.random(in: 1...24, using: &generator)
            var garbage = (0..<length).map { _ in UInt8.random(in: 0...255, using: &generator) }
            if Bool.random(using: &generator) {
                garbage[0] = [0x02, 0x04, 0x06, 0x08, 0x0A, 0x0C, 0x0E, 0x10, 0x12, 0x16, 0x18, 0x20, 0x52, 0xD2, 0x3F]
                    .randomElement(using: &generator) ?? 0x3F
            }
            // Exchange MTU would change the MTU under the test; it has its own tests.
            if garbage[0] == 0x02 { garbage[0] = 0x3F }
            try await setup.peer.send(garbage)
            try await setup.peer.send(sentinel)
            var answers: [[UInt8]] = []
            while let answer = await setup.peer.next(), answer != sentinelAnswer { answers.append(answer) }

            let opcode = ATTOpcode(garbage[0])
            switch opcode.role {
            case .request:
                #expect(answers.count == 1, "request \(garbage) answered by \(answers)")
                if let answer = answers.first, let pdu = try? ATTPDU(decoding: answer) {
                    if case .errorResponse(let error) = pdu {
                        #expect(error.requestOpcode == opcode)
                    } else {
                        #expect(pdu.opcode == opcode.expectedResponse)
                    }
                } else {
                    Issue.record("undecodable answer \(answers) to \(garbage)")
                }
            case .indication:
                let decodable = (try? ATTHandleValueIndication(decoding: garbage)) != nil
                #expect(answers == (decodable ? [[0x1E]] : []), "indication \(garbage)")
            case .command, .response, .notification, .confirmation:
                #expect(answers.isEmpty, "\(garbage) answered by \(answers)")
            }
        }
        await setup.close()
    }
}
