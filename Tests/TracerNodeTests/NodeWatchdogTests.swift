import BLEHost
import BLEHostTestSupport
import Foundation
import GATTExchange
import IDRotation
import Testing
import TestTiers
import TracerCore
@testable import TracerNode
#if canImport(Glibc)
import Glibc
#endif

/// A datagram socket bound by the test where systemd's would be: a file system path, or an
/// abstract name ("@…"). What it receives is what systemd would.
final class NotifySocket {
    let address: String
    private let descriptor: Int32

    init(abstract: Bool) throws {
        let name = "tracer-notify-\(getpid())-\(UUID().uuidString.prefix(8))"
        address = abstract ? "@" + name : NSTemporaryDirectory() + "/" + name
        descriptor = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        var socketAddress = sockaddr_un()
        socketAddress.sun_family = sa_family_t(AF_UNIX)
        let bytes = abstract ? [0] + Array(name.utf8) : Array(address.utf8)
        withUnsafeMutableBytes(of: &socketAddress.sun_path) { $0.copyBytes(from: bytes) }
        let length = socklen_t(MemoryLayout<sa_family_t>.size + bytes.count + (abstract ? 0 : 1))
        let bound = withUnsafePointer(to: &socketAddress) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(descriptor, $0, length) }
        }
        guard descriptor >= 0, bound == 0 else { throw POSIXError(.init(rawValue: errno) ?? .EIO) }
        // Bounds only a failure: a datagram the node sent is already queued when its send returns.
        var limit = timeval(tv_sec: 5, tv_usec: 0)
        setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
    }

    deinit {
        close(descriptor)
        if !address.hasPrefix("@") { unlink(address) }
    }

    var environment: [String: String] { ["NOTIFY_SOCKET": address] }

    /// The next datagram, waiting for it (up to 5 s); nil when none came.
    func receive() -> String? { read(flags: 0) }

    /// The datagram already queued, without waiting; nil when there is none.
    func pending() -> String? { read(flags: Int32(MSG_DONTWAIT)) }

    private func read(flags: Int32) -> String? {
        var buffer = [UInt8](repeating: 0, count: 4096)
        let count = buffer.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, flags) }
        return count < 0 ? nil : String(decoding: buffer.prefix(count), as: UTF8.self)
    }
}

@Suite(.tags(.unit)) struct SystemdNotifierTests {
    @Test(arguments: [false, true])
    func sendsTheAssignmentsAsOneDatagramToAPathOrAnAbstractName(abstract: Bool) throws {
        let socket = try NotifySocket(abstract: abstract)
        let notifier = try #require(SystemdNotifier(environment: socket.environment))
        try notifier.send(["READY=1", "STATUS=running on hci0"])
        #expect(socket.receive() == "READY=1\nSTATUS=running on hci0")
        try notifier.send(["WATCHDOG=1"])
        #expect(socket.receive() == "WATCHDOG=1")
    }

    @Test func withoutNotifySocketThereIsNoNotifier() {
        #expect(SystemdNotifier(environment: [:]) == nil)
        #expect(SystemdNotifier(environment: ["NOTIFY_SOCKET": ""]) == nil)
        #expect(SystemdNotifier(environment: ["WATCHDOG_USEC": "2000000"]) == nil)
    }

    @Test func theWatchdogIsThisProcessesOnlyWhenWatchdogPidSaysSoOrIsAbsent() throws {
        let base = ["NOTIFY_SOCKET": "/run/systemd/notify", "WATCHDOG_USEC": "3000000"]
        #expect(try #require(SystemdNotifier(environment: base, pid: 42)).watchdogTimeout == .seconds(3))
        #expect(try #require(SystemdNotifier(environment: base.merging(["WATCHDOG_PID": "42"]) { $1 }, pid: 42)).watchdogTimeout == .seconds(3))
        #expect(try #require(SystemdNotifier(environment: base.merging(["WATCHDOG_PID": "41"]) { $1 }, pid: 42)).watchdogTimeout == nil)
        #expect(try #require(SystemdNotifier(environment: ["NOTIFY_SOCKET": "/run/systemd/notify"], pid: 42)).watchdogTimeout == nil)
        #expect(try #require(SystemdNotifier(environment: base.merging(["WATCHDOG_USEC": "soon"]) { $1 }, pid: 42)).watchdogTimeout == nil)
    }

    @Test func anAddressThatIsNeitherAPathNorAnAbstractNameIsATypedFailure() throws {
        let notifier = try #require(SystemdNotifier(environment: ["NOTIFY_SOCKET": "vsock:2:1234"]))
        #expect(throws: SystemdNotifier.Failure.unsupportedAddress("vsock:2:1234")) { try notifier.send(["READY=1"]) }
        let tooLong = "/" + String(repeating: "x", count: 200)
        #expect(throws: SystemdNotifier.Failure.unsupportedAddress(tooLong)) {
            try #require(SystemdNotifier(environment: ["NOTIFY_SOCKET": tooLong])).send(["READY=1"])
        }
    }

    @Test func aSocketNobodyListensOnIsASendFailureThatNamesIt() throws {
        let notifier = try #require(SystemdNotifier(environment: ["NOTIFY_SOCKET": "/nonexistent/notify"]))
        #expect(throws: SystemdNotifier.Failure.sendFailed(address: "/nonexistent/notify", errno: ENOENT)) { try notifier.send(["READY=1"]) }
    }
}

