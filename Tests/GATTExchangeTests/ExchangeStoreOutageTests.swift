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

/// Issue 38: the store cannot record the next id (a full disk). The node must go off the air at
/// the end of its window rather than keep its old id or broadcast one it did not record, and come
/// back by itself, with the id of the window then current, once the store works again. Sessions
/// on scripted controllers, the host's and the rotator's clocks moved by hand.
@Suite(.tags(.unit), .timeLimit(.minutes(1)))
struct ExchangeStoreOutageTests {
    /// An own-id history in memory whose writes fail, as on a full disk, while `failing` is set.
    final class FlakyHistory: OwnIDHistory {
        static let path = "/var/lib/tracer/tracer.db"
        let failing = Mutex(false)
        private let records = Mutex<[OwnID]>([])
        private let keys = Mutex<[UTCDay: DailyKey]>([:])
        var all: [OwnID] { records.withLock { $0 } }

        func latestOwnID() throws -> OwnID? { records.withLock { $0.last } }
        func recordOwnID(_ ownID: OwnID) throws {
            if failing.withLock({ $0 }) { throw StoreError.diskFull(path: Self.path) }
            records.withLock { $0.append(ownID) }
        }
        func dailyKey(for day: UTCDay, intervalSeconds: Int64, recordingIfAbsent newKey: DailyKey) throws -> DailyKey {
            if let key = keys.withLock({ $0[day] }) { return key }
            if failing.withLock({ $0 }) { throw StoreError.diskFull(path: Self.path) }
            return keys.withLock { keys in
                keys[day] = newKey
                return newKey
            }
        }
    }

    /// What the test's callbacks saw, in order.
    final class Seen<Element: Sendable>: Sendable {
        private let items = Mutex<[Element]>([])
        func append(_ item: Element) { items.withLock { $0.append(item) } }
        var all: [Element] { items.withLock { $0 } }
    }

    struct DiscardingSink: EncounterSink {
        func record(_ sighting: Sighting) async {}
    }

