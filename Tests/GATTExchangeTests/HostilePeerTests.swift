import Foundation
import IDRotation
import Testing
import TestTiers
@testable import BLEHost
import BLEHostTestSupport
@testable import GATTExchange
import TracerCore

/// Issue 4, "Hostile peers": a full Tracer node (store, encounter log, rotator, supervisor) on a virtual controller
/// (Bumble's or RootCanal's), a hostile Bumble device (Tests/Support/bumble/tracer_attacker.py) on another, and honest Bumble
/// peers (tracer_peripheral.py, tracer_central.py) on others. Each test checks that the attack fails, that nothing
/// from it reaches the node's log, and that the node keeps exchanging with the honest peers meanwhile.
///
/// The node runs on a frozen wall clock, so each test stays inside one id window (and so at one address).
@Suite(.tags(.integration), .serialized, .timeLimit(.minutes(2)))
struct HostilePeerTests {
    typealias Node = ProximityExchangeTests.Node

    // Ids of the honest Bumble peers, distinct per role so the node's log tells them apart.
    static let honestPeripheralID = "5eed00000000a001"
    static let honestCentralID = "5eed00000000c001"
    static let laterCentralID = "5eed00000000c002"

    // MARK: garbage-writer

    /// A central that writes garbage and wrong lengths, writes the read-only characteristic, hits bad handles and
    /// sends malformed and unknown PDUs. Every request gets the right ATT error, no command is answered, the link
    /// stays usable, nothing but well-formed id writes reaches the log, and honest peers are still logged.
    @Test(arguments: VirtualController.allCases)
    func garbageWriterGetsATTErrorsAndOnlyWellFormedWritesAreLogged(_ controller: VirtualController) async throws {
        try await Scenario.run(controller, controllers: 5) { scenario in
            let node = try scenario.startNode(controller: 0)
            let ourID = try await node.rotator.currentID()

            // An honest central first: proves the node serves, and tells us its address to aim the attack at
            // (the honest peripheral below also advertises the Tracer service and must not be the target).
            let first = try await scenario.spawn("tracer_central.py", controller: 1, [
                "--address", "C0:00:00:00:00:B1", "--write-id", Self.honestCentralID, "--timeout", "20",
            ]).result(timeout: .seconds(25))
            #expect(first["error"] == nil, "honest central failed before the attack: \(first)")
            #expect(first["read_id"] as? String == ourID.id.hex)
            let ourAddress = try #require(first["advertiser"] as? String, "no advertiser address in \(first)")

            // The attack, while an honest peripheral waits to be met by the node's central side. Seed 79 makes two
            // of the random-length garbage values 8 and 10 octets long: well-formed writes, which must be logged.
            let attacker = try scenario.spawn("tracer_attacker.py", controller: 2, [
                "--mode", "garbage-writer", "--target", ourAddress, "--seed", "79", "--op-timeout", "1", "--timeout", "40",
            ])
            let peripheral = try scenario.spawn("tracer_peripheral.py", controller: 3, [
                "--id", Self.honestPeripheralID, "--connections", "1", "--timeout", "30",
            ])
            let attack = try await attacker.result(timeout: .seconds(45))
            let honestPeripheral = try await peripheral.result(timeout: .seconds(35))

            // The node still serves an honest central after the attack.
            let later = try await scenario.spawn("tracer_central.py", controller: 4, [
                "--address", "C0:00:00:00:00:B3", "--target", ourAddress, "--write-id", Self.laterCentralID, "--timeout", "20",
            ]).result(timeout: .seconds(25))

            try Self.checkGarbageAnswers(attack)
            #expect(attack["link_dropped_by_peer"] as? Bool == false, "the node dropped the attacker's link: \(attack)")
            #expect(attack["id_read_after"] as? String == ourID.id.hex, "id not readable after the attack")
            #expect(honestPeripheral["error"] == nil && Self.writtenIDs(honestPeripheral).contains(ourID.id.hex),
                    "the node did not exchange with the honest peripheral during the attack: \(honestPeripheral)")
            #expect(later["error"] == nil && later["read_id"] as? String == ourID.id.hex,
                    "honest central after the attack: \(later)")