@Suite(.tags(.unit)) struct NodeWatchdogTests {
    static let now: Int64 = 1_800_000_000
    static let limit: Int64 = 180

    static func status(_ state: NodeRuntimeStatus.State, startedAgo: Int64 = 3600) -> NodeRuntimeStatus {
        NodeRuntimeStatus(pid: 1, startedAt: now - startedAgo, updatedAt: now, transport: "hci0", state: state)
    }

    static func withheld(_ status: NodeRuntimeStatus) -> String? {
        status.watchdogWithheld(now: now, darkLimit: limit)
    }

    @Test func aRunningNodeWhoseRadioWorksIsHealthyEvenWithItsEncounterWritesFailing() {
        var status = Self.status(.running)
        #expect(Self.withheld(status) == nil)
        status.encountersNotWritten = .init(since: Self.now - 7200, problem: "the disk is full")
        #expect(Self.withheld(status) == nil, "a store outage the node mends by itself must not restart it")
    }

    @Test func reconnectingCountsOnlyOnceOverTheLimit() {
        var status = Self.status(.reconnecting)
        status.lastError = "HCI command Reset not answered within 2 seconds"
        status.reconnectingSince = Self.now - Self.limit
        #expect(Self.withheld(status) == nil, "exactly at the limit is still the node's own time")
        status.reconnectingSince = Self.now - Self.limit - 1
        let reason = Self.withheld(status)
        #expect(reason?.contains("reconnecting to hci0: HCI command Reset not answered") == true, "\(reason ?? "nil")")
    }

    @Test func aNodeDarkBecauseItsStoreCannotRecordItsIdIsHealthy() {
        var status = Self.status(.reconnecting)
        status.reconnectingSince = Self.now - 7200
        status.idNotRecorded = .init(since: Self.now - 7200, problem: "the disk holding /var/lib/tracer is full")
        #expect(Self.withheld(status) == nil)
    }

    @Test func aNodeThatNeverHadASessionCountsFromItsStart() {
        #expect(Self.withheld(Self.status(.starting, startedAgo: 100)) == nil)
        #expect(Self.withheld(Self.status(.starting, startedAgo: 181)) != nil)
    }

    @Test func advertisingOrScanningOffTooLongCountsFromTheEarliestOutage() {
        var status = Self.status(.running)
        status.radio = RadioCondition()
        status.radio?.scanning = .init(since: Self.now - 100, reason: "HCI command LE Set Scan Enable not answered")
        #expect(Self.withheld(status) == nil)
        status.radio?.advertising = .init(since: Self.now - 200, reason: "HCI command LE Set Advertising Parameters not answered")
        #expect(status.darkSince == Self.now - 200)
        #expect(Self.withheld(status)?.contains("not advertising: HCI command LE Set Advertising Parameters not answered") == true)
        status.radio?.advertising = nil
        status.radio?.scanning?.since = Self.now - 181
        #expect(Self.withheld(status)?.contains("not scanning") == true)
    }

    /// Issue 38: the flags say advertising and scanning are on, yet one operation holds the
    /// controller: only the exchange's progress (its audit, every 15 s) shows it.
    @Test func aRunningNodeWithoutProgressOfItsExchangeForOverTheLimitIsWithheld() {
        var status = Self.status(.running)
        status.radio = RadioCondition()
        status.exchangeProgressAt = Self.now - Self.limit
        #expect(Self.withheld(status) == nil, "exactly at the limit is still the node's own time")
        status.exchangeProgressAt = Self.now - Self.limit - 1
        let reason = Self.withheld(status)
        #expect(reason?.contains("no progress of the exchange since \(Output.localTime(Self.now - Self.limit - 1))") == true, "\(reason ?? "nil")")
        status.exchangeProgressAt = Self.now - 15
        #expect(Self.withheld(status) == nil, "an audit within the limit is progress")
    }

    /// The dark limit may be set as low as 5 s, shorter than the audits' period: progress is then
    /// held to `minimumProgressLimit`, or a working node's pings stop between two audits (as they
    /// did in the kernel bed with a 10 s limit), while the flags keep the short limit.
    @Test func aShortDarkLimitDoesNotShortenTheWaitForProgress() {
        let short: Int64 = 10
        var status = Self.status(.running)
        status.exchangeProgressAt = Self.now - 27
        #expect(status.watchdogWithheld(now: Self.now, darkLimit: short) == nil)
        status.exchangeProgressAt = Self.now - NodeRuntimeStatus.minimumProgressLimit
        #expect(status.watchdogWithheld(now: Self.now, darkLimit: short) == nil)
        status.exchangeProgressAt = Self.now - NodeRuntimeStatus.minimumProgressLimit - 1
        #expect(status.watchdogWithheld(now: Self.now, darkLimit: short)?.contains("no progress of the exchange") == true)
        status.exchangeProgressAt = Self.now
        status.radio = RadioCondition()
        status.radio?.advertising = .init(since: Self.now - 11, reason: "HCI command LE Set Advertising Parameters not answered")
        #expect(status.watchdogWithheld(now: Self.now, darkLimit: short)?.contains("no working controller") == true)
    }

    /// The wall clock set forward (NTP, a resume from suspend) makes the last progress look hours
    /// old until the next audit; the monotonic age the recorder keeps does not, so the pings go on
    /// (one withheld ping is a gap systemd takes for a hang). The monotonic age rules when given.
    @Test func aWallClockSetForwardIsNotAnExchangeWithoutProgress() {
        var status = Self.status(.running)
        status.exchangeProgressAt = Self.now - 7200
        #expect(Self.withheld(status) != nil, "by the wall clock alone, two hours without progress")
        #expect(status.watchdogWithheld(now: Self.now, darkLimit: Self.limit, progressAge: 10) == nil)
        #expect(status.watchdogWithheld(now: Self.now, darkLimit: Self.limit, progressAge: Self.limit) == nil)
        #expect(status.watchdogWithheld(now: Self.now, darkLimit: Self.limit, progressAge: Self.limit + 1)?.contains("no progress of the exchange") == true)
        // And a wall clock set back does not hide a real stall.
        status.exchangeProgressAt = Self.now + 3600
        #expect(status.watchdogWithheld(now: Self.now, darkLimit: Self.limit, progressAge: Self.limit + 1) != nil)
    }

    /// The same for darkness: a node reconnecting since a wall-clock time that a clock set forward
    /// makes hours old is not dark for hours when the monotonic age says seconds; and a clock set
    /// back does not hide a controller lost for longer than the limit.
    @Test func aWallClockSetForwardIsNotDarknessAndOneSetBackDoesNotHideIt() {
        var status = Self.status(.reconnecting)
        status.reconnectingSince = Self.now - 7200
        #expect(Self.withheld(status)?.contains("no working controller") == true, "by the wall clock alone, two hours dark")
        #expect(status.watchdogWithheld(now: Self.now, darkLimit: Self.limit, darkAge: 10) == nil)
        #expect(status.watchdogWithheld(now: Self.now, darkLimit: Self.limit, darkAge: Self.limit) == nil)
        status.reconnectingSince = Self.now + 3600
        #expect(Self.withheld(status) == nil, "by the wall clock alone, dark since the future")
        #expect(status.watchdogWithheld(now: Self.now, darkLimit: Self.limit, darkAge: Self.limit + 1)?.contains("no working controller") == true)
    }

    /// The recorder measures darkness on the monotonic clock from when it recorded it: the wall
    /// clock stepping two hours forward while the node reconnects (NTP on a board without a
    /// real-time clock) leaves the dark age at seconds, so the pings go on.
    @Test func theRecorderCountsDarknessOnTheMonotonicClock() async throws {
        let directory = NSTemporaryDirectory() + "/tracer-dark-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let clock = NodeMetricsRenderingTests.SetClock(Self.now)
        let recorder = NodeStatusRecorder(path: directory + "/status.json", transport: try TransportSpec(parsing: "hci0"), clock: clock)
        await recorder.begin()
        #expect(await recorder.darkAge.map { $0 <= 1 } == true, "starting: dark since the start")
        await recorder.sessionEnded(.rotation("no controller yet"))
        clock.set(Self.now + 7200)
        let age = try #require(await recorder.darkAge)
        #expect(age <= 5, "the wall clock's step is not darkness: \(age) s")
        let status = await recorder.current
        #expect(status.watchdogWithheld(now: clock.now(), darkLimit: Self.limit, progressAge: await recorder.progressAge, darkAge: age) == nil)
        #expect(status.watchdogWithheld(now: clock.now(), darkLimit: Self.limit) != nil, "the wall clock alone would withhold the pings")
        await recorder.stopped()
        #expect(await recorder.darkAge == nil)
    }

    @Test func progressCountsOnlyWhileRunning() {
        // A session that ended left its last progress behind: reconnecting is judged by its own time.
        var status = Self.status(.reconnecting)
        status.exchangeProgressAt = Self.now - 7200
        status.reconnectingSince = Self.now - 10
        #expect(Self.withheld(status) == nil)
        // A store outage ends sessions too, and is the node's to mend.
        status.reconnectingSince = Self.now - 7200
        status.idNotRecorded = .init(since: Self.now - 7200, problem: "the disk holding /var/lib/tracer is full")
        #expect(Self.withheld(status) == nil)
        // An older node's file has no progress at all.
        status = Self.status(.running)
        #expect(status.exchangeProgressAt == nil && Self.withheld(status) == nil)
    }

    @Test func aStoppedNodeIsNeverWithheld() {
        var status = Self.status(.stopped)
        status.reconnectingSince = Self.now - 7200
        #expect(Self.withheld(status) == nil)
    }

    @Test func pingsWhileHealthyAndStopsWithAReasonWhenNot() async throws {
        let socket = try NotifySocket(abstract: false)
        let watchdog = NodeWatchdog(notifier: try #require(SystemdNotifier(environment: socket.environment)), darkLimit: Self.limit, logger: .init(label: "test"))
        var status = Self.status(.running)
        #expect(await watchdog.watchdogTick(status, now: Self.now))
        #expect(socket.pending() == "WATCHDOG=1")
        #expect(socket.pending() == nil)

        status.state = .reconnecting
        status.lastError = "the controller is being reset: advertising has been off"
        status.reconnectingSince = Self.now - 200
        #expect(await !watchdog.watchdogTick(status, now: Self.now))
        let said = try #require(socket.pending())
        #expect(said.hasPrefix("STATUS=reconnecting to hci0 since") && said.contains("not answering the watchdog: no working controller since"), "\(said)")
        #expect(await !watchdog.watchdogTick(status, now: Self.now + 1))
        #expect(socket.pending() == nil, "an unhealthy node pinged, or said the same again")

        status.state = .running
        status.reconnectingSince = nil
        #expect(await watchdog.watchdogTick(status, now: Self.now + 2))
        #expect(socket.pending() == "STATUS=running on hci0")
        #expect(socket.pending() == "WATCHDOG=1")
    }

    @Test func readyOnceTheFirstSessionStartedOrFailedAndStatusOnlyWhenItsWordsChange() async throws {
        let socket = try NotifySocket(abstract: true)
        let watchdog = NodeWatchdog(notifier: try #require(SystemdNotifier(environment: socket.environment)), darkLimit: Self.limit, logger: .init(label: "test"))
        var status = Self.status(.starting)
        await watchdog.observe(status)
        #expect(socket.pending() == "STATUS=starting on hci0")
        status.state = .reconnecting
        status.reconnectingSince = Self.now
        status.lastError = "no adapter hci0"
        await watchdog.observe(status)
        #expect(socket.pending() == "READY=1\nSTATUS=reconnecting to hci0 since \(Output.localTime(Self.now)): no adapter hci0")
        status.updatedAt += 30
        await watchdog.observe(status)
        #expect(socket.pending() == nil, "a heartbeat changed nothing")
        status.state = .running
        await watchdog.observe(status)
        #expect(socket.pending() == "STATUS=running on hci0")
    }

    @Test func theLoopPingsFollowingTheRecorderAndSaysStoppingWhenCancelled() async throws {
        let socket = try NotifySocket(abstract: false)
        var environment = socket.environment
        environment["WATCHDOG_USEC"] = "100000"
        let notifier = try #require(SystemdNotifier(environment: environment))
        let directory = NSTemporaryDirectory() + "/tracer-watchdog-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let recorder = NodeStatusRecorder(path: directory + "/status.json", transport: try TransportSpec(parsing: "hci0"))
        let watchdog = NodeWatchdog(notifier: notifier, darkLimit: Self.limit, logger: .init(label: "test"))
        let loop = Task { await watchdog.run(following: recorder) }
        await recorder.begin()
        // The first ping and the first status are independent: either may come first.
        let first = [socket.receive(), socket.receive()]
        #expect(Set(first) == ["STATUS=starting on hci0", "WATCHDOG=1"], "\(first)")
        loop.cancel()
        await loop.value
        var last: String?
        while let next = socket.pending() { last = next }
        #expect(last == "STOPPING=1\nSTATUS=stopping")
    }
}

/// Issue 38 with a controller: one LE Create Connection that the controller never completes holds
/// it, while advertising and scanning stay on and the status shows no outage. The pings must stop
/// once the exchange has made no progress for the dark limit, and come back when the node's own
/// remedy (the attempt's timeout and cancel) frees the controller. The remedy is made slower than
/// the dark limit here (120 s against 60 s); in a node it is 1.5 s against 180 s.
@Suite(.tags(.unit), .timeLimit(.minutes(1))) struct NodeWatchdogStuckOperationTests {
    static let wallStart: UnixSeconds = 1_800_000_000
    static let darkLimit = NodeRuntimeStatus.minimumProgressLimit
    static let peer = BluetoothAddress(string: "3A:00:00:00:00:0A")!

    /// Where the exchange's progress goes: the status's field, as `NodeStatusRecorder` keeps it.
    actor ProgressMarks {
        private(set) var last: UnixSeconds
        init(_ start: UnixSeconds) { last = start }
        func mark(_ time: UnixSeconds) { last = time }
    }

    struct DiscardingSink: EncounterSink {
        func record(_ sighting: Sighting) async {}
    }

    @Test func pingsStopWhileOneConnectionAttemptHoldsTheControllerAndResumeOnceTheNodeEndsIt() async throws {
        let clock = ManualHostClock()
        let wall = clock.wallClock(startingAt: Self.wallStart)
        let controller = ScriptedController()
        let identity = AdvertisedIdentity()
        var radio = LEHost.Configuration()
        // Sightings of the peer during the attempt must not end it early: only its timeout does.
        radio.unansweredAdvertisingWait = .seconds(3600)
        let (writes, writesContinuation) = AsyncStream.makeStream(of: PeerWriteEvent.self)
        let host = try await LEHost.open(
            transport: controller, databaseForLink: TracerGATTServer.databaseForLink(identity: identity, writes: writesContinuation),
            configuration: radio, clock: clock)
        var configuration = ExchangeConfiguration(scanPlan: .continuous)
        configuration.initiationSpread = .zero
        configuration.deferToPeerDelay = .zero
        configuration.connectionTimeout = .seconds(120)
        let marks = ProgressMarks(Self.wallStart)
        let exchange = ProximityExchange(
            host: host, identity: identity, peerWrites: writes, sink: DiscardingSink(), configuration: configuration,
            wallClock: wall, onProgress: { time in await marks.mark(time) })
        await exchange.rotate(to: OwnID(id: .random(), window: IDWindow(start: Self.wallStart, end: Self.wallStart + 3600)))
        try await exchange.start()

        let socket = try NotifySocket(abstract: false)
        let watchdog = NodeWatchdog(
            notifier: try #require(SystemdNotifier(environment: socket.environment)), darkLimit: Self.darkLimit, logger: .init(label: "test"))
        func tick() async -> Bool {
            var status = NodeRuntimeStatus(pid: 1, startedAt: Self.wallStart, updatedAt: wall.now(), transport: "hci0", state: .running)
            status.radio = await host.condition
            status.exchangeProgressAt = await marks.last
            return await watchdog.watchdogTick(status, now: wall.now())
        }
        func said() -> [String] {
            var all: [String] = []
            while let next = socket.pending() { all.append(next) }
            return all
        }

        // Heard until the attempt starts (a single report could come before the scanner listens).
        #expect(await eventually {
            controller.advertise(from: Self.peer, data: TracerService.advertisingData(txPower: 0))
            try? await Task.sleep(for: .milliseconds(20))
            return controller.initiatingPeer == Self.peer
        })
        #expect(await tick())
        // Every 5 s, as systemd's half period would: the audit due at 15 s waits behind the attempt.
        for second in stride(from: 5, through: 60, by: 5) {
            clock.advance(by: .seconds(5))
            #expect(await tick(), "withheld at \(second) s, within the dark limit")
            // Read at once: a datagram socket queues only a few (net.unix.max_dgram_qlen), then the sender waits.
            #expect(said().allSatisfy { $0 == "WATCHDOG=1" })
        }
        clock.advance(by: .seconds(5))
        #expect(await !tick(), "pinged after 65 s without progress, while one attempt holds the controller")
        let reason = said()
        #expect(reason.count == 1 && reason.first?.contains("not answering the watchdog: no progress of the exchange since") == true, "\(reason)")
        #expect(await host.condition == RadioCondition(), "the flags should show nothing wrong: that is the gap")
        #expect(controller.state.withLock { $0.advertising && $0.scanning && $0.initiating != nil })
        for second in stride(from: 70, through: 115, by: 5) {
            clock.advance(by: .seconds(5))
            #expect(await !tick(), "pinged at \(second) s, while the attempt still holds the controller")
        }
        clock.advance(by: .seconds(5))
        // At 120 s the attempt times out and is cancelled (the controller ends it with 0x02); the
        // audit that waited behind it runs, and its progress brings the pings back.
        #expect(await eventually { await marks.last == Self.wallStart + 120 }, "the audit did not run once the attempt ended")
        #expect(await tick())
        #expect(said() == ["STATUS=running on hci0", "WATCHDOG=1"])
        #expect(controller.state.withLock { $0.attemptTimeline } == ["create \(Self.peer)", "cancel", "ended 0x2"])
        await exchange.stop()
        await host.close()
    }
}
