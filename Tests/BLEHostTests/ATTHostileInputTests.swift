import Testing
import TestTiers
@testable import BLEHost
import TracerCore
import BLEHostTestSupport

@Suite("Hostile ATT input", .tags(.unit))
struct ATTHostileInputTests {
    /// Every decodable input re-encodes to itself; everything else throws. Nothing traps.
    private func decodeWithoutTrapping(_ bytes: [UInt8]) {
        do {
            let pdu = try ATTPDU(decoding: bytes)
            #expect(pdu.encode() == bytes, "round trip of \(bytes)")
        } catch {
            // A typed PacketDecodingError is the only other outcome.
        }
    }

    @Test func everyPrefixOfEveryReferencePDU() {
        for packet in ReferenceCapture.all {
            let pdu = ReferenceCapture.attPDU(packet)
            for length in 0...pdu.count { decodeWithoutTrapping(Array(pdu.prefix(length))) }
        }
    }

    /// The PDUs decoded by the shared codecs of ATTPDUCodable.swift: an opcode-only PDU with a
    /// parameter is refused, and each type refuses another type's opcode.
    @Test func sharedCodecsCheckOpcodeAndLength() throws {
        #expect(throws: PacketDecodingError.trailingBytes(count: 1)) { try ATTWriteResponse(decoding: [0x13, 0x00]) }
        #expect(throws: PacketDecodingError.trailingBytes(count: 2)) { try ATTExecuteWriteResponse(decoding: [0x19, 0x01, 0x02]) }
        #expect(throws: PacketDecodingError.trailingBytes(count: 1)) { try ATTHandleValueConfirmation(decoding: [0x1E, 0xFF]) }
        #expect(throws: PacketDecodingError.invalidValue(field: "opcode", value: 0x19)) { try ATTWriteResponse(decoding: [0x19]) }
        #expect(throws: PacketDecodingError.invalidValue(field: "opcode", value: 0x0D)) { try ATTReadResponse(decoding: [0x0D, 0x01]) }
        #expect(throws: PacketDecodingError.invalidValue(field: "opcode", value: 0x0B)) { try ATTReadBlobResponse(decoding: [0x0B, 0x01]) }
        #expect(throws: PacketDecodingError.self) { try ATTReadResponse(decoding: []) }
        #expect(try ATTReadResponse(decoding: [0x0B]) == ATTReadResponse(value: []))
        #expect(try ATTReadBlobResponse(decoding: [0x0D, 0xAA, 0xBB]) == ATTReadBlobResponse(partOfValue: [0xAA, 0xBB]))
        #expect(ATTReadBlobResponse(partOfValue: [0xAA, 0xBB]).encode() == [0x0D, 0xAA, 0xBB])
        #expect(ATTExecuteWriteResponse().encode() == [0x19])
    }

    @Test func truncatedFixedLayoutsThrow() {
        #expect(throws: PacketDecodingError.self) { try ATTPDU(decoding: []) }
        #expect(throws: PacketDecodingError.self) { try ATTPDU(decoding: [0x0A, 0x01]) }
        #expect(throws: PacketDecodingError.self) { try ATTPDU(decoding: [0x0A, 0x01, 0x00, 0x00]) }
        #expect(throws: PacketDecodingError.self) { try ATTPDU(decoding: [0x08, 0x01, 0x00, 0xFF, 0xFF, 0x03]) }
        #expect(throws: PacketDecodingError.self) { try ATTPDU(decoding: [0x05, 0x03, 0x01, 0x00, 0x00, 0x28]) }
        #expect(throws: PacketDecodingError.self) { try ATTPDU(decoding: [0x09, 0x01, 0x01]) }
        #expect(throws: PacketDecodingError.self) { try ATTPDU(decoding: [0x09, 0x04, 0x01, 0x00, 0x00]) }
        #expect(throws: PacketDecodingError.self) { try ATTPDU(decoding: [0x11, 0x03, 0x01, 0x00, 0x02]) }
        #expect(throws: PacketDecodingError.self) { try ATTPDU(decoding: [0x07]) }
        #expect(throws: PacketDecodingError.self) { try ATTPDU(decoding: [0x18, 0x02]) }
    }

    @Test func randomByteStrings() {
        var generator = SplitMix64(seed: 0x7A7C_E500)
        for _ in 0..<20_000 {
            let length = Int.random(in: 0...40, using: &generator)
            var bytes = (0..<length).map { _ in UInt8.random(in: 0...255, using: &generator) }
            // Bias half of the inputs towards known opcodes so the parameter parsers are exercised.
            if !bytes.isEmpty, Bool.random(using: &generator) {
                bytes[0] = [0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0A, 0x0B, 0x0C, 0x0D, 0x10, 0x11,
                            0x12, 0x13, 0x16, 0x17, 0x18, 0x19, 0x1B, 0x1D, 0x1E, 0x52].randomElement(using: &generator) ?? 0
            }
            decodeWithoutTrapping(bytes)
        }
    }
}
