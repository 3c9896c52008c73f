import Foundation
import IDRotation
import Synchronization
import Testing
import TestTiers
@testable import BLEHost
import BLEHostTestSupport
@testable import GATTExchange

/// A crowd of nodes on `SimulatedAir` and one `ManualHostClock`: the exchange as `ExchangeSession`
/// wires it (host, GATT server, id rotation from the node's store, encounter log), minutes of duty
/// cycle and id windows in a few seconds. The same crowds on emulated radios are in `CrowdTests`.
@Suite(.tags(.unit), .timeLimit(.minutes(1)))
struct SimulatedCrowdTests {
    /// Ids rotate every two minutes; the wall clock starts one second into a window.
    static let rotationInterval: Int64 = 120
    static let wallStart: UnixSeconds = 1_800_000_000 + 1

    /// One node's parts, as `ExchangeSession.run` puts them together, on the manual clock.
    struct Node {
        let link: SimulatedAir.Node
        let directory: String
        let store: NodeStore
        let log: EncounterLog
        let rotator: IDRotator
        let host: LEHost
        let exchange: ProximityExchange
        let rotation: Task<Void, Never>

        static func start(on air: SimulatedAir, clock: ManualHostClock, configuration: ExchangeConfiguration) async throws -> Node {
            let link = air.addNode()
            let directory = NSTemporaryDirectory() + "tracer-simcrowd-" + UUID().uuidString
            let store = try NodeStore.open(StoreLocation(path: directory + "/node.db", source: .flag, ownsDirectory: true))
            let log = EncounterLog(store: store)
            let rotator = IDRotator(
                schedule: try RotationSchedule(intervalSeconds: rotationInterval), history: store,
                clock: clock.wallClock(startingAt: wallStart))
            let identity = AdvertisedIdentity()
            let (writes, writesContinuation) = AsyncStream.makeStream(of: PeerWriteEvent.self, bufferingPolicy: .bufferingNewest(256))
            let host = try await LEHost.open(
                transport: link, databaseForLink: TracerGATTServer.databaseForLink(identity: identity, writes: writesContinuation),
                configuration: configuration.radio, clock: clock)
            let exchange = ProximityExchange(
                host: host, identity: identity, peerWrites: writes, sink: log, configuration: configuration,
                wallClock: rotator.clock, controllerTxPower: await host.readAdvertisingTxPower())
            await exchange.rotate(to: try await rotator.currentID())
            try await exchange.start()
            let rotation = Task<Void, Never> {
                // Ends only by cancellation, as in `ExchangeSession.run`.
                _ = try? await rotator.run { rotation in await exchange.rotate(to: rotation.current) }
            }
            return Node(link: link, directory: directory, store: store, log: log, rotator: rotator, host: host,
                        exchange: exchange, rotation: rotation)
        }

        /// The peers logged in our id window starting at `windowStart`, and how we learned each.
        func peersMet(inWindowStarting windowStart: UnixSeconds) async throws -> [UserID: LearnedBy] {
            try await log.flush()
            let encounters = try store.encounters().filter { $0.ownWindowStart == windowStart }
            return Dictionary(encounters.map { ($0.peer, $0.learnedBy) }, uniquingKeysWith: { $0.union($1) })
        }

        func stop() async {
            rotation.cancel()
            await rotation.value
            await exchange.stop()
            await host.close()
            try? await log.flush()
            try? FileManager.default.removeItem(atPath: directory)
        }
    }

    /// Moves the clock in 100 ms steps to `offset` from its start, the air carrying one advertising
    /// event of each node per step, and lets the tasks woken by each step run before the next.
    /// Every simulated 5 s, stops early once `done` holds.
    static func run(_ clock: ManualHostClock, _ air: SimulatedAir, to offset: Duration,
                    until done: () async throws -> Bool = { false }) async throws -> Bool {
        var steps = 0
        while clock.elapsed < offset {
            clock.advance(by: .milliseconds(100))
            air.step()
            try await Task.sleep(for: .milliseconds(2))
            steps += 1
            if steps % 50 == 0, try await done() { return true }
        }
        return try await done()
    }

