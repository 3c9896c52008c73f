import Foundation
import BLEHost
import GATTExchange
import IDRotation
import Logging
import PositiveListFormat
#if canImport(Glibc)
import Glibc
import TracerCore
#endif

/// What a running node says about itself, in a small JSON file beside its database, so that
/// `tracer status` (another process) can show it. It holds no ids.
struct NodeRuntimeStatus: Codable, Equatable {
    enum State: String, Codable {
        case starting, running, reconnecting, stopped
    }

    struct Controller: Codable, Equatable {
        var address: String
        var hciVersion: Int
        var manufacturer: Int
    }

    /// The controller resets the node made because the controller was stuck
    /// (`ExchangeSession.Failure.controllerStuck`).
    struct ControllerResets: Codable, Equatable {
        var count: Int
        var lastAt: UnixSeconds
        var lastReason: String
    }

    /// A problem of the store that keeps the node from recording, since when, in words with the
    /// fix (`StoreError.whileRunning`).
    struct StoreOutage: Codable, Equatable {
        var since: UnixSeconds
        var problem: String
    }

    var pid: Int32
    var startedAt: UnixSeconds
    var updatedAt: UnixSeconds
    var transport: String
    var state: State
    var controller: Controller?
    /// Why the last controller session ended, while reconnecting.
    var lastError: String?
    /// Whether advertising and scanning are off although wanted; absent in files of older nodes.
    var radio: RadioCondition?
    /// Absent until the node first resets its controller, and in files of older nodes.
    var controllerResets: ControllerResets?
    /// The store could not record the next id, so the node stopped advertising (its session
    /// ended and is retried); absent while ids are recorded, and in files of older nodes.
    var idNotRecorded: StoreOutage?
    /// The encounter log cannot write: sightings are kept in memory until it can.
    var encountersNotWritten: StoreOutage?
    /// Since when the node has had no controller session (state `reconnecting`, or since its
    /// start when no session has started yet); absent while a session runs, and in older files.
    var reconnectingSince: UnixSeconds?
    /// The radio's time over the last hour and day of this run (`RadioTimeAccount`); absent in
    /// files of older nodes.
    var radioTime: RadioTime?
    /// When the exchange last completed a step: its session's start, then each audit (every
    /// 15 s, `ProximityExchange`); what `watchdogWithheld` holds against a node that runs but is
    /// held by one operation that never ends. Absent before the first session, and in older files.
    var exchangeProgressAt: UnixSeconds?

    struct RadioTime: Codable, Equatable {
        var lastHour: RadioTimeSummary
        var lastDay: RadioTimeSummary
    }

    /// How long a node may be reconnecting before `tracer status` counts it as a problem (exit 1).
    /// A routine controller reset keeps it off the air under 2 s (`ExchangeSupervisor.maximumResetBackoff`
    /// plus the re-initialisation), and such resets are frequent in crowds; a lost controller's
    /// first retries come after 1, 2 and 4 s. Monitoring that polls `tracer status` must not flap
    /// on those, yet hear within seconds of a controller gone for good: 10 s.
    static let reconnectingIsAProblemAfter: Int64 = 10

    /// True when the node runs on its controller but cannot be heard or cannot hear.
    var isDegraded: Bool { state == .running && radio?.isDegraded == true }

    /// What keeps a live node from advertising, scanning or recording, most serious first, each
    /// as "not advertising since TIME: why and what to do"; empty when it does all three.
    func problems(now: UnixSeconds) -> [String] {
        func since(_ time: UnixSeconds) -> String { Output.ago(time, now: now) }
        var problems: [String] = []
        if let outage = idNotRecorded {
            problems.append("not advertising since \(since(outage.since)): \(outage.problem)")
        }
        if let reconnecting = reconnectingProblem(now: now) { problems.append(reconnecting) }
        if isDegraded, let radio {
            problems += [("advertising", radio.advertising), ("scanning", radio.scanning)].compactMap { role, outage in
                outage.map { "not \(role) since \(since($0.since)): \($0.reason)" }
            }
        }
        if let outage = encountersNotWritten {
            problems.append("not writing encounters since \(since(outage.since)): \(outage.problem)")
        }
        return problems
    }

