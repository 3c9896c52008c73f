import Testing
import TestTiers
@testable import BLEHost
import BLEHostTestSupport

@Suite("ATT PDUs from the Bumble reference capture", .tags(.unit))
struct ATTKnownBytesTests {
    private func decodeAndRoundTrip(_ packet: String) throws -> ATTPDU {
        let bytes = ReferenceCapture.attPDU(packet)
        let pdu = try ATTPDU(decoding: bytes)
        #expect(pdu.encode() == bytes, "re-encoding must be byte-identical")
        return pdu
    }

    @Test func exchangeMTU() throws {
        #expect(try decodeAndRoundTrip(ReferenceCapture.exchangeMTURequest) == .exchangeMTURequest(.init(clientRxMTU: 23)))
        #expect(try decodeAndRoundTrip(ReferenceCapture.exchangeMTUResponse) == .exchangeMTUResponse(.init(serverRxMTU: 23)))
    }

    @Test func findByTypeValue() throws {
        let request = try decodeAndRoundTrip(ReferenceCapture.findByTypeValueRequest)
        guard case .findByTypeValueRequest(let find) = request else { Issue.record("wrong case \(request)"); return }
        #expect(find.range == ATTHandleRange(start: 0x0001, end: 0xFFFF))
        #expect(find.attributeType == 0x2800)
        #expect(try BluetoothUUID(littleEndianBytes: find.value) == ReferenceCapture.serviceUUID)
        #expect(find.value == ReferenceCapture.serviceUUID.littleEndianBytes)

        let response = try decodeAndRoundTrip(ReferenceCapture.findByTypeValueResponse)
        #expect(response == .findByTypeValueResponse(.init(handles: [.init(foundHandle: 4, groupEndHandle: 8)])))
    }