    /// Log records, to check what an outage logs at which level.
    final class Records: LogHandler, @unchecked Sendable {
        let lines = Mutex<[(Logger.Level, String)]>([])
        var metadata: Logger.Metadata = [:]
        var logLevel: Logger.Level = .trace
        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }
        func log(event: LogEvent) { lines.withLock { $0.append((event.level, "\(event.message)")) } }
        func levels(of message: String) -> [Logger.Level] { lines.withLock { $0.filter { $0.1 == message }.map(\.0) } }
    }

    /// Moves the clock to `deadline` (an offset from its start) once a sleeper waits for it, so
    /// that the clock never runs ahead of tasks that have not reached their wait yet: an HCI
    /// command's timeout (2 s) cannot pass while a loaded machine is slow to start a session.
    /// Requires that something waits for exactly that deadline (the supervisor's retry wait, the
    /// rotator's window end).
    static func advance(_ clock: ManualHostClock, to deadline: Duration, _ what: String) async throws {
        try #require(await eventually { clock.pendingDeadlines.contains(deadline) },
                     "nothing waits for \(deadline) (\(what)); pending: \(clock.pendingDeadlines), at \(clock.elapsed)")
        clock.advance(by: deadline - clock.elapsed)
    }

    /// The advertising commands (parameters, enable) the controller received. The host's start
    /// sets a random address of its own, which advertises nothing.
    static func advertisingCommands(_ controller: ScriptedController) -> Int {
        controller.state.withLock {
            $0.commands.filter { $0 == LESetAdvertisingParameters.opcode || $0 == LESetAdvertisingEnable.opcode }.count
        }
    }

    @Test func anIDThatCannotBeRecordedTakesTheNodeOffTheAirUntilTheStoreWorksAgain() async throws {
        let clock = ManualHostClock()
        // The first window starts with the clock: [T, T + 60).
        let windowStart: UnixSeconds = 1_800_000_000
        let wall = clock.wallClock(startingAt: windowStart)
        let history = FlakyHistory()
        let rotator = IDRotator(schedule: try RotationSchedule(intervalSeconds: 60), history: history, clock: wall)
        let controllers = Seen<ScriptedController>()
        var configuration = ExchangeConfiguration(scanPlan: .continuous)
        let records = Records()
        let session = ExchangeSession(
            transport: .tcp(host: "127.0.0.1", port: 1), rotator: rotator, sink: DiscardingSink(),
            configuration: configuration, logger: Logger(label: "test") { _ in records }, clock: clock,
            openTransport: { _ in
                let controller = ScriptedController()
                controllers.append(controller)
                return controller
            })
        let failures = Seen<ExchangeSession.Failure>()
        let starts = Seen<Int>()
        let supervisor = Task {
            await ExchangeSupervisor(session: session).run(
                onStart: { _, _ in starts.append(1) },
                onSessionEnded: { failure in failures.append(failure) })
        }
        defer { supervisor.cancel() }
        func controller(_ index: Int) -> ScriptedController? { controllers.all.count > index ? controllers.all[index] : nil }

        // The first session advertises the first id, recorded.
        #expect(await eventually { controller(0)?.state.withLock { $0.advertising } == true })
        let first = try #require(history.all.first)
        #expect(first.window == IDWindow(start: windowStart, end: windowStart + 60))

        // The disk fills; the window ends. The id of the next window cannot be recorded: the
        // session ends with a typed failure, and the radio is off with the old id's window.
        history.failing.withLock { $0 = true }
        try await Self.advance(clock, to: .seconds(60), "the rotator's window end")
        #expect(await eventually { !failures.all.isEmpty }, "the session went on with an id whose window ended")
        let failure = try #require(failures.all.first)
        guard case .idNotRecorded(.diskFull(let path)) = failure else {
            Issue.record("the session ended with \(failure), not idNotRecorded(diskFull)")
            return
        }
        #expect(path == FlakyHistory.path)
        #expect("\(failure)".contains("free some space"), "\(failure)")
        #expect(!"\(failure)".contains("kept in memory"), "nothing is kept for an id: \(failure)")
        let firstController = try #require(controller(0))
        #expect(await eventually { firstController.state.withLock { !$0.advertising && $0.isClosed } },
                "the old id stayed on the air after its window")
        #expect(history.all == [first], "an id was recorded while the store failed: \(history.all)")
        let commandsOfFirst = firstController.state.withLock { $0.commands.count }

        // While the store fails, the supervisor retries after 1, 2, 4, then 5 s; each retry ends
        // before it touches the radio: no transport opened, no HCI command sent, no id on the air.
        var retryAt: Duration = .seconds(60)
        for wait in [1, 2, 4, 5, 5].map({ Duration.seconds($0) }) {
            retryAt += wait
            try await Self.advance(clock, to: retryAt, "the supervisor's retry after \(wait)")
        }
        #expect(await eventually { failures.all.count == 6 }, "the supervisor did not retry: \(failures.all)")
        #expect(controllers.all.count == 1, "a retry opened the transport while the store failed")
        #expect(firstController.state.withLock { $0.commands.count } == commandsOfFirst, "a retry sent an HCI command")
        #expect(starts.all.count == 1)
        #expect(failures.all.allSatisfy { if case .idNotRecorded = $0 { true } else { false } })
        // The outage is logged once as an error; its repeats only at debug.
        let outageLevels = records.levels(of: "not advertising: the next id could not be recorded; retrying")
        #expect(outageLevels == [.error], "\(outageLevels)")
        #expect(records.levels(of: "the next id still cannot be recorded; retrying").count == 5)

        // Space returns: at the next retry (5 s after the last), a session records the id of the
        // window that is current, and advertises it from that id's address.
        history.failing.withLock { $0 = false }
        try await Self.advance(clock, to: retryAt + .seconds(5), "the supervisor's retry after 5 s")
        #expect(await eventually { starts.all.count == 2 }, "the node did not come back at the first retry after the store worked again")
        let next = try #require(history.all.last)
        #expect(history.all.count == 2)
        #expect(next.window == IDWindow(start: windowStart + 60, end: windowStart + 120), "\(next.window)")
        let current = try #require(controllers.all.last)
        #expect(controllers.all.count == 2)
        #expect(await eventually { current.state.withLock { $0.advertising } })
        let address = session.addresses.address(for: next)
        #expect(current.state.withLock { $0.randomAddress } == address.littleEndianBytes, "the new session advertises from another id's address")
    }

    /// An own-id history whose writes wait, as SQLite waits up to its busy timeout for a database
    /// another program holds locked, while `held` is set.
    final class SlowHistory: OwnIDHistory {
        let held = Mutex(false)
        let waiting = Mutex(false)
        private let records = Mutex<[OwnID]>([])
        var all: [OwnID] { records.withLock { $0 } }

        func latestOwnID() throws -> OwnID? { records.withLock { $0.last } }
        func recordOwnID(_ ownID: OwnID) throws {
            // Blocks its thread as SQLite's busy wait does, bounded so that a failing test ends.
            let deadline = ContinuousClock.now + .seconds(20)
            while held.withLock({ $0 }), ContinuousClock.now < deadline {
                waiting.withLock { $0 = true }
                usleep(2_000)
            }
            waiting.withLock { $0 = false }
            records.withLock { $0.append(ownID) }
        }
        func dailyKey(for day: UTCDay, intervalSeconds: Int64, recordingIfAbsent newKey: DailyKey) throws -> DailyKey { newKey }
    }

    /// A locked database makes recording the next id take seconds: the ended id goes off the air
    /// at its window's end, not when the store answers, and the next one comes on once recorded.
    /// Before, the old id stayed on the air until the write returned (up to SQLite's 5 s busy
    /// timeout).
    @Test func anIDWhoseSuccessorIsSlowToRecordGoesOffTheAirAtItsWindowsEnd() async throws {
        let clock = ManualHostClock()
        let windowStart: UnixSeconds = 1_800_000_000
        let history = SlowHistory()
        let rotator = IDRotator(schedule: try RotationSchedule(intervalSeconds: 60), history: history, clock: clock.wallClock(startingAt: windowStart))
        let controllers = Seen<ScriptedController>()
        var configuration = ExchangeConfiguration(scanPlan: .continuous)
        let session = ExchangeSession(
            transport: .tcp(host: "127.0.0.1", port: 1), rotator: rotator, sink: DiscardingSink(),
            configuration: configuration, logger: Logger(label: "test") { _ in SwiftLogNoOpLogHandler() }, clock: clock,
            openTransport: { _ in
                let controller = ScriptedController()
                controllers.append(controller)
                return controller
            })
        let supervisor = Task { await ExchangeSupervisor(session: session).run(onStart: { _, _ in }, onSessionEnded: { _ in }) }
        defer {
            history.held.withLock { $0 = false }
            supervisor.cancel()
        }
        #expect(await eventually { controllers.all.first?.state.withLock { $0.advertising } == true })
        let controller = try #require(controllers.all.first)
        let first = try #require(history.all.first)

        history.held.withLock { $0 = true }
        try await Self.advance(clock, to: .seconds(60), "the rotator's window end")
        #expect(await eventually { history.waiting.withLock { $0 } }, "the rotator did not start recording the next id")
        #expect(await eventually { controller.state.withLock { !$0.advertising } },
                "the ended id stayed on the air while its successor was being recorded")
        #expect(controller.state.withLock { $0.randomAddress } == session.addresses.address(for: first).littleEndianBytes,
                "the address changed before the next id was recorded")

        history.held.withLock { $0 = false }
        #expect(await eventually { history.all.count == 2 })
        let next = try #require(history.all.last)
        #expect(next.window == IDWindow(start: windowStart + 60, end: windowStart + 120))
        #expect(await eventually { controller.state.withLock { $0.advertising } }, "the next id did not come on the air")
        #expect(controller.state.withLock { $0.randomAddress } == session.addresses.address(for: next).littleEndianBytes)
        #expect(controllers.all.count == 1, "the session ended: \(controllers.all.count) controllers opened")
    }
}
