import Testing
import TestTiers
@testable import BLEHost
import TracerCore
import BLEHostTestSupport

@Suite(.tags(.unit)) struct BluetoothAddressTests {
    @Test func wireOrderIsLeastSignificantFirst() throws {
        let address = try BluetoothAddress(littleEndianBytes: hex("dd 00 00 00 00 c0"))
        #expect(address.description == "C0:00:00:00:00:DD")
        #expect(address.littleEndianBytes == hex("dd 00 00 00 00 c0"))
        #expect(BluetoothAddress(string: "C0:00:00:00:00:DD") == address)
        #expect(BluetoothAddress(string: "c0-00-00-00-00-dd") == address)
        #expect(address.randomAddressKind == .staticAddress)
    }

    @Test(arguments: ["", "C0:00:00:00:00", "C0:00:00:00:00:DD:EE", "G0:00:00:00:00:00", "C00:0:00:00:00:DD"])
    func rejectsMalformedStrings(text: String) {
        #expect(BluetoothAddress(string: text) == nil)
    }

    @Test func wrongLengthThrows() {
        #expect(throws: PacketDecodingError.self) { try BluetoothAddress(littleEndianBytes: [1, 2, 3]) }
        #expect(throws: PacketDecodingError.trailingBytes(count: 1)) { try BluetoothAddress(littleEndianBytes: [1, 2, 3, 4, 5, 6, 7]) }
    }

    @Test func nonResolvablePrivateAddressesFollowTheRules() {
        let mask: UInt64 = (1 << 46) - 1
        var seen = Set<BluetoothAddress>()
        for _ in 0..<500 {
            let address = BluetoothAddress.randomNonResolvablePrivate()
            #expect(address.rawValue >> 46 == 0)
            #expect(address.rawValue & mask != 0 && address.rawValue & mask != mask)
            #expect(address.randomAddressKind == .nonResolvablePrivate)
            seen.insert(address)
        }
        #expect(seen.count > 490)
    }

    @Test func generatorRejectsAllZerosAndAllOnes() {
        /// Yields all zeros, then all ones, then a usable value.
        struct Scripted: RandomNumberGenerator {
            var values: [UInt64] = [0, UInt64.max, 0x1234_5678_9ABC]
            mutating func next() -> UInt64 { values.removeFirst() }
        }
        var generator = Scripted()
        #expect(BluetoothAddress.randomNonResolvablePrivate(using: &generator).rawValue == 0x1234_5678_9ABC)
    }

    @Test func staticRandomAddresses() {
        #expect(BluetoothAddress.randomStatic().randomAddressKind == .staticAddress)
    }
}

@Suite(.tags(.unit)) struct AdvertisedUUIDTests {
    @Test func stringAndAirForms() throws {
        let uuid = tracerServiceUUID
        #expect(uuid.description == "a09a0000-5aaa-47f2-9c7f-93bdb3a65376")
        #expect(uuid.bigEndianBytes == hex("a0 9a 00 00 5a aa 47 f2 9c 7f 93 bd b3 a6 53 76"))
        #expect(uuid.littleEndianBytes == hex("76 53 a6 b3 bd 93 7f 9c f2 47 aa 5a 00 00 9a a0"))
        #expect(try BluetoothUUID(littleEndianBytes: uuid.littleEndianBytes) == uuid)
        #expect(BluetoothUUID(string: "A09A0000-5AAA-47F2-9C7F-93BDB3A65376") == uuid)
        let reference = try #require(BluetoothUUID(string: Reference.advertisedUUID))
        #expect(reference.littleEndianBytes == Array(Reference.advertisedAD[5...]))
    }

    @Test(arguments: ["", "a09a0000", "a09a0000-5aaa-47f2-9c7f-93bdb3a6537g",
                      "a09a0000-5aaa-47f2-9c7f93-bdb3a65376", "a09a0000-5aaa-47f2-9c7f-93bdb3a653766"])
    func rejectsMalformedStrings(text: String) {
        #expect(BluetoothUUID(string: text) == nil)
    }

    @Test func wrongLengthThrows() {
        #expect(throws: PacketDecodingError.self) { try BluetoothUUID(littleEndianBytes: [1, 2, 3]) }
    }
}

