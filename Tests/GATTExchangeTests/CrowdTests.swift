import Foundation
import IDRotation
import Testing
import TestTiers
@testable import BLEHost
import BLEHostTestSupport
@testable import GATTExchange
import TracerCore

/// Tracer nodes and Bumble peripherals (phone stand-ins) on one virtual radio: ten and five on Bumble's, six and
/// three on RootCanal's.
@Suite(.tags(.endToEnd), .serialized, .timeLimit(.minutes(3)))
struct CrowdTests {
    @Test func everyNodeLogsEveryPeerInTheWindowOnBumble() async throws {
        try await everyNodeLogsEveryPeerInTheWindow(.bumble)
    }

    /// Six nodes and three phones. The phones end links on which the central never speaks
    /// (`tracer_peripheral.py --silent-link-timeout`): RootCanal has no supervision timeout, and a node that resets
    /// its controller between its CONNECT_IND and the connection left a phone connected to nobody. It was out of
    /// CI while one run in eleven failed: a node whose connect request went unanswered kept advertising while its
    /// controller refused every peer (RootCanal clears a pending connection only by connecting or by HCI Reset),
    /// and each node it refused was stuck in turn. Since the node ends such an attempt at once, asks the same peer
    /// again off the air and resets otherwise (issue 12; BENCHMARKS.md, "Crowds on RootCanal"), 18 runs of 18
    /// passed (8 at 57c06bb on a machine loaded with a 20-node benchmark, 10 at 75d63bf), everyone meeting in
    /// 5-13 s.
    @Test
    func everyNodeLogsEveryPeerInTheWindowOnRootCanal() async throws {
        try await everyNodeLogsEveryPeerInTheWindow(.rootCanal)
    }

    func everyNodeLogsEveryPeerInTheWindow(_ controller: VirtualController) async throws {
        let nodeCount = controller == .bumble ? 10 : 6
        let phoneIDs = (1...(controller == .bumble ? 5 : 3)).map { String(repeating: String(format: "%02x", 0xd0 + $0), count: 8) }
        let link = try await VirtualRadio.launch(controller, controllers: nodeCount + phoneIDs.count)
        defer { link.stop() }
        let clock = ProximityExchangeTests.OneWindowClock()
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
        let everyoneMet = try await eventually(timeout: .seconds(90), every: .milliseconds(200)) {
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
            let missed = Set(peers).subtracting(met).map { peer in
                nodeIDs.firstIndex(of: peer).map { "node \($0)" } ?? phoneUserIDs.firstIndex(of: peer).map { "phone \($0)" } ?? "\(peer)"
            }.sorted()
            #expect(missed.isEmpty, "node \(index) missed \(missed.joined(separator: ", "))")
            #expect(met.isSubset(of: Set(peers)), "node \(index) logged an id nobody had")
            // One row per peer id in the window, however many sightings.
            #expect(encounters.count == met.count)
        }
        #expect(everyoneMet)
        print("\(controller): crowd of \(nodeCount) nodes and \(phoneIDs.count) phones: everyone met in \(elapsed)")
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