            let honest = try Set([Self.honestCentralID, Self.honestPeripheralID, Self.laterCentralID].map(UserID.init(hex:)))
            let logged = try await Self.waitForPeers(node, including: honest)
            let wellFormed = Self.wellFormedGarbageIDs(attack)
            #expect(logged.isSuperset(of: honest), "honest peers missing from the log: \(Self.hex(honest.subtracting(logged)))")
            // Only ids that arrived as well-formed (8 or 10 octet) writes to the write characteristic may be logged.
            #expect(logged.subtracting(honest).isSubset(of: wellFormed.accepted),
                    "logged ids from garbage: \(Self.hex(logged.subtracting(honest).subtracting(wellFormed.accepted)))")
            #expect(logged.isDisjoint(with: wellFormed.rejected),
                    "logged ids from rejected writes: \(Self.hex(logged.intersection(wellFormed.rejected)))")
            // Accepted write requests were answered with success, so the node must have logged them.
            #expect(wellFormed.acknowledged.count == 2, "seed 79 should yield an 8- and a 10-octet garbage write")
            #expect(wellFormed.acknowledged.isSubset(of: logged),
                    "acknowledged writes not logged: \(Self.hex(wellFormed.acknowledged.subtracting(logged)))")
        }
    }

    /// The answer the node must give to each step of the garbage-writer's plan (README, tracer_attacker.py).
    static func checkGarbageAnswers(_ attack: [String: Any]) throws {
        #expect(attack["error"] == nil, "garbage-writer failed: \(attack)")
        #expect(attack["service_found"] as? Bool == true && attack["setup_error"] is NSNull,
                "garbage-writer setup: \(attack["setup_error"] ?? "nil")")
        let handles = try #require(attack["handles"] as? [String: Any])
        let idHandle = try #require(int(handles["id"]))
        let writeHandle = try #require(int(handles["write"]))
        let log = try #require(attack["log"] as? [[String: Any]])
        #expect(log.count >= 90 && int(attack["attempts"]) == log.count, "the attack was cut short: \(log.count) steps")
        #expect(int(attack["answered_commands"]) == 0, "the node answered a command")
        #expect(int(attack["no_answer"]) == 0, "the node left a request unanswered")
        #expect((attack["late_or_unsolicited_answers"] as? [Any])?.isEmpty == true,
                "late or unsolicited answers: \(attack["late_or_unsolicited_answers"] ?? "nil")")

        var checked = 0
        for entry in log {
            let step = try #require(entry["step"] as? String)
            let answer = entry["answer"] as? String
            let words = step.split(separator: " ")
            let expected: Set<String>?
            if step.hasPrefix("write-cmd") || step == "malformed empty PDU" || step == "malformed unsolicited read response"
                || step == "malformed unsolicited confirmation" || step == "malformed signed write cmd"
                || step == "malformed unknown command 0x7f" {
                // Commands are never answered (Core Spec Vol 3 Part F 3.4.5.3, 3.3.1).
                #expect(answer == nil, "\(step) was answered: \(answer ?? "")")
                checked += 1
                continue
            } else if step.hasPrefix("write-req len ") {
                expected = ["error 0x0d"]
            } else if step.hasPrefix("write-req garbage len "), let length = Int(words.last ?? "") {
                // Random lengths: 8 and 10 octets are a well-formed id write, anything else the wrong length.
                expected = length == 8 || length == 10 ? ["opcode 0x13 (1 bytes)"] : ["error 0x0d"]
            } else if step == "read write-char" {
                expected = ["error 0x02"]
            } else if step == "prepare-write write-char" || step == "execute-write commit" {
                expected = ["error 0x06"]
            } else if step.hasPrefix("write-req id-char") {
                expected = ["error 0x03"]
            } else if step.hasPrefix("write-req handle ") || step.hasPrefix("read handle ") {
                let handle = try #require(UInt16(words.last?.dropFirst(2) ?? "", radix: 16), "\(step)")
                if handle == 0 || handle > max(idHandle, writeHandle) {
                    expected = ["error 0x01", "error 0x0a"]
                } else {
                    // A random handle that exists in our database: any answer but silence.
                    expected = nil
                }
            } else if step == "malformed read truncated handle" || step == "malformed write-req no handle"
                        || step == "malformed read-by-type 3-byte uuid" {
                expected = ["error 0x04"]
            } else if step == "malformed write-req over MTU" {
                expected = ["error 0x04", "error 0x0d"]
            } else if step.hasPrefix("malformed find-info") || step == "malformed read-by-group-type start>end" {
                expected = ["error 0x01"]
            } else if step == "malformed mtu 0 (second exchange)" {
                expected = nil
            } else if step == "malformed execute-write bad flags" {
                expected = ["error 0x04", "error 0x06"]
            } else if step == "malformed unknown request 0x3f" {
                expected = ["error 0x06"]
            } else {
                Issue.record("unexpected garbage-writer step \(step)")
                continue
            }
            checked += 1
            if let expected {
                #expect(answer.map(expected.contains) == true, "\(step): answered \(answer ?? "nothing"), expected \(expected.sorted())")
            } else {
                #expect(answer != nil, "\(step): no answer")
            }
        }
        #expect(checked == log.count)
        // The categories the issue names, in aggregate.
        let errors = attack["errors"] as? [String: Any] ?? [:]
        #expect((int(errors["0x0d"]) ?? 0) >= 7, "wrong-length writes: \(errors)")
        #expect((int(errors["0x03"]) ?? 0) == 3, "writes to the id characteristic: \(errors)")
        #expect((int(errors["0x01"]) ?? 0) + (int(errors["0x0a"]) ?? 0) >= 10, "bad handles: \(errors)")
        #expect((int(errors["0x04"]) ?? 0) >= 3, "malformed PDUs: \(errors)")
        #expect((int(errors["0x06"]) ?? 0) >= 1, "unknown request: \(errors)")
    }

    /// Ids the garbage-writer sent to the write characteristic: the first 8 octets of every 8/10-octet value
    /// (`accepted`; `acknowledged` when a Write Request was answered with success) and of every other length
    /// (`rejected`), plus anything written to the id characteristic (`rejected`).
    static func wellFormedGarbageIDs(_ attack: [String: Any]) -> (accepted: Set<UserID>, acknowledged: Set<UserID>, rejected: Set<UserID>) {
        var accepted = Set<UserID>(), acknowledged = Set<UserID>(), rejected = Set<UserID>()
        for entry in attack["log"] as? [[String: Any]] ?? [] {
            guard let step = entry["step"] as? String, let sent = entry["sent"] as? String,
                  step.hasPrefix("write-req") || step.hasPrefix("write-cmd"), !step.contains(" handle ") else { continue }
            // 1 opcode octet, 2 handle octets, then the value (the log keeps the first 24 octets).
            let bytes = Self.bytes(fromHex: String(sent.prefix(48).filter(\.isHexDigit)))
            guard bytes.count >= 3 + 8, let length = int(entry["len"]).map({ $0 - 3 }),
                  let id = try? UserID(bytes: bytes[3..<11]) else { continue }
            if step.contains("id-char") || (length != 8 && length != 10) {
                rejected.insert(id)
            } else {
                accepted.insert(id)
                if step.hasPrefix("write-req"), (entry["answer"] as? String)?.hasPrefix("opcode 0x13") == true {
                    acknowledged.insert(id)
                }
            }
        }
        return (accepted, acknowledged, rejected.subtracting(accepted))
    }

    // MARK: silent-peripheral

    /// A peripheral that advertises the Tracer service but never answers the id read. The node gives up on it after
    /// `exchangeTimeout`, logs nothing for it, and meanwhile logs the honest peripheral.
    @Test(arguments: VirtualController.allCases)
    func silentPeripheralIsAbandonedAfterTheExchangeTimeout(_ controller: VirtualController) async throws {
        try await Scenario.run(controller, controllers: 3) { scenario in
            let silent = try scenario.spawn("tracer_attacker.py", controller: 1, [
                "--mode", "silent-peripheral", "--connections", "1", "--duration", "25",
            ])
            let peripheral = try scenario.spawn("tracer_peripheral.py", controller: 2, [
                "--id", Self.honestPeripheralID, "--connections", "1", "--timeout", "30",
            ])
            let started = ContinuousClock.now
            let node = try scenario.startNode(controller: 0)
            let honest = try UserID(hex: Self.honestPeripheralID)

            let metHonest = try await eventually(timeout: .seconds(15), every: .milliseconds(200)) {
                try await node.encounters().contains { $0.peer == honest }
            }
            let honestAfter = ContinuousClock.now - started
            #expect(metHonest, "the node did not log the honest peripheral within 15 s")
            // Well before the silent exchange times out: the stuck exchange blocks nothing.
            #expect(honestAfter < ExchangeConfiguration().exchangeTimeout, "honest peripheral logged only after \(honestAfter)")

            let attack = try await silent.result(timeout: .seconds(30))
            _ = try await peripheral.result(timeout: .seconds(10))
            let limit = ExchangeConfiguration().exchangeTimeout + .seconds(2)
            let held = (attack["held_ms"] as? [Any] ?? []).compactMap(double)
            #expect(attack["error"] == nil, "silent-peripheral failed: \(attack)")
            #expect(int(attack["reads_received"]) ?? 0 >= 1, "the node never tried to read the silent peer's id")
            #expect(!held.isEmpty && int(attack["open_at_end"]) == 0, "the node still held the silent link: \(attack)")
            for ms in held {
                #expect(ms <= Double(limit.components.seconds) * 1000, "silent link held \(ms) ms, limit \(limit)")
            }
            #expect((attack["writes"] as? [Any])?.isEmpty == true, "the node wrote to a peer whose id it never read")

            // The attack's end, with the node having closed its link, comes after anything the
            // node could log from that link; its advertising alone logs nothing (an id is learned
            // only by a read or a write).
            let logged = Set(try await node.encounters().map(\.peer))
            #expect(logged == [honest], "logged: \(Self.hex(logged))")
        }
    }

    // MARK: link-holder

    /// A central that connects and then does nothing. The node drops it after `incomingLinkLifetime` (10 s), and
    /// serves honest peers in both roles while the link is held.
    @Test(arguments: VirtualController.allCases)
    func linkHolderIsDisconnectedAfterTheIncomingLinkLifetime(_ controller: VirtualController) async throws {
        try await Scenario.run(controller, controllers: 5) { scenario in
            let node = try scenario.startNode(controller: 0)
            let ourID = try await node.rotator.currentID()
            let first = try await scenario.spawn("tracer_central.py", controller: 1, [
                "--address", "C0:00:00:00:00:B1", "--write-id", Self.honestCentralID, "--timeout", "20",
            ]).result(timeout: .seconds(25))
            let ourAddress = try #require(first["advertiser"] as? String, "no advertiser address in \(first)")

            let holder = try scenario.spawn("tracer_attacker.py", controller: 2, [
                "--mode", "link-holder", "--target", ourAddress, "--duration", "20",
            ])
            // Honest peers while the link is held: a peripheral for the node's central side, and after a moment a
            // central for its peripheral side.
            let peripheral = try scenario.spawn("tracer_peripheral.py", controller: 3, [
                "--id", Self.honestPeripheralID, "--connections", "1", "--timeout", "30",
            ])
            try await Task.sleep(for: .seconds(2))
            let later = try await scenario.spawn("tracer_central.py", controller: 4, [
                "--address", "C0:00:00:00:00:B3", "--target", ourAddress, "--write-id", Self.laterCentralID, "--timeout", "20",
            ]).result(timeout: .seconds(25))
            let attack = try await holder.result(timeout: .seconds(40))
            _ = try await peripheral.result(timeout: .seconds(10))

            let lifetime = ExchangeConfiguration().incomingLinkLifetime
            #expect(lifetime == .seconds(10))
            #expect(attack["error"] == nil && attack["connected"] as? Bool == true, "link-holder: \(attack)")
            let after = double(attack["disconnected_after_ms"])
            #expect(after.map { (8000...14000).contains($0) } == true,
                    "idle link dropped after \(after.map { "\($0) ms" } ?? "never (held for the whole --duration)"): \(attack)")
            // Our side closes it with Remote User Terminated Connection.
            #expect(int(attack["reason"]) == Int(HCIStatusCode.remoteUserTerminatedConnection.rawValue), "reason \(attack["reason"] ?? "nil")")
            #expect(later["error"] == nil && later["read_id"] as? String == ourID.id.hex,
                    "honest central during the hold: \(later)")

            let honest = try Set([Self.honestCentralID, Self.honestPeripheralID, Self.laterCentralID].map(UserID.init(hex:)))
            let logged = try await Self.waitForPeers(node, including: honest)
            #expect(logged == honest, "logged: \(Self.hex(logged))")
        }
    }

    // MARK: flooder

    /// A central that connects and disconnects as fast as it can. An honest central still completes its exchange
    /// with the node during the flood, and the node logs it.
    ///
    /// RootCanal settles a race for one advertising event by the order in which the initiators' hosts attached
    /// (README in Tests/Support/rootcanal), where a real radio leaves it to chance: a flooder ahead of the honest
    /// central would win every event both answer, whatever the node does. So the honest central attaches first and
    /// starts scanning when the flood has run for 2 s. On Bumble chance decides (`virtual_link.py` shuffles), the
    /// flooder holds each link for a real link's shortest life, and an honest central that lost a race yet believes
    /// it connected connects again (README in Tests/Support/bumble, "Phantom links").
    @Test(arguments: VirtualController.allCases)
    func honestCentralExchangesDuringAConnectionFlood(_ controller: VirtualController) async throws {
        try await Scenario.run(controller, controllers: 3) { scenario in
            let node = try scenario.startNode(controller: 0)
            let ourID = try await node.rotator.currentID()
            let floodDuration = 8
            let waiting = try scenario.spawn("tracer_central.py", controller: 1, [
                "--write-id", Self.honestCentralID, "--timeout", "20", "--start-delay", "3",
            ])
            try await Task.sleep(for: .seconds(1))
            let flooder = try scenario.spawn("tracer_attacker.py", controller: 2, [
                "--mode", "flooder", "--duration", "\(floodDuration)",
            ])
            let floodLaunched = ContinuousClock.now
            let central = try await waiting.result(timeout: .seconds(25))
            let centralDone = ContinuousClock.now - floodLaunched
            let flood = try await flooder.result(timeout: .seconds(30))

            #expect(flood["error"] == nil, "flooder failed: \(flood)")
            #expect(int(flood["connections"]) ?? 0 >= 10, "no real flood: \(flood)")
            // The flood runs from its first connection (less than a second after launch) for floodDuration.
            #expect(centralDone < .seconds(floodDuration), "the honest central finished only after the flood")
            #expect(central["error"] == nil, "honest central failed during the flood: \(central)")
            #expect(central["read_id"] as? String == ourID.id.hex)
            let writes = central["writes"] as? [[String: Any]] ?? []
            #expect(writes.first?["result"] as? String == "ok", "honest id write: \(writes)")

            let honest = try UserID(hex: Self.honestCentralID)
            let logged = try await Self.waitForPeers(node, including: [honest])
            #expect(logged == [honest], "logged: \(Self.hex(logged))")
            #expect(try await node.encounters().first { $0.peer == honest }?.learnedBy.contains(.written) == true)
        }
    }

    // MARK: no-service

    /// A peripheral that advertises the Tracer UUID but hosts no Tracer service. Nothing is logged for it, the
    /// node backs off (2, 4, 8 s) instead of reconnecting at once, and the honest peripheral is logged.
    @Test(arguments: VirtualController.allCases)
    func noServicePeerIsBackedOffAndNotLogged(_ controller: VirtualController) async throws {
        try await Scenario.run(controller, controllers: 3) { scenario in
            let duration = 11
            let attacker = try scenario.spawn("tracer_attacker.py", controller: 1, [
                "--mode", "no-service", "--duration", "\(duration)",
            ])
            let peripheral = try scenario.spawn("tracer_peripheral.py", controller: 2, [
                "--id", Self.honestPeripheralID, "--connections", "1", "--timeout", "30",
            ])
            let node = try scenario.startNode(controller: 0)
            let honest = try UserID(hex: Self.honestPeripheralID)
            let attack = try await attacker.result(timeout: .seconds(duration + 15))
            _ = try await peripheral.result(timeout: .seconds(10))

            #expect(attack["error"] == nil, "no-service failed: \(attack)")
            let connections = int(attack["connections"]) ?? 0
            // Without backoff the node would reconnect every few hundred ms (dozens of links in 11 s).
            #expect((1...4).contains(connections), "the node connected \(connections) times in \(duration) s: \(attack)")
            #expect(int(attack["discovery_requests"]) ?? 0 >= 1, "the node never looked for the service")
            #expect(int(attack["open_at_end"]) == 0, "the node still holds a link to the no-service peer")

            let logged = try await Self.waitForPeers(node, including: [honest])
            #expect(logged == [honest], "logged: \(Self.hex(logged))")
        }
    }

    // MARK: replayer

    /// A peripheral that replays another node's id. What the node does: it logs the replayed id like any other (it
    /// cannot tell a replay from the original), in the same row as the original's sightings, since rows are kept
    /// per (peer id, own window). The defence is in matching, which only counts an id inside its validity window.
    @Test(arguments: VirtualController.allCases)
    func replayedIDIsLoggedInTheOriginalsRowOnly(_ controller: VirtualController) async throws {
        try await Scenario.run(controller, controllers: 3) { scenario in
            let replayedHex = Self.honestPeripheralID
            let replayed = try UserID(hex: replayedHex)
            let replayer = try scenario.spawn("tracer_attacker.py", controller: 1, [
                "--mode", "replayer", "--id", replayedHex, "--duration", "8",
            ])
            let node = try scenario.startNode(controller: 0)
            let ourID = try await node.rotator.currentID()

            // First the replayer alone: the id the node logs can only come from it.
            let loggedFromReplayer = try await eventually(timeout: .seconds(10), every: .milliseconds(200)) {
                try await node.encounters().contains { $0.peer == replayed }
            }
            #expect(loggedFromReplayer, "the node did not log the replayed id")
            let fromReplayer = try await node.encounters()
            #expect(fromReplayer.map(\.peer) == [replayed])
            #expect(fromReplayer.first?.learnedBy.contains(.read) == true)
            #expect(fromReplayer.first?.ownWindowStart == ourID.window.start)

            // Then the original owner of the id.
            let original = try await scenario.spawn("tracer_peripheral.py", controller: 2, [
                "--id", replayedHex, "--connections", "1", "--timeout", "20",
            ]).result(timeout: .seconds(25))
            #expect(original["error"] == nil && int(original["reads"]) == 1 && Self.writtenIDs(original).contains(ourID.id.hex),
                    "the node did not exchange with the original: \(original)")
            let attack = try await replayer.result(timeout: .seconds(20))
            #expect(attack["error"] == nil && attack["replayed_id"] as? String == replayedHex, "replayer: \(attack)")
            // One exchange with the replayer: an address whose id was learned is not connected to again.
            #expect(int(attack["connections"]) == 1 && int(attack["reads"]) == 1, "replayer: \(attack)")
            #expect(Self.writtenIDs(attack).contains(ourID.id.hex), "the node did not write its id to the replayer")

            let rows = try await node.encounters()
            let replayedRows = rows.filter { $0.peer == replayed }
            #expect(rows.count == 1 && replayedRows.count == 1, "rows: \(rows.map { ($0.peer.hex, $0.ownWindowStart) })")
            #expect(Set(rows.map(\.key)).count == rows.count, "more than one row per (id, window)")
            #expect((replayedRows.first?.sightings ?? 0) > (fromReplayer.first?.sightings ?? 0),
                    "the original's sightings did not go to the same row")
        }
    }

    // MARK: Helpers

    /// One virtual link, the node(s) and Bumble peers on it; everything is stopped when the body ends or throws.
    final class Scenario: @unchecked Sendable {
        // @unchecked: used by one test task only.
        let link: VirtualRadio
        private var peers: [BumblePeer] = []
        private var nodes: [Node] = []

        private init(link: VirtualRadio) { self.link = link }

        static func run(_ controller: VirtualController, controllers: Int, _ body: (Scenario) async throws -> Void) async throws {
            let scenario = Scenario(link: try await VirtualRadio.launch(controller, controllers: controllers))
            do {
                try await body(scenario)
            } catch {
                await scenario.tearDown()
                throw error
            }
            await scenario.tearDown()
        }

        func transport(_ controller: Int) -> String { "tcp-client:127.0.0.1:\(link.ports[controller])" }

        func startNode(controller: Int) throws -> Node {
            let node = try Node.start(
                port: link.ports[controller], schedule: try RotationSchedule(),
                clock: ProximityExchangeTests.OneWindowClock())
            nodes.append(node)
            return node
        }

        func spawn(_ script: String, controller: Int, _ arguments: [String]) throws -> BumblePeer {
            let peer = try BumblePeer.start(script, ["--transport", transport(controller)] + arguments)
            peers.append(peer)
            return peer
        }

        private func tearDown() async {
            for peer in peers { peer.stop() }
            for node in nodes { await node.stop() }
            link.stop()
        }
    }

    /// Waits (up to 10 s) until the node's log holds `expected`, then returns every peer id it logged.
    static func waitForPeers(_ node: Node, including expected: Set<UserID>) async throws -> Set<UserID> {
        _ = try await eventually(timeout: .seconds(10), every: .milliseconds(200)) {
            Set(try await node.encounters().map(\.peer)).isSuperset(of: expected)
        }
        return Set(try await node.encounters().map(\.peer))
    }

    /// The ids (hex) a Bumble peripheral recorded as written to it.
    static func writtenIDs(_ result: [String: Any]) -> Set<String> {
        Set((result["writes"] as? [[String: Any]] ?? []).compactMap { ($0["value"] as? String)?.prefix(16) }.map(String.init))
    }

    static func hex(_ ids: Set<UserID>) -> [String] { ids.map(\.hex).sorted() }

    static func bytes(fromHex text: String) -> [UInt8] {
        var bytes: [UInt8] = []
        var index = text.startIndex
        while let next = text.index(index, offsetBy: 2, limitedBy: text.endIndex), index < text.endIndex {
            guard let byte = UInt8(text[index..<next], radix: 16) else { break }
            bytes.append(byte)
            index = next
        }
        return bytes
    }
}

/// JSON numbers as Foundation hands them over (NSNumber or a Swift number); nil for null or absent.
private func double(_ value: Any?) -> Double? {
    switch value {
    case let number as NSNumber: return number.doubleValue
    case let number as Double: return number
    case let number as Int: return Double(number)
    default: return nil
    }
}

private func int(_ value: Any?) -> Int? { double(value).map { Int($0) } }