@Suite(.tags(.unit)) struct AdvertisingDataTests {
    @Test func parsesTheReferenceAdvertisement() throws {
        let data = AdvertisingData(parsing: Reference.advertisedAD)
        #expect(data.flags == 0x06)
        #expect(data.serviceUUIDs128 == [BluetoothUUID(string: Reference.advertisedUUID)!])
        #expect(try data.encode() == Reference.advertisedAD)
    }

    @Test func encodesTracerAdvertisement() throws {
        let data = AdvertisingData([.flags(AdvertisingDataStructure.generalDiscoverableLEOnlyFlags),
                                    .completeList128BitServiceUUIDs([tracerServiceUUID]), .txPowerLevel(-8)])
        let bytes = try data.encode()
        #expect(bytes == hex("02 01 06 11 07 76 53 a6 b3 bd 93 7f 9c f2 47 aa 5a 00 00 9a a0 02 0a f8"))
        let parsed = AdvertisingData(parsing: bytes)
        #expect(parsed == data)
        #expect(parsed.txPowerLevel == -8)
        #expect(parsed.serviceUUIDs128 == [tracerServiceUUID])
        #expect(try LegacyAdvertisingPayload(data).bytes.count == 24)
    }

    @Test func toleratesGarbage() {
        // Zero length ends the significant part (padding follows).
        #expect(AdvertisingData(parsing: hex("02 01 06 00 05 ff")).structures == [.flags(0x06)])
        // An overrun keeps what came before and stops.
        #expect(AdvertisingData(parsing: hex("02 01 06 09 ff 01 02")).structures == [.flags(0x06)])
        #expect(AdvertisingData(parsing: []).structures.isEmpty)
        #expect(AdvertisingData(parsing: [0xff]).structures.isEmpty)
        // A UUID list whose length is not a multiple of 16 yields only the whole UUIDs.
        let partial = AdvertisingData(parsing: [0x13, 0x07] + tracerServiceUUID.littleEndianBytes + [0xAA, 0xBB])
        #expect(partial.serviceUUIDs128 == [tracerServiceUUID])
        #expect(AdvertisingData(parsing: hex("01 07")).serviceUUIDs128.isEmpty)
        #expect(AdvertisingData(parsing: hex("03 0a 01 02")).txPowerLevel == nil)
        var generator = SplitMix64(seed: 5)
        for _ in 0..<500 {
            let bytes = (0..<Int.random(in: 0...40, using: &generator)).map { _ in UInt8.random(in: 0...255, using: &generator) }
            let parsed = AdvertisingData(parsing: bytes)
            _ = (parsed.flags, parsed.txPowerLevel, parsed.serviceUUIDs128, parsed.localName)
        }
    }

    @Test func structureTooLongThrows() {
        let data = AdvertisingData([AdvertisingDataStructure(type: 0xff, data: [UInt8](repeating: 0, count: 255))])
        #expect(throws: AdvertisingDataError.structureTooLong(type: 0xff, length: 255)) { try data.encode() }
    }
}

@Suite(.tags(.unit)) struct HCIStatusCodeTests {
    @Test func printsSpecificationNames() {
        #expect(HCIStatusCode(rawValue: 0x02).description == "Unknown Connection Identifier (0x02)")
        #expect(HCIStatusCode(rawValue: 0x00).description == "Success (0x00)")
        #expect(HCIStatusCode(rawValue: 0x0C).description == "Command Disallowed (0x0C)")
        #expect(HCIStatusCode(rawValue: 0x13).description == "Remote User Terminated Connection (0x13)")
        #expect(HCIStatusCode(rawValue: 0x3E).name == "Connection Failed to be Established / Synchronization Timeout")
        #expect(HCIStatusCode(rawValue: 0x45).name == "Packet Too Long")
        #expect(HCIStatusCode(rawValue: 0xEE).description == "Unknown HCI Status (0xEE)")
    }

    @Test func everyCommonCodeHasAName() {
        let reserved: Set<UInt8> = [0x2B, 0x31, 0x33]
        for code in UInt8(0x00)...0x45 where !reserved.contains(code) {
            #expect(HCIStatusCode(rawValue: code).name != "Unknown HCI Status", "0x\(String(code, radix: 16))")
        }
    }

    @Test func commandFailureNamesTheStatus() {
        let error = HCIError.commandFailed(opcode: Disconnect.opcode, status: .unknownConnectionIdentifier)
        #expect(error.description == "HCI command 0x0406 failed: Unknown Connection Identifier (0x02)")
        #expect(error.status == .unknownConnectionIdentifier)
    }
}
