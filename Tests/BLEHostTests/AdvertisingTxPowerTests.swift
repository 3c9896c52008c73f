import Testing
import TestTiers
@testable import BLEHost
import BLEHostTestSupport

/// LE Read Advertising Physical Channel Tx Power (Core Vol 4 Part E 7.8.6).
@Suite(.tags(.unit)) struct AdvertisingTxPowerCommandTests {
    @Test func theCommandAndItsAnswerHaveTheSpecificationsBytes() throws {
        // H4 command 0x01, opcode 0x2007 (OGF 0x08, OCF 0x0007) little-endian, no parameters.
        #expect(LEReadAdvertisingPhysicalChannelTxPower().packet.h4Encoded == [0x01, 0x07, 0x20, 0x00])
        // The return parameters after the status: TX_Power_Level, a signed byte (0xF7 = −9 dBm).
        #expect(try LEReadAdvertisingPhysicalChannelTxPower.ReturnParameters(decoding: hex("f7")).txPowerLevel == -9)
        #expect(try LEReadAdvertisingPhysicalChannelTxPower.ReturnParameters(decoding: hex("0a")).txPowerLevel == 10)
        #expect(throws: PacketDecodingError.self) { try LEReadAdvertisingPhysicalChannelTxPower.ReturnParameters(decoding: []) }
    }
}

/// Both virtual controllers answer the command, so a node learns its TX power at start-up.
@Suite(.tags(.integration), .serialized, .timeLimit(.minutes(1)))
struct AdvertisingTxPowerInteropTests {
    @Test(arguments: VirtualController.allCases)
    func theHostLearnsTheControllersAdvertisingTxPower(_ controller: VirtualController) async throws {
        let link = try await VirtualRadio.launch(controller, controllers: 1)
        defer { link.stop() }
        let host = try await LEHost.open(
            transport: try openHCITransport(.tcp(host: "127.0.0.1", port: link.ports[0])), database: try GATTDatabase(services: []))
        let txPower = await host.readAdvertisingTxPower()
        await host.close()
        let value = try #require(txPower, "\(controller) did not answer LE Read Advertising Physical Channel Tx Power")
        #expect((-127...20).contains(value))
        print("\(controller) advertising TX power: \(value) dBm")
    }
}