    /// The problem of a node reconnecting for over `reconnectingIsAProblemAfter` (a store that
    /// cannot record the next id says more, and comes first); nil for a shorter reconnection,
    /// which `tracer status` shows without counting it, and in files of older nodes.
    func reconnectingProblem(now: UnixSeconds) -> String? {
        guard state == .reconnecting, idNotRecorded == nil, let since = reconnectingSince,
              now - since > Self.reconnectingIsAProblemAfter else { return nil }
        return "not advertising or scanning since \(Output.ago(since, now: now)): reconnecting to \(transport): \(lastError ?? "controller lost")"
    }

    /// True when the process that wrote the file still runs: a killed node leaves "running"
    /// behind, and after a reboot its pid may belong to another process, so the heartbeat (every
    /// 30 s) must be recent too.
    var processIsAlive: Bool { state != .stopped && heartbeatIsRecent && pidExists }

    /// The heartbeat is stale but the writer's pid still exists: most likely the node runs and
    /// cannot update this file (a full disk on a file system where even the in-place overwrite
    /// fails), possibly the pid now belongs to another process. Never "not running" then.
    var isSilentButPresent: Bool { state != .stopped && !heartbeatIsRecent && pidExists }

    /// A node may hold the controller and the store: it is alive, or silent but present. Every
    /// command that would take the controller (doctor's radio checks, calibrate) or tell which
    /// adapter the node holds asks this, not `processIsAlive`: a node whose status went stale
    /// while it runs still holds its controller (on serial, an HCI Reset under it would break it).
    var mayBeRunning: Bool { processIsAlive || isSilentButPresent }

    private var heartbeatIsRecent: Bool { SystemWallClock().now() - updatedAt < 90 }
    private var pidExists: Bool { kill(pid, 0) == 0 || errno == EPERM }

    /// What `tracer status` can truthfully say of a node it has not heard from (`isSilentButPresent`)
    /// whose status file is `path`: since when, and how much room the disk holding it has.
    func silence(path: String, now: UnixSeconds) -> String {
        let directory = (path as NSString).deletingLastPathComponent
        var room = statvfs()
        let free = statvfs(directory.isEmpty ? "." : directory, &room) == 0 ? UInt64(room.f_bavail) * UInt64(room.f_frsize) : nil
        let cause = free.map { $0 < 64 * 1024
            ? "the disk holding it is full (\($0) bytes free); free some space"
            : "the disk holding it has \($0 / 1024) KiB free; check that the directory can be written" }
            ?? "check the disk holding it"
        return "not heard from since \(Output.ago(updatedAt, now: now)), though pid \(pid) still exists: its status file \(path) could not be updated; \(cause); or it hung, or after a reboot the pid is another process's: check `ps -p \(pid)`"
    }

    /// The status in the file, or nil when there is none. A node on a full disk overwrites the
    /// file in place (`NodeStatusRecorder`), so a read that finds it half-written tries again.
    static func read(from path: String) -> NodeRuntimeStatus? {
        for attempt in 0..<3 {
            guard let data = FileManager.default.contents(atPath: path) else { return nil }
            if let status = try? JSONDecoder().decode(NodeRuntimeStatus.self, from: data) { return status }
            if attempt < 2 { usleep(20_000) }
        }
        return nil
    }
}

