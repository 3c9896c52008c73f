import Foundation
import IDRotation
import Synchronization
import Testing
import TestTiers
@testable import BLEHost
import BLEHostTestSupport
@testable import GATTExchange
import TracerCore

/// A transport that records every HCI command the host sends, for checking their order.
final class RecordingTransport: HCITransport {
    private let inner: any HCITransport
    private let commands = Mutex<[(opcode: UInt16, parameters: [UInt8])]>([])

    init(_ inner: any HCITransport) { self.inner = inner }

    var incoming: AsyncThrowingStream<HCIPacket, any Error> { inner.incoming }

    func send(_ packet: HCIPacket) async throws(HCITransportError) {
        if packet.type == .command, packet.body.count >= 3 {
            let opcode = UInt16(packet.body[0]) | UInt16(packet.body[1]) << 8
            commands.withLock { $0.append((opcode, Array(packet.body.dropFirst(3)))) }
        }
        try await inner.send(packet)
    }

    func close() async { await inner.close() }

    var sent: [(opcode: UInt16, parameters: [UInt8])] { commands.withLock { $0 } }
}

@Suite(.tags(.integration), .serialized, .timeLimit(.minutes(2)))
struct ExchangeResilienceTests {
    typealias Node = ProximityExchangeTests.Node

    static let setRandomAddress: UInt16 = 0x2005
    static let setAdvertisingEnable: UInt16 = 0x200A
    static let setScanEnable: UInt16 = 0x200C
    static let createConnection: UInt16 = 0x200D

    @Test(arguments: VirtualController.allCases)
    func addressChangesInLockstepWithTheID(_ controller: VirtualController) async throws {
        let link = try await VirtualRadio.launch(controller, controllers: 2)
        defer { link.stop() }
        let recorder = Mutex<RecordingTransport?>(nil)
        let node = try Node.start(port: link.ports[0], schedule: try RotationSchedule(intervalSeconds: 5), clock: SystemWallClock(),
                                  openTransport: { spec throws(HCITransportError) in
            let transport = RecordingTransport(try openHCITransport(spec))
            recorder.withLock { $0 = transport }
            return transport
        })
        // A peer to exchange with, so that rotations happen with links and scans under way.
        let peer = try BumblePeer.start("tracer_peripheral.py", [
            "--transport", "tcp-client:127.0.0.1:\(link.ports[1])", "--connections", "100", "--timeout", "30",
        ])
        defer { peer.stop() }
        // Two rotations or more (5 s windows): LEHost.open's address, then one per id. The rotator
        // records an id before the exchange sets its address, so the ids read right after match.
        let rotatedTwice = await eventually(timeout: .seconds(20), every: .milliseconds(100)) {
            (recorder.withLock { $0 }?.sent.filter { $0.opcode == Self.setRandomAddress }.count ?? 0) >= 4
        }
        #expect(rotatedTwice, "fewer than 2 rotations in 20 s with 5 s windows")
        let ownIDs = try node.store.ownIDs()
        await node.stop()

        let sent = try #require(recorder.withLock { $0 }).sent
        // LEHost.open sets a first address before any id exists; it never goes on air. After it,
        // one address per id.
        let addressChanges = Array(sent.indices.filter { sent[$0].opcode == Self.setRandomAddress }.dropFirst())
        #expect(addressChanges.count >= 3, "expected at least 2 rotations")
        #expect(addressChanges.count == ownIDs.count, "one address per id: \(addressChanges.count) addresses, \(ownIDs.count) ids")
        var advertising = false
        var scanning = false
        var lastAddressChange: Int?
        for (index, command) in sent.enumerated() {
            switch command.opcode {
            case Self.setAdvertisingEnable: advertising = command.parameters.first == 1
            case Self.setScanEnable: scanning = command.parameters.first == 1
            case Self.setRandomAddress:
                #expect(!advertising && !scanning, "address set while advertising or scanning (command \(index))")
                lastAddressChange = index
            default: break
            }
        }
        // Every address change is followed by advertising again before the next change.
        for (change, next) in zip(addressChanges, addressChanges.dropFirst()) {
            #expect(sent[change..<next].contains { $0.opcode == Self.setAdvertisingEnable && $0.parameters.first == 1 })
        }
        #expect(lastAddressChange != nil)
        let addresses = Set(addressChanges.map { sent[$0].parameters })
        #expect(addresses.count == addressChanges.count, "an address was reused")
        for parameters in addresses {
            // Non-resolvable private: the two most significant bits (last byte on the wire) are 00.
            #expect((parameters.last ?? 0xFF) & 0xC0 == 0)
        }
    }

    @Test(arguments: VirtualController.allCases)
    func controllerLossIsSurvivedAndNothingLoggedIsLost(_ controller: VirtualController) async throws {
        let first = try await VirtualRadio.launch(controller, controllers: 2)
        let ports = first.ports
        let node = try Node.start(port: ports[0], schedule: try RotationSchedule(), clock: ProximityExchangeTests.OneWindowClock())
        let before = try BumblePeer.start("tracer_peripheral.py", [
            "--transport", "tcp-client:127.0.0.1:\(ports[1])", "--id", "c1c1c1c1c1c1c1c1", "--connections", "10", "--timeout", "30",
        ])
        let beforeID = try UserID(hex: "c1c1c1c1c1c1c1c1")
        let metBefore = try await eventually(timeout: .seconds(15), every: .milliseconds(200)) {
            try await node.encounters().contains { $0.peer == beforeID }
        }
        #expect(metBefore)

        // The controller process dies; the node must notice, back off and come back.
        first.stop()
        before.stop()
        // The controller's absence is the thing under test: 2 s, which the node must ride out.
        try await Task.sleep(for: .seconds(2))
        let second = try await VirtualRadio.launch(controller, ports: ports)
        defer { second.stop() }
        let after = try BumblePeer.start("tracer_peripheral.py", [
            "--transport", "tcp-client:127.0.0.1:\(ports[1])", "--id", "c2c2c2c2c2c2c2c2", "--connections", "10", "--timeout", "40",
        ])
        defer { after.stop() }
        let afterID = try UserID(hex: "c2c2c2c2c2c2c2c2")
        let metAfter = try await eventually(timeout: .seconds(25), every: .milliseconds(200)) {
            try await node.encounters().contains { $0.peer == afterID }
        }
        #expect(metAfter, "the node did not resume exchanging after the controller came back")
        let peers = Set(try await node.encounters().map(\.peer))
        #expect(peers.contains(beforeID), "an encounter logged before the loss was lost")
        await node.stop()
    }
}