    @Test func readByTypeCharacteristicDiscovery() throws {
        #expect(try decodeAndRoundTrip(ReferenceCapture.readByTypeRequest4to8)
                == .readByTypeRequest(.init(range: .init(start: 4, end: 8), attributeType: .characteristic)))
        #expect(try decodeAndRoundTrip(ReferenceCapture.readByTypeRequest6to8)
                == .readByTypeRequest(.init(range: .init(start: 6, end: 8), attributeType: .characteristic)))
        #expect(try decodeAndRoundTrip(ReferenceCapture.readByTypeRequest8to8)
                == .readByTypeRequest(.init(range: .init(start: 8, end: 8), attributeType: .characteristic)))

        let first = try decodeAndRoundTrip(ReferenceCapture.readByTypeResponseAt5)
        guard case .readByTypeResponse(let response) = first, response.entries.count == 1 else {
            Issue.record("wrong decode \(first)"); return
        }
        #expect(response.entries[0].handle == 5)
        let declaration = response.entries[0].value
        #expect(declaration.count == 19)
        #expect(declaration.first == GATTCharacteristicProperties.read.rawValue)
        #expect(Array(declaration[1...2]) == [0x06, 0x00])
        #expect(try BluetoothUUID(littleEndianBytes: Array(declaration[3...]))
                == BluetoothUUID(string: "6E400002-B5A3-F393-E0A9-E50E24DCCA9E"))

        let second = try decodeAndRoundTrip(ReferenceCapture.readByTypeResponseAt7)
        guard case .readByTypeResponse(let later) = second else { Issue.record("wrong decode \(second)"); return }
        #expect(later.entries.map(\.handle) == [7])
        #expect(later.entries[0].value.first == GATTCharacteristicProperties.write.rawValue)
    }

    @Test func errorResponse() throws {
        #expect(try decodeAndRoundTrip(ReferenceCapture.errorResponseNotFound)
                == .errorResponse(.init(requestOpcode: .readByTypeRequest, handle: 8, errorCode: .attributeNotFound)))
    }

    @Test func readAndWrite() throws {
        #expect(try decodeAndRoundTrip(ReferenceCapture.readRequest) == .readRequest(.init(handle: 6)))
        #expect(try decodeAndRoundTrip(ReferenceCapture.readResponse)
                == .readResponse(.init(value: [0xC1, 0xC2, 0xC3, 0xC4, 0xC5, 0xC6, 0xC7, 0xC8])))
        #expect(try decodeAndRoundTrip(ReferenceCapture.writeRequest)
                == .writeRequest(.init(handle: 8, value: [0xD1, 0xD2, 0xD3, 0xD4, 0xD5, 0xD6, 0xD7, 0xD8])))
        #expect(try decodeAndRoundTrip(ReferenceCapture.writeResponse) == .writeResponse(.init()))
    }

    /// Layouts of Core Spec Vol 3 Part F 3.4, for the PDUs the capture does not contain.
    @Test(arguments: [
        (ATTPDU.findInformationRequest(.init(range: .init(start: 0x0001, end: 0xFFFF))), "04 01 00 ff ff"),
        (.findInformationResponse(.init(entries: [.init(handle: 1, type: .primaryService), .init(handle: 2, type: .characteristic)])),
         "05 01 01 00 00 28 02 00 03 28"),
        (.findInformationResponse(.init(entries: [.init(handle: 9, type: BluetoothUUID(0xA09A_0001_5AAA_47F2, 0x9C7F_93BD_B3A6_5376))])),
         "05 02 09 00 76 53 a6 b3 bd 93 7f 9c f2 47 aa 5a 01 00 9a a0"),
        (.readByGroupTypeRequest(.init(range: .init(start: 1, end: 0xFFFF), groupType: .primaryService)), "10 01 00 ff ff 00 28"),
        (.readByGroupTypeResponse(.init(entries: [.init(handle: 1, endGroupHandle: 5, value: [0x00, 0x18]),
                                                  .init(handle: 6, endGroupHandle: 6, value: [0x01, 0x18])])!),
         "11 06 01 00 05 00 00 18 06 00 06 00 01 18"),
        (.readBlobRequest(.init(handle: 0x0009, offset: 22)), "0c 09 00 16 00"),
        (.readBlobResponse(.init(partOfValue: [1, 2, 3])), "0d 01 02 03"),
        (.writeCommand(.init(handle: 0x000B, value: [0xAA])), "52 0b 00 aa"),
        (.prepareWriteRequest(.init(handle: 0x000B, offset: 2, partOfValue: [0xAA])), "16 0b 00 02 00 aa"),
        (.prepareWriteResponse(.init(handle: 0x000B, offset: 2, partOfValue: [0xAA])), "17 0b 00 02 00 aa"),
        (.executeWriteRequest(.init(flags: .writeAllPendingPreparedValues)), "18 01"),
        (.executeWriteResponse(.init()), "19"),
        (.handleValueNotification(.init(handle: 0x000C, value: [1, 2])), "1b 0c 00 01 02"),
        (.handleValueIndication(.init(handle: 0x000C, value: [3])), "1d 0c 00 03"),
        (.handleValueConfirmation(.init()), "1e"),
        (.errorResponse(.init(requestOpcode: .readRequest, handle: 0x0B, errorCode: .readNotPermitted)), "01 0a 0b 00 02"),
        (.unknown(opcode: ATTOpcode(0x3F), parameters: [0x01]), "3f 01"),
    ])
    func specificationLayouts(pdu: ATTPDU, hex: String) throws {
        let bytes = bytesFromHex(hex)
        #expect(pdu.encode() == bytes)
        #expect(try ATTPDU(decoding: bytes) == pdu)
    }

    @Test func opcodeRoles() {
        #expect(ATTOpcode.writeCommand.role == .command)
        #expect(ATTOpcode.signedWriteCommand.role == .command)
        #expect(ATTOpcode(0x3F).role == .request)
        #expect(ATTOpcode(0x7F).role == .command)
        #expect(ATTOpcode.readMultipleRequest.role == .request)
        #expect(ATTOpcode.readResponse.role == .response)
        #expect(ATTOpcode.handleValueIndication.role == .indication)
        #expect(ATTOpcode.readRequest.expectedResponse == .readResponse)
    }

    @Test func errorCodeNames() {
        #expect(ATTErrorCode.invalidHandle.rawValue == 0x01)
        #expect(ATTErrorCode.requestNotSupported.rawValue == 0x06)
        #expect(ATTErrorCode.attributeNotFound.rawValue == 0x0A)
        #expect(ATTErrorCode.invalidAttributeValueLength.rawValue == 0x0D)
        #expect(ATTErrorCode.unsupportedGroupType.rawValue == 0x10)
        #expect(ATTErrorCode(0x0D).description == "Invalid Attribute Value Length (0x0D)")
        #expect(ATTErrorCode(0x85).name == "Application Error")
    }
}
