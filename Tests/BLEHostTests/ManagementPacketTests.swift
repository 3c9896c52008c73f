import Testing
import TestTiers
@testable import BLEHost

/// The kernel's management interface (BlueZ doc/mgmt-api.txt): what the node sends to power an
/// adapter off, and how it reads the kernel's answer, including bytes no kernel should send.
@Suite(.tags(.unit)) struct ManagementPacketTests {
    @Test func setPoweredOffEncodesOpcodeIndexLengthAndParameter() {
        // What `btmgmt --index 0 power off` writes: opcode 0x0005, index 0, length 1, powered 0.
        #expect(ManagementCommand.setPowered(index: 0, on: false).encode() == [0x05, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00])
        #expect(ManagementCommand.setPowered(index: 0x0102, on: true).encode() == [0x05, 0x00, 0x02, 0x01, 0x01, 0x00, 0x01])
    }

    @Test func commandCompleteDecodesOpcodeStatusAndCurrentSettings() throws {
        // Command Complete (0x0001) on index 1 for Set Powered, status Success, current settings 0x00000ad0.
        let event = try ManagementEvent(decoding: [0x01, 0x00, 0x01, 0x00, 0x07, 0x00, 0x05, 0x00, 0x00, 0xd0, 0x0a, 0x00, 0x00])
        #expect(event.index == 1)
        #expect(event.kind == .commandComplete(opcode: 0x0005, status: 0x00, returned: [0xd0, 0x0a, 0x00, 0x00]))
        #expect(event.reply?.opcode == 0x0005 && event.reply?.status == 0)
    }

    @Test func commandStatusDecodesARefusal() throws {
        // Command Status (0x0002) on index 0: Set Powered Rejected (0x0b).
        let event = try ManagementEvent(decoding: [0x02, 0x00, 0x00, 0x00, 0x03, 0x00, 0x05, 0x00, 0x0b])
        #expect(event.kind == .commandStatus(opcode: 0x0005, status: 0x0b))
        #expect(ManagementEvent.describeStatus(0x0b) == "Rejected (0xb)")
    }

    @Test func otherEventsAreKeptButAreNoReply() throws {
        // New Settings (0x0006) on index 0, broadcast to every control socket when power changes.
        let event = try ManagementEvent(decoding: [0x06, 0x00, 0x00, 0x00, 0x04, 0x00, 0xd0, 0x0a, 0x00, 0x00])
        #expect(event.kind == .other(code: 0x0006, parameters: [0xd0, 0x0a, 0x00, 0x00]))
        #expect(event.reply == nil)
    }

    @Test func hostileOrShortInputIsAnErrorNeverATrap() {
        #expect(throws: ManagementDecodingError.tooShort(needed: 6, got: 0)) { try ManagementEvent(decoding: []) }
        #expect(throws: ManagementDecodingError.tooShort(needed: 6, got: 5)) { try ManagementEvent(decoding: [0x01, 0x00, 0x00, 0x00, 0x00]) }
        // A length beyond the bytes that follow, or short of them.
        #expect(throws: ManagementDecodingError.lengthMismatch(declared: 0xffff, actual: 3)) {
            try ManagementEvent(decoding: [0x01, 0x00, 0x00, 0x00, 0xff, 0xff, 0x05, 0x00, 0x00])
        }
        #expect(throws: ManagementDecodingError.lengthMismatch(declared: 1, actual: 3)) {
            try ManagementEvent(decoding: [0x02, 0x00, 0x00, 0x00, 0x01, 0x00, 0x05, 0x00, 0x00])
        }
        // A Command Complete or Status too short to hold an opcode and a status.
        #expect(throws: ManagementDecodingError.tooShort(needed: 9, got: 8)) {
            try ManagementEvent(decoding: [0x01, 0x00, 0x00, 0x00, 0x02, 0x00, 0x05, 0x00])
        }
        #expect(throws: ManagementDecodingError.tooShort(needed: 9, got: 6)) { try ManagementEvent(decoding: [0x02, 0x00, 0x00, 0x00, 0x00, 0x00]) }
        // Every prefix and every byte value at every position of a valid event: decoded or refused, never a trap.
        let valid: [UInt8] = [0x01, 0x00, 0x01, 0x00, 0x07, 0x00, 0x05, 0x00, 0x00, 0xd0, 0x0a, 0x00, 0x00]
        for end in 0...valid.count { _ = try? ManagementEvent(decoding: valid[0..<end]) }
        for position in valid.indices {
            for value in UInt8.min...UInt8.max {
                var mutated = valid
                mutated[position] = value
                _ = try? ManagementEvent(decoding: mutated)
            }
        }
    }

    @Test func decodingASliceReadsFromItsOwnStart() throws {
        // The reader hands the decoder a slice of its buffer; indices must not leak through.
        let buffer: [UInt8] = [0xaa, 0x02, 0x00, 0x00, 0x00, 0x03, 0x00, 0x05, 0x00, 0x00]
        let event = try ManagementEvent(decoding: buffer[1...])
        #expect(event.kind == .commandStatus(opcode: 0x0005, status: 0x00))
    }

    @Test func readIndexListAndControllerInformationEncodeAsBtmgmtSendsThem() {
        // Read Controller Index List (0x0003) on MGMT_INDEX_NONE, no parameters.
        #expect(ManagementCommand.readControllerIndexList().encode() == [0x03, 0x00, 0xff, 0xff, 0x00, 0x00])
        // Read Controller Information (0x0004) on index 1, no parameters.
        #expect(ManagementCommand.readControllerInformation(index: 1).encode() == [0x04, 0x00, 0x01, 0x00, 0x00, 0x00])
    }

    @Test func theIndexListReplyDecodesItsIndices() throws {
        // Command Complete for 0x0003 on index 0xffff, Success, two controllers: 0 and 1.
        let event = try ManagementEvent(decoding: [0x01, 0x00, 0xff, 0xff, 0x09, 0x00, 0x03, 0x00, 0x00,
                                                   0x02, 0x00, 0x00, 0x00, 0x01, 0x00])
        guard case .commandComplete(0x0003, 0x00, let returned) = event.kind else {
            Issue.record("not a Command Complete for Read Controller Index List: \(event)")
            return
        }
        #expect(try decodeControllerIndexList(returned) == [0, 1])
        #expect(try decodeControllerIndexList([0x00, 0x00]) == [])
        #expect(throws: ManagementDecodingError.tooShort(needed: 2, got: 1)) { try decodeControllerIndexList([0x01]) }
        // A count beyond the indices that follow.
        #expect(throws: ManagementDecodingError.lengthMismatch(declared: 4, actual: 2)) { try decodeControllerIndexList([0x02, 0x00, 0x01, 0x00]) }
    }

    @Test func controllerInformationDecodesAddressManufacturerSettingsAndName() throws {
        // mgmt-api.txt: address (6, least significant first), version, manufacturer (2),
        // supported settings (4), current settings (4), class of device (3), name (249), short name (11).
        var returned: [UInt8] = [0xa1, 0x32, 0x07, 0xdc, 0x1b, 0x00, 0x0c, 0x02, 0x00,
                                 0xff, 0xff, 0x01, 0x00, 0xd1, 0x0a, 0x00, 0x00, 0x00, 0x00, 0x00]
        returned += Array("kernel-bed".utf8) + [UInt8](repeating: 0, count: 249 - 10) + [UInt8](repeating: 0, count: 11)
        #expect(returned.count == 280)
        let information = try ManagementControllerInformation(decoding: returned)
        #expect(information == ManagementControllerInformation(address: "00:1B:DC:07:32:A1", manufacturer: 2,
                                                               supportedSettings: 0x0001_ffff, currentSettings: 0x0000_0ad1, name: "kernel-bed"))
        #expect(information.isPowered)
        returned[13] = 0xd0
        #expect(try !ManagementControllerInformation(decoding: returned).isPowered)
        #expect(throws: ManagementDecodingError.tooShort(needed: 280, got: 279)) { try ManagementControllerInformation(decoding: returned.dropLast()) }
    }
}