/// Keeps the status file current: on every state change, and every 30 s so that a reader can
/// tell a live node from one that hung.
actor NodeStatusRecorder {
    private let path: String
    private var status: NodeRuntimeStatus
    /// Every status as it is recorded, whether or not the file could take it (a full disk must not
    /// keep systemd from hearing the node: `NodeWatchdog`); the newest only, for one reader.
    nonisolated let changes: AsyncStream<NodeRuntimeStatus>
    private let changesContinuation: AsyncStream<NodeRuntimeStatus>.Continuation
    /// Further followers' streams (`follow()`), each given every status as `changes` is.
    private var followers: [AsyncStream<NodeRuntimeStatus>.Continuation] = []
    private let clock: any WallClock
    /// When the exchange last made progress, on the clock that stops while the machine sleeps
    /// (CLOCK_MONOTONIC, as systemd's watchdog counts): `progressAge`.
    private var progressInstant: SuspendingClock.Instant?
    /// The status's `darkSince`, carried onto the same clock when it was last seen to change:
    /// `darkAge`.
    private var dark: (since: UnixSeconds, seenAt: SuspendingClock.Instant, ageWhenSeen: Int64)?
    private let logger: Logger
    /// Whether the status did not fit over the old file when last tried, so that this is logged once.
    private var overwriteDidNotFit = false
    private let radioTime: RadioTimeAccount?

    init(
        path: String, transport: TransportSpec, radioTime: RadioTimeAccount? = nil, clock: any WallClock = SystemWallClock(),
        logger: Logger = Logger(label: "tracer.node")
    ) {
        self.path = path
        self.radioTime = radioTime
        self.clock = clock
        self.logger = logger
        let now = clock.now()
        status = NodeRuntimeStatus(
            pid: getpid(), startedAt: now, updatedAt: now, transport: "\(transport)", state: .starting)
        (changes, changesContinuation) = AsyncStream.makeStream(bufferingPolicy: .bufferingNewest(1))
    }

    /// The status as last recorded.
    var current: NodeRuntimeStatus { status }

    /// A stream of its own for one more follower than `changes`' one reader (the metrics file
    /// besides the watchdog): the current status first, then every status recorded, the newest
    /// only; it ends when the node stops.
    func follow() -> AsyncStream<NodeRuntimeStatus> {
        let (stream, continuation) = AsyncStream.makeStream(of: NodeRuntimeStatus.self, bufferingPolicy: .bufferingNewest(1))
        continuation.yield(status)
        if status.state == .stopped { continuation.finish() } else { followers.append(continuation) }
        return stream
    }

    /// Writes the first status (state starting), padded, before the node uses its store: a node
    /// whose disk is full at its start is then seen by `tracer status` (as it is once the file
    /// exists: overwritten in place), and an older node's unpadded file is replaced by a padded one.
    /// A file that cannot be written at all is logged: the node runs and retries regardless, and
    /// `tracer status` cannot see it until the file can be written.
    func begin() {
        guard !write() else { return }
        logger.error("cannot write the status file, so `tracer status` cannot see this node (it says not running, or not heard from): is the disk full? The node runs and keeps trying", metadata: ["path": "\(path)"])
    }

    func started(_ host: LEHost) async {
        let info = await host.controller
        status.state = .running
        status.lastError = nil
        status.reconnectingSince = nil
        // A session starts only with its id recorded.
        status.idNotRecorded = nil
        status.controller = .init(
            address: "\(info.publicAddress)", hciVersion: Int(info.version.hciVersion),
            manufacturer: Int(info.version.companyIdentifier))
        status.exchangeProgressAt = clock.now()
        progressInstant = .now
        write()
    }

    /// The exchange completed a step at `time` (wall clock). Kept for the watchdog, which asks
    /// `current`, and written with the next change or heartbeat: a file write every 15 s for it
    /// alone would tell a reader nothing the heartbeat does not.
    func exchangeProgressed(at time: UnixSeconds) {
        status.exchangeProgressAt = time
        progressInstant = .now
    }

    /// Seconds since the exchange last made progress, measured on the monotonic clock: the wall
    /// clock set forward (NTP, a resume from suspend) must not read as an exchange held for hours
    /// until its next audit, a pause in the pings that systemd would take for a hang. Nil before
    /// the first session.
    var progressAge: Int64? {
        progressInstant.map { SuspendingClock.now - $0 }.map { $0.components.seconds }
    }

    /// Seconds the node has been dark (`NodeRuntimeStatus.darkSince`), measured on the monotonic
    /// clock from when the darkness was first recorded: a wall clock set forward (NTP on a board
    /// without a real-time clock, a resume) must not turn a routine reset into hours without a
    /// controller, nor one set back hide a controller lost for good. Nil while the node is not dark.
    var darkAge: Int64? {
        noteDarkness()
        return dark.map { $0.ageWhenSeen + (SuspendingClock.now - $0.seenAt).components.seconds }
    }

    /// Carries a new `darkSince` onto the monotonic clock, as seen now.
    private func noteDarkness() {
        guard let since = status.darkSince else {
            dark = nil
            return
        }
        guard dark?.since != since else { return }
        dark = (since, .now, max(0, clock.now() - since))
    }

    func sessionEnded(_ failure: ExchangeSession.Failure) {
        // Off the air since this first failure, or since the start when no session has run.
        if status.reconnectingSince == nil {
            status.reconnectingSince = status.state == .starting ? status.startedAt : clock.now()
        }
        status.state = .reconnecting
        status.lastError = "\(failure)"
        switch failure {
        case .controllerStuck(let reason):
            let count = (status.controllerResets?.count ?? 0) + 1
            status.controllerResets = .init(count: count, lastAt: clock.now(), lastReason: reason)
        case .idNotRecorded(let error):
            // The outage began at the first failure; later ones only update the reason.
            status.idNotRecorded = .init(since: status.idNotRecorded?.since ?? clock.now(), problem: error.whileRunning(.ids))
        default:
            break
        }
        // A session takes its id before it touches the controller, so one that failed for another
        // reason recorded it: the store works, and a stale "cannot record" must not hide the cause.
        switch failure {
        case .idNotRecorded, .rotation: break
        case .transport, .radio, .controllerStuck: status.idNotRecorded = nil
        }
        write()
    }

    /// The encounter log's writes failing (`error`) or working again (nil).
    func encounterWrites(failing error: StoreError?) {
        status.encountersNotWritten = error.map {
            .init(since: status.encountersNotWritten?.since ?? clock.now(), problem: $0.whileRunning(.encounters))
        }
        write()
    }

    func conditionChanged(_ condition: RadioCondition) {
        status.radio = condition
        write()
    }

    func stopped() {
        status.state = .stopped
        write()
        changesContinuation.finish()
        followers.forEach { $0.finish() }
    }

    func runHeartbeat() async {
        while (try? await Task.sleep(for: .seconds(30))) != nil { write() }
    }

    /// The file is padded with spaces to whole blocks of `block` bytes, so that when the disk is
    /// full and no new file can be made, the new status still overwrites the old one in place
    /// (which needs no new block): a node whose disk is full must still be able to say so.
    static let block = 4096

    /// Writes the status, padded, and says whether the file now holds it.
    @discardableResult
    private func write() -> Bool {
        noteDarkness()
        status.updatedAt = clock.now()
        status.radioTime = radioTime.map { .init(lastHour: $0.summary(over: .seconds(3600)), lastDay: $0.summary(over: .seconds(86_400))) }
        changesContinuation.yield(status)
        followers.forEach { $0.yield(status) }
        guard let json = Self.encoded(status) else { return false }
        let bytes = json + Array(repeating: UInt8(ascii: " "), count: Self.block - json.count % Self.block)
        do {
            try AtomicFile.write(bytes, to: path, mode: 0o600)
            overwriteDidNotFit = false
            return true
        } catch {
            // Best effort beyond this: a full disk must not stop the node.
            return overwriteInPlace(json)
        }
    }

    /// The file's JSON, before its padding.
    static func encoded(_ status: NodeRuntimeStatus) -> [UInt8]? {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return try? Array(encoder.encode(status))
    }

    /// Writes `json` over the start of the existing file, padded with spaces to the file's own
    /// size, when it fits in that size (an older node's unpadded file may be smaller than a block,
    /// or just over one); a reader that catches the file half-written tries again
    /// (`NodeRuntimeStatus.read`). Logs once when the status does not fit.
    private func overwriteInPlace(_ json: [UInt8]) -> Bool {
        let descriptor = open(path, O_WRONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return false }
        defer { close(descriptor) }
        var info = stat()
        guard fstat(descriptor, &info) == 0 else { return false }
        let size = Int(info.st_size)
        guard json.count <= size else {
            if !overwriteDidNotFit {
                logger.error("the status file could not be updated: no new file can be made (is the disk full?) and the status (\(json.count) bytes) does not fit in the old one (\(size) bytes); `tracer status` shows an older status until there is room", metadata: ["path": "\(path)"])
                overwriteDidNotFit = true
            }
            return false
        }
        let padded = json + Array(repeating: UInt8(ascii: " "), count: size - json.count)
        return padded.withUnsafeBytes { pwrite(descriptor, $0.baseAddress, $0.count, 0) } == size
    }
}
