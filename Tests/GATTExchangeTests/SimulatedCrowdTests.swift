import Foundation
import IDRotation
import Logging
import Synchronization
import Testing
import TestTiers
@testable import BLEHost
import BLEHostTestSupport
@testable import GATTExchange
import TracerCore

/// A crowd of nodes on `SimulatedAir` and one `ManualHostClock`, each node run as `tracer run` runs it:
/// `ExchangeSupervisor` and `ExchangeSession` (host, GATT server, id rotation from the node's store,
/// encounter log, a new session after a controller reset), minutes of duty cycle and id windows in
/// a few seconds. The same crowds on emulated radios are in `CrowdTests`.
@Suite(.tags(.unit), .timeLimit(.minutes(1)))
struct SimulatedCrowdTests {
    /// Ids rotate every two minutes; the wall clock starts one second into a window.
    static let rotationInterval: Int64 = 120
    static let wallStart: UnixSeconds = 1_800_000_000 + 1

    /// What a node's sessions did, as the supervisor tells it.
    enum SessionEvent: Sendable {
        case started
        case ended(ExchangeSession.Failure)
    }

    /// A node's session events in order, as the supervisor's callbacks report them.
    final class SessionRecord: Sendable {
        private let recorded = Mutex<[SessionEvent]>([])
        private let changes: AsyncStream<Void>
        private let continuation: AsyncStream<Void>.Continuation

