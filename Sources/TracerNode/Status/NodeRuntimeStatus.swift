import Foundation
import BLEHost
import GATTExchange
import IDRotation
import PositiveListFormat
#if canImport(Glibc)
import Glibc
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

    /// True when the node runs on its controller but cannot be heard or cannot hear.
    var isDegraded: Bool { state == .running && radio?.isDegraded == true }

    /// True when the process that wrote the file still runs: a killed node leaves "running"
    /// behind, and after a reboot its pid may belong to another process, so the heartbeat (every
    /// 30 s) must be recent too.
    var processIsAlive: Bool {
        let heartbeatIsRecent = SystemWallClock().now() - updatedAt < 90
        return state != .stopped && heartbeatIsRecent && (kill(pid, 0) == 0 || errno == EPERM)
    }

    static func read(from path: String) -> NodeRuntimeStatus? {
        guard let data = FileManager.default.contents(atPath: path) else { return nil }
        return try? JSONDecoder().decode(NodeRuntimeStatus.self, from: data)
    }
}

/// Keeps the status file current: on every state change, and every 30 s so that a reader can
/// tell a live node from one that hung.
actor NodeStatusRecorder {
    private let path: String
    private var status: NodeRuntimeStatus
    private let clock = SystemWallClock()

    init(path: String, transport: TransportSpec) {
        self.path = path
        let now = SystemWallClock().now()
        status = NodeRuntimeStatus(
            pid: getpid(), startedAt: now, updatedAt: now, transport: "\(transport)", state: .starting)
    }

    func started(_ host: LEHost) async {
        let info = await host.controller
        status.state = .running
        status.lastError = nil
        status.controller = .init(
            address: "\(info.publicAddress)", hciVersion: Int(info.version.hciVersion),
            manufacturer: Int(info.version.companyIdentifier))
        write()
    }

    func sessionEnded(_ failure: ExchangeSession.Failure) {
        status.state = .reconnecting
        status.lastError = "\(failure)"
        if case .controllerStuck(let reason) = failure {
            let count = (status.controllerResets?.count ?? 0) + 1
            status.controllerResets = .init(count: count, lastAt: clock.now(), lastReason: reason)
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
    }

    func runHeartbeat() async {
        while (try? await Task.sleep(for: .seconds(30))) != nil { write() }
    }

    private func write() {
        status.updatedAt = clock.now()
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        // Best effort: a full disk must not stop the node, and the store reports that anyway.
        guard let bytes = try? encoder.encode(status) else { return }
        try? AtomicFile.write(Array(bytes), to: path, mode: 0o600)
    }
}
