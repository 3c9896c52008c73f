import Foundation
import Testing
import TestTiers
@testable import BLEHost
import BLEHostTestSupport
@testable import GATTExchange

/// Our host against Bumble's own host stack (a foreign implementation, as a phone app would be), in
/// both roles, over virtual controllers (Bumble's and RootCanal's) on one link. Each test asserts the bytes that crossed.
@Suite(.tags(.integration), .serialized, .timeLimit(.minutes(1)))
struct ForeignStackInteropTests {
    static let ourID = PeerIDBytes([0xA1, 0xA2, 0xA3, 0xA4, 0xA5, 0xA6, 0xA7, 0xA8])!

    @Test(arguments: VirtualController.allCases)
    func bumbleCentralExchangesWithOurPeripheral(_ controller: VirtualController) async throws {
        let link = try await VirtualRadio.launch(controller, controllers: 2)
        defer { link.stop() }
        let writes = CallbackRecorder<PeerIDWrite>()
        let host = try await LEHostInteropTests.openHost(port: link.ports[0], id: Self.ourID, writes: writes)
        try await host.startAdvertising(TracerService.advertisingData(txPower: 4))
        let ourAddress = try #require(await host.randomAddress)

        let central = try BumblePeer.start("tracer_central.py", [
            "--transport", "tcp-client:127.0.0.1:\(link.ports[1])", "--write-id", "1122334455667788",
        ])
        let report = try await central.result()

        #expect(report["error"] == nil, "Bumble central failed: \(report)")
        #expect((report["advertiser"] as? String)?.uppercased() == ourAddress.description)
        #expect(report["adv_data"] as? String == "02010611077653a6b3bd937f9cf247aa5a00009aa0020a04")
        #expect(report["tx_power"] as? Int == 4)
        // Bumble asks for 517; we offer 247.
        #expect(report["mtu"] as? Int == 247)
        // One central, no race: a link it had to open again means we left its first request unanswered.
        #expect(report["phantom_links"] as? Int == 0, "links without an answer: \(report["phantom_links"] ?? "nil")")
        #expect(report["read_id"] as? String == "a1a2a3a4a5a6a7a8")

        let attempts = try #require(report["writes"] as? [[String: Any]])
        let summary = attempts.map { attempt -> String in
            let value = attempt["value"] as? String ?? "?"
            let kind = (attempt["with_response"] as? Bool) == true ? "request" : "command"
            let result = attempt["result"] as? String ?? "?"
            let code = (attempt["att_error"] as? Int).map { " 0x" + String($0, radix: 16) } ?? ""
            return "\(value) \(kind) \(result)\(code)"
        }
        #expect(summary == [
            "1122334455667788 request ok",
            "1122334455667788c404 request ok",
            "1122334455667788 command ok",
            "11223344556677 request error 0xd",
        ])
        #expect(report["read_write_char_error"] as? Int == 0x02)

        // What our GATT server delivered: the three well-formed writes, in order, and not the 7-byte one.
        let peerID = PeerIDBytes([0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88])!
        #expect(await writes.values == [
            PeerIDWrite(id: peerID),
            PeerIDWrite(id: peerID, reportedRSSI: -60, txPower: 4),
            PeerIDWrite(id: peerID),
        ])
        await host.close()
    }

    @Test(arguments: VirtualController.allCases)
    func ourCentralExchangesWithBumblePeripheral(_ controller: VirtualController) async throws {
        let link = try await VirtualRadio.launch(controller, controllers: 2)
        defer { link.stop() }
        let peripheral = try BumblePeer.start("tracer_peripheral.py", [
            "--transport", "tcp-client:127.0.0.1:\(link.ports[0])", "--id", "b1b2b3b4b5b6b7b8", "--connections", "1",
        ])
        let host = try await LEHostInteropTests.openHost(port: link.ports[1], id: Self.ourID, writes: CallbackRecorder())
        let advertisement = try #require(try await LEHostInteropTests.firstTracerAdvertisement(from: host))
        #expect(advertisement.data.txPowerLevel == 4)

        let connection = try await host.connect(to: advertisement.address, type: advertisement.addressType)
        #expect(try await connection.client.exchangeMTU() == 247)
        let ours = PeerIDWrite(id: Self.ourID, reportedRSSI: -55, txPower: 4)
        let theirs = try await TracerPeerExchange(bearer: connection.bearer).exchange(writing: ours)
        #expect(theirs == PeerIDBytes([0xB1, 0xB2, 0xB3, 0xB4, 0xB5, 0xB6, 0xB7, 0xB8])!)

        // Bumble's handles differ from ours (its GAP and GATT services come first): find them.
        let client = connection.client
        let service = try #require(try await client.discoverPrimaryServices(uuid: TracerService.serviceUUID).first)
        let characteristics = try await client.discoverCharacteristics(of: service)
        let writeHandle = try #require(characteristics.first { $0.uuid == TracerService.peerIDWriteCharacteristicUUID }?.valueHandle)
        await #expect(throws: GATTClientError.self) { try await client.writeValue(Array(repeating: 1, count: 7), handle: writeHandle) }
        do {
            _ = try await client.readValue(handle: writeHandle)
            Issue.record("reading the write characteristic succeeded")
        } catch {
            #expect("\(error)".contains("Read Not Permitted"), "got \(error)")
        }
        do {
            try await client.writeValue(Array(repeating: 2, count: 9), handle: writeHandle)
            Issue.record("a 9-byte write was accepted")
        } catch {
            #expect("\(error)".contains("Invalid Attribute Value Length"), "got \(error)")
        }

        await host.disconnect(connection)
        _ = await connection.disconnected()
        let report = try await peripheral.result()
        let accepted = try #require(report["writes"] as? [[String: Any]])
        #expect(accepted.map { $0["value"] as? String } == ["a1a2a3a4a5a6a7a8c904"])
        #expect(accepted.first?["with_response"] as? Bool == true)
        #expect(report["reads"] as? Int == 1)
        #expect((report["rejected_writes"] as? [Any])?.count == 2)
        await host.close()
    }
}