    /// Runs the air until every pair has logged each other (or `offset`), then a moment more for the
    /// writes of the last links to be logged, and checks both; returns when everyone had met.
    static func expectEveryPairMeets(
        _ nodes: [Node], _ clock: ManualHostClock, _ air: SimulatedAir, by offset: Duration, in window: String, writesIn writesWindow: String
    ) async throws -> Duration {
        let met = try await run(clock, air, to: offset) { try await missingPairs(nodes).isEmpty }
        let missed = try await missingPairs(nodes)
        #expect(met, "pairs not logged \(window): \(missed.joined(separator: ", "))")
        let metAt = clock.elapsed
        _ = try await run(clock, air, to: metAt + .seconds(1))
        let unwritten = try await readsWithoutWrites(nodes)
        #expect(unwritten.isEmpty, "ids read with no write logged at the peer\(writesWindow): \(unwritten.joined(separator: ", "))")
        return metAt
    }

    /// Which pairs have not logged each other in the current window, as "i→j" (i did not log j).
    static func missingPairs(_ nodes: [Node]) async throws -> [String] {
        let ids = try await nodes.asyncMap { try await $0.rotator.currentID() }
        var missing: [String] = []
        for (index, node) in nodes.enumerated() {
            let met = try await node.peersMet(inWindowStarting: ids[index].window.start)
            for (other, id) in ids.enumerated() where other != index && met[id.id] == nil {
                missing.append("\(index)→\(other)")
            }
        }
        return missing
    }

    /// Reads without the write that goes with them, as "i→j" (i read j's id over a link, and j did not
    /// log i as written): the central writes its id on every link on which it reads, and a peer
    /// logs that write. Seeing each other's advertising later logs a peer too, so only this shows
    /// that writes arrive.
    static func readsWithoutWrites(_ nodes: [Node]) async throws -> [String] {
        let ids = try await nodes.asyncMap { try await $0.rotator.currentID() }
        var met: [[UserID: LearnedBy]] = []
        for (node, id) in zip(nodes, ids) { met.append(try await node.peersMet(inWindowStarting: id.window.start)) }
        var missing: [String] = []
        for (reader, readerMet) in met.enumerated() {
            for (peer, peerID) in ids.enumerated() where peer != reader {
                if readerMet[peerID.id]?.contains(.read) == true, met[peer][ids[reader].id]?.contains(.written) != true {
                    missing.append("\(reader)→\(peer)")
                }
            }
        }
        return missing
    }

    /// Six nodes on the default duty cycle's shape (10 s bursts, here 20 s pauses): every pair logs
    /// each other within a minute and a half of their first window, and again with the next ids,
    /// in the window after the rotation; every id read over a link went with a write the other way.
    @Test func everyPairMeetsInEveryWindow() async throws {
        let clock = ManualHostClock()
        let air = SimulatedAir()
        var configuration = ExchangeConfiguration()
        configuration.scanOnTime = .seconds(10)
        configuration.scanOffTime = .seconds(20)
        var nodes: [Node] = []
        for _ in 0..<6 { nodes.append(try await Node.start(on: air, clock: clock, configuration: configuration)) }
        let wallStarted = ContinuousClock.now

        let firstIDs = try await nodes.asyncMap { try await $0.rotator.currentID() }
        #expect(Set(firstIDs.map(\.id)).count == nodes.count)
        let firstMet = try await Self.expectEveryPairMeets(nodes, clock, air, by: .seconds(90), in: "in the first window", writesIn: "")

        // The window ends 119 s in; every node rotates, then meets everyone again under the new ids.
        _ = try await Self.run(clock, air, to: .seconds(121))
        let secondIDs = try await nodes.asyncMap { try await $0.rotator.currentID() }
        #expect(zip(firstIDs, secondIDs).allSatisfy { $0.id != $1.id && $1.window.start == $0.window.end }, "not every node rotated")
        let secondMet = try await Self.expectEveryPairMeets(
            nodes, clock, air, by: .seconds(121 + 90), in: "after the rotation", writesIn: " after the rotation")

        print("simulated crowd of \(nodes.count): everyone met by \(firstMet), and again by \(secondMet) (window 2 began at 119 s); "
              + "\(air.linksFormed) links; \(ContinuousClock.now - wallStarted) of real time")
        for node in nodes { await node.stop() }
    }
}