        init() { (changes, continuation) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1)) }

        var events: [SessionEvent] { recorded.withLock { $0 } }

        func record(_ event: SessionEvent) {
            recorded.withLock { $0.append(event) }
            continuation.yield()
        }

        /// The supervisor returned: no event follows.
        func finish() { continuation.finish() }

        /// Waits for the first event (nil: the supervisor returned without one).
        func first() async -> SessionEvent? {
            for await _ in changes {
                if let first = events.first { return first }
            }
            return events.first
        }
    }

    /// One node: its store and log, and the supervisor running its sessions on its place on the air.
    struct Node {
        /// Its place on the air: every transport its sessions open is a controller there.
        let index: Int
        let directory: String
        let store: NodeStore
        let log: EncounterLog
        let rotator: IDRotator
        let supervisor: Task<Void, Never>
        let sessions: SessionRecord

        /// Starts the node's supervisor and returns once its first session has started.
        static func start(on air: SimulatedAir, clock: ManualHostClock, configuration: ExchangeConfiguration) async throws -> Node {
            let index = air.addNode().index
            let directory = NSTemporaryDirectory() + "tracer-simcrowd-" + UUID().uuidString
            let store = try NodeStore.open(StoreLocation(path: directory + "/node.db", source: .flag, ownsDirectory: true))
            let log = EncounterLog(store: store)
            let rotator = IDRotator(
                schedule: try RotationSchedule(intervalSeconds: rotationInterval), history: store,
                clock: clock.wallClock(startingAt: wallStart))
            var logger = Logger(label: "tracer.simcrowd.\(index)")
            logger.logLevel = ProcessInfo.processInfo.environment["TRACER_TEST_DEBUG"] == nil ? .warning : .trace
            let session = ExchangeSession(
                transport: .tcp(host: "simulated-air", port: UInt16(index)), rotator: rotator, sink: log,
                configuration: configuration, logger: logger, clock: clock, openTransport: { _ in air.openTransport(of: index) })
            let sessions = SessionRecord()
            // As `NodeService` runs it, telling the test when sessions start and end.
            let supervisor = Task {
                await ExchangeSupervisor(session: session).run(
                    onStart: { _, _ in sessions.record(.started) },
                    onSessionEnded: { failure in sessions.record(.ended(failure)) })
                sessions.finish()
            }
            let node = Node(index: index, directory: directory, store: store, log: log, rotator: rotator,
                            supervisor: supervisor, sessions: sessions)
            let started = await sessions.first()
            guard case .started = started else {
                await node.stop()
                throw SessionDidNotStart(event: started)
            }
            return node
        }

        struct SessionDidNotStart: Error { let event: SessionEvent? }

        /// The peers logged in our id window starting at `windowStart`, and how we learned each.
        func peersMet(inWindowStarting windowStart: UnixSeconds) async throws -> [UserID: LearnedBy] {
            try await log.flush()
            let encounters = try store.encounters().filter { $0.ownWindowStart == windowStart }
            return Dictionary(encounters.map { ($0.peer, $0.learnedBy) }, uniquingKeysWith: { $0.union($1) })
        }

        func stop() async {
            supervisor.cancel()
            await supervisor.value
            try? await log.flush()
            try? FileManager.default.removeItem(atPath: directory)
        }
    }

    /// Moves the clock in 100 ms steps to `offset` from its start, the air carrying one advertising
    /// event of each node per step, and lets the tasks woken by each step run before the next.
    /// Every `checkEvery` steps (5 s), stops early once `done` holds.
    static func run(_ clock: ManualHostClock, _ air: SimulatedAir, to offset: Duration, checkEvery: Int = 50,
                    until done: () async throws -> Bool = { false }) async throws -> Bool {
        var steps = 0
        while clock.elapsed < offset {
            clock.advance(by: .milliseconds(100))
            air.step()
            try await Task.sleep(for: .milliseconds(2))
            steps += 1
            if steps % checkEvery == 0, try await done() { return true }
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
        var configuration = ExchangeConfiguration(scanPlan: .minuteBursts)
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

    /// What goes wrong with a node's controller in `aNodeWhoseControllerIsResetStillMeetsEveryone`.
    enum ControllerTrouble: String, CaseIterable, Sendable, CustomTestStringConvertible {
        /// Its initiator goes deaf: the exchange sees an attempt time out towards a peer it still
        /// hears and ends the session, and the supervisor resets the controller.
        case stuckInitiator
        /// Its transport ends, as when the adapter is unplugged: the host sees the controller lost,
        /// and the supervisor reconnects.
        case droppedTransport

        var testDescription: String { rawValue }
    }

    /// The crowd of `everyPairMeetsInEveryWindow`, in which the controller of the first node to scan
    /// fails as its burst begins, before anyone has met it: the supervisor opens a new session on
    /// a fresh controller, which advertises the same id from the same address (`IDAddresses`), and
    /// every pair still logs each other in the window, each read with its write.
    @Test(arguments: ControllerTrouble.allCases)
    func aNodeWhoseControllerIsResetStillMeetsEveryone(_ trouble: ControllerTrouble) async throws {
        let clock = ManualHostClock()
        let air = SimulatedAir()
        var configuration = ExchangeConfiguration(scanPlan: .minuteBursts)
        configuration.scanOnTime = .seconds(10)
        configuration.scanOffTime = .seconds(20)
        var started: [Node] = []
        for _ in 0..<6 { started.append(try await Node.start(on: air, clock: clock, configuration: configuration)) }
        let nodes = started

        // Nobody meets before someone scans: the first to scan has met no one yet.
        let scanning = { nodes.first { node in air.controller(of: node.index).state.withLock { $0.scanning } } }
        #expect(try await Self.run(clock, air, to: .seconds(40), checkEvery: 1) { scanning() != nil }, "nobody began a scan burst")
        let reset = try #require(scanning())
        let id = try await reset.rotator.currentID()
        let address = air.controller(of: reset.index).state.withLock { $0.randomAddress }
        #expect(try await Self.missingPairs(nodes).count == nodes.count * (nodes.count - 1), "pairs met before anyone scanned")
        switch trouble {
        case .stuckInitiator: air.makeInitiatorStuck(reset.index)
        case .droppedTransport: await air.dropTransport(of: reset.index)
        }
        let resetAt = clock.elapsed

        let restarted = try await Self.run(clock, air, to: resetAt + .seconds(20), checkEvery: 1) { reset.sessions.events.count >= 3 }
        #expect(restarted, "no new session after the controller failed: \(reset.sessions.events)")
        let restartedAt = clock.elapsed
        let events = reset.sessions.events
        switch (trouble, events.dropFirst().first) {
        case (.stuckInitiator, .ended(.controllerStuck)?), (.droppedTransport, .ended(.radio(.controllerLost))?): break
        default: Issue.record("the session did not end as \(trouble) should end it: \(events)")
        }
        #expect(air.controllersOpened(of: reset.index) == 2, "the new session did not open a fresh controller")
        #expect(air.controller(of: reset.index).state.withLock { $0.randomAddress } == address,
                "the new session advertises from another address than its id had")
        #expect(try await reset.rotator.currentID() == id)

        let met = try await Self.expectEveryPairMeets(
            nodes, clock, air, by: .seconds(90), in: "after node \(reset.index)'s controller failed", writesIn: "")
        print("simulated crowd of \(nodes.count), \(trouble) at \(resetAt) in node \(reset.index): "
              + "\(restarted ? "a new session by \(restartedAt)" : "no new session"), everyone met by \(met)")
        for node in nodes { await node.stop() }
    }
}
