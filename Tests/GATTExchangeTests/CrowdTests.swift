import Foundation
import IDRotation
import Testing
@testable import GATTExchange

/// Tracer nodes and Bumble peripherals (phone stand-ins) on one virtual radio: ten and five on Bumble's, six and
/// three on RootCanal's.
@Suite(.serialized, .timeLimit(.minutes(3)))
struct CrowdTests {
    @Test func everyNodeLogsEveryPeerInTheWindowOnBumble() async throws {
        try await everyNodeLogsEveryPeerInTheWindow(.bumble)
    }

    /// Not in CI yet (issue 12 stays open): on RootCanal every connect request that loses the race for an
    /// advertising event leaves its node deaf until the node resets its controller, and the phones, which only
    /// advertise, draw every node at once. Six nodes and three phones met in 7 s in two runs alone on the machine,
    /// but in a third, under load, three nodes each missed two peers after 90 s: some nodes keep timing out without
    /// the sign that triggers the reset (ProximityExchange.connectionTimedOut). Ten nodes and five phones miss more.
    @Test(.disabled("flaky on RootCanal: issue 12, BENCHMARKS.md 'Crowds on RootCanal'"))
    func everyNodeLogsEveryPeerInTheWindowOnRootCanal() async throws {
        try await everyNodeLogsEveryPeerInTheWindow(.rootCanal)
    }

    func everyNodeLogsEveryPeerInTheWindow(_ controller: VirtualController) async throws {
        let nodeCount = controller == .bumble ? 10 : 6
        let phoneIDs = (1...(controller == .bumble ? 5 : 3)).map { String(repeating: String(format: "%02x", 0xd0 + $0), count: 8) }
        let link = try await VirtualRadio.launch(controller, controllers: nodeCount + phoneIDs.count)
        defer { link.stop() }
        let clock = ProximityExchangeTests.FrozenClock(time: SystemWallClock().now())
        var nodes: [ProximityExchangeTests.Node] = []
        for index in 0..<nodeCount {
            nodes.append(try .start(port: link.ports[index], schedule: try RotationSchedule(), clock: clock))
        }
        var phones: [BumblePeer] = []
        for (offset, id) in phoneIDs.enumerated() {
            phones.append(try BumblePeer.start("tracer_peripheral.py", [
                "--transport", "tcp-client:127.0.0.1:\(link.ports[nodeCount + offset])", "--id", id,
                "--address", String(format: "C0:00:00:00:0B:%02X", offset + 1), "--connections", "1000", "--timeout", "150",
            ]))
        }
        defer { phones.forEach { $0.stop() } }

        var expected: [[UserID]] = []
        let nodeIDs = try await nodes.asyncMap { try await $0.rotator.currentID().id }
        let phoneUserIDs = try phoneIDs.map { try UserID(hex: $0) }
        for index in 0..<nodeCount {
            expected.append(nodeIDs.enumerated().filter { $0.offset != index }.map(\.element) + phoneUserIDs)
        }
        let started = ContinuousClock.now
        let everyoneMet = try await ProximityExchangeTests.waitUntil(timeout: .seconds(90)) {
            for (node, peers) in zip(nodes, expected) {
                let met = Set(try await node.encounters().map(\.peer))
                if !met.isSuperset(of: peers) { return false }
            }
            return true
        }
        let elapsed = ContinuousClock.now - started
        for (index, (node, peers)) in zip(nodes, expected).enumerated() {
            let encounters = try await node.encounters()
            let met = Set(encounters.map(\.peer))
            #expect(met.isSuperset(of: peers), "node \(index) missed \(Set(peers).subtracting(met).count) peer(s)")
            #expect(met.isSubset(of: Set(peers)), "node \(index) logged an id nobody had")
            // One row per peer id in the window, however many sightings.
            #expect(encounters.count == met.count)
        }
        #expect(everyoneMet)
        print("\(controller.testDescription): crowd of \(nodeCount) nodes and \(phoneIDs.count) phones: everyone met in \(elapsed)")
        for node in nodes { await node.stop() }
    }
}

extension Array {
    func asyncMap<T>(_ transform: (Element) async throws -> T) async rethrows -> [T] {
        var results: [T] = []
        for element in self { results.append(try await transform(element)) }
        return results
    }
}
