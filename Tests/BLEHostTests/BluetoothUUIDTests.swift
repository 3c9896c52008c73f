import Testing
import TestTiers
import BLEHost
import BLEHostTestSupport

@Suite("Bluetooth UUIDs", .tags(.unit))
struct BluetoothUUIDTests {
    @Test func tracerServiceUUIDParsesAndPrints() throws {
        let parsed = try #require(BluetoothUUID(string: "a09a0000-5aaa-47f2-9c7f-93bdb3a65376"))
        #expect(parsed == BluetoothUUID(0xA09A_0000_5AAA_47F2, 0x9C7F_93BD_B3A6_5376))
        #expect(parsed.width == .bits128)
        #expect(parsed.description == "a09a0000-5aaa-47f2-9c7f-93bdb3a65376")
        #expect(parsed.littleEndianBytes == bytesFromHex("76 53 a6 b3 bd 93 7f 9c f2 47 aa 5a 00 00 9a a0"))
        #expect(parsed.shortValue == nil)
        #expect(BluetoothUUID(string: "A09A00005AAA47F29C7F93BDB3A65376") == parsed)
    }

    @Test func shortFormsExpandOntoTheBaseUUID() throws {
        let short: BluetoothUUID = 0x2800
        #expect(BluetoothUUID(string: "0x2800") == short)
        #expect(BluetoothUUID(string: "2800") == short)
        let expanded = try #require(BluetoothUUID(string: "00002800-0000-1000-8000-00805F9B34FB"))
        #expect(expanded == short)
        #expect(expanded.hashValue == short.hashValue)
        #expect(expanded.width == .bits128 && short.width == .bits16)
        #expect(expanded.shortValue == 0x2800)
        #expect(short.littleEndianBytes == [0x00, 0x28])
        #expect(short.littleEndian128Bytes == expanded.littleEndianBytes)
        #expect(short.description == "0x2800")
    }

    @Test(arguments: ["", "0x", "28", "280", "28000", "zzzz", "a09a0000-5aaa-47f2-9c7f-93bdb3a6537",
                      "a09a0000-5aaa-47f2-9c7f-93bdb3a653766", "a09a00005-aaa-47f2-9c7f-93bdb3a65376",
                      "a09a0000+5aaa-47f2-9c7f-93bdb3a65376", "g09a0000-5aaa-47f2-9c7f-93bdb3a65376"])
    func malformedStringsAreRejected(text: String) {
        #expect(BluetoothUUID(string: text) == nil)
    }

    @Test func onAirDecodingAcceptsOnlyTwoOrSixteenOctets() throws {
        #expect(try BluetoothUUID(littleEndianBytes: [0x03, 0x28]) == .characteristic)
        for length in [0, 1, 3, 4, 15, 17] {
            #expect(throws: PacketDecodingError.self) { try BluetoothUUID(littleEndianBytes: Array(repeating: 0, count: length)) }
        }
    }
}
