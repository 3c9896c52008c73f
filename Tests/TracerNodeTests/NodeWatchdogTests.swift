import BLEHost
import Foundation
import Testing
import TestTiers
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
