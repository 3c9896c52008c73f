import CurlHTTP
import Foundation
import BLEHost
import GATTExchange
import IDRotation
import Logging
import Matching
import TracerCore

/// The checks of `tracer doctor`, in the order a user would debug: settings, store, clock,
/// radio, list server. Each returns a result instead of throwing, so one failure does not hide
/// the others.
struct DoctorChecks {
    let resolved: ResolvedSettings
    var settings: NodeSettings { resolved.settings }

    func store() -> DoctorCheck {
        let location = resolved.storeLocation
        guard location.exists else {
            return .skipped("store", "no database yet at \(location.path); `tracer run` creates it")
        }
        if ReadOnlyFileSystem.holds(location.path) {
            let error = StoreError.readOnlyFileSystem(path: location.path)
            return .fail("store", "nothing can be recorded in \(location.path): its file system refuses every write", fix: error.description)
        }
        do {
            let store = try NodeStore.open(location)
            let problems = try store.integrityCheck().filter { $0 != "ok" }
            guard problems.isEmpty else {
                return .fail("store", "\(location.path) fails SQLite's integrity check: \(problems.prefix(3).joined(separator: "; "))",
                             fix: "Keep a copy of the file, then `tracer export` what can be read and `tracer forget` to start afresh.")
            }
            return .pass("store", "\(location.path) opens and passes the integrity check")
        } catch {
            return .fail("store", UserMessage.describe(error), fix: "Check the path and its permissions, or choose another with --db.")
        }
    }

    /// What a running node reports it cannot record (its status file): the next id (so it does not
    /// advertise) or its encounters (kept in memory). Empty when no node runs or it records both.
    func runningNodeStore() -> [DoctorCheck] {
        guard let running = NodeRuntimeStatus.read(from: resolved.storeLocation.statusFilePath), running.processIsAlive else { return [] }
        let now = SystemWallClock().now()
        let retries = "the node retries by itself (at least every \(ExchangeSupervisor.storeRetryBound.components.seconds) s) and resumes as soon as it can write; nothing needs restarting."
        let outages = [
            ("ids", running.idNotRecorded, "cannot record its next id, so it has not been advertising"),
            ("encounter log", running.encountersNotWritten, "cannot write encounters"),
        ]
        return outages.compactMap { name, outage, what in
            outage.map {
                .fail(name, "the running node (pid \(running.pid)) \(what) since \(Output.ago($0.since, now: now))",
                      fix: $0.problem.capitalizingFirst + " Then " + retries)
            }
        }
    }

    /// Whether this node's radio is calibrated (`risk.rssi_correction` set by anything but the
    /// default). Not a failure: an uncalibrated node works, but of everything a node can do for
    /// its own verdict, calibrating buys the most under the calibration errors a fleet of mixed
    /// adapters has (docs/risk-model.md, "Calibration the node can do for itself").
    func calibration() -> DoctorCheck {
        let source = resolved.source(of: "risk.rssi_correction")
        let isDefault = if case .builtIn? = source { true } else { source == nil }
        guard let source, !isDefault else {
            return .info("calibration", "this node's radio is not calibrated (risk.rssi_correction is not set), so its verdicts assume it reads "
                + "signal strength like the phones the defaults were chosen on; in the stress runs, calibration errors of up to 8 dB per device cost a quarter of the exposures. "
                + "With another Tracer node 1 m away, run `tracer calibrate` and put the value it prints in the configuration file.")
        }
        return .pass("calibration", "risk.rssi_correction = \(settings.risk.rssiCorrection) dB (\(source))")
    }

    /// The local clock against plausible bounds and, when a server answered, against its Date header.
    func clock(serverDate: Date?) -> DoctorCheck {
        let now = Date()
        // Earlier than this release cannot be right; ids and windows would be stamped wrongly.
        let earliest = Date(timeIntervalSince1970: 1_767_225_600)  // 2026-01-01
        guard now > earliest else {
            return .fail("clock", "the system clock reads \(now), before this release", fix: "Set the clock (enable NTP: `timedatectl set-ntp true`).")
        }
        guard let serverDate else { return .pass("clock", "reads \(Output.isoTime(SystemWallClock().now())); no server time to compare with") }
        let skew = now.timeIntervalSince(serverDate)
        guard abs(skew) <= 120 else {
            return .fail("clock", "differs from the list server's clock by \(Int(skew)) s",
                         fix: "Enable time synchronisation (`timedatectl set-ntp true`); exposure matching allows only a few minutes of skew.")
        }
        return .pass("clock", "within \(Int(abs(skew).rounded())) s of the list server's clock")
    }

    /// Opens the controller, reads what it is, and starts and stops advertising and scanning,
    /// unless a running node holds it.
    func radio() async -> [DoctorCheck] {
        guard let transportText = settings.transport else {
            return [.fail("transport", "no transport configured", fix: "Set node.transport in tracer.toml, TRACER_TRANSPORT, or give --transport (for example hci0).")]
        }
        if let running = NodeRuntimeStatus.read(from: resolved.storeLocation.statusFilePath), running.mayBeRunning {
            guard running.processIsAlive else {
                // Silent but present: it may still hold the controller, so the radio is left alone.
                let path = resolved.storeLocation.statusFilePath
                return [.fail("transport", "the node " + running.silence(path: path, now: SystemWallClock().now()),
                              fix: "Radio checks skipped: they would take the controller from a node that may hold it. Make room for \(path), or stop the node (`systemctl stop tracer`), then run doctor again.")]
            }
            let state = "a running node (pid \(running.pid)) holds \(running.transport): \(running.state.rawValue)"
            return [.skipped("transport", state + "; radio checks skipped, the node's own reports used instead")] + Self.outages(of: running)
        }
        let spec: TransportSpec
        do { spec = try TransportSpec(parsing: transportText) } catch {
            return [.fail("transport", "\(error)", fix: "Use hci0, serial:DEVICE[,BAUD], tcp:HOST:PORT or unix:PATH.")]
        }
        let transport: any HCITransport
        do { transport = try openHCITransport(spec) } catch {
            return [.fail("transport", "\(spec): \(error)", fix: Self.transportFix(spec, takeAdapter: settings.takeAdapter))]
        }
        var checks: [DoctorCheck] = [.pass("transport", "\(spec) opened")]
        var logger = Logger(label: "tracer.doctor")
        logger.logLevel = .critical
        let host: LEHost
        do {
            host = try await LEHost.open(transport: transport, database: try GATTDatabase(services: []), logger: logger)
        } catch {
            checks.append(.fail("controller", "did not complete the LE initialisation: \(error)",
                                fix: "Check that the device is a Bluetooth LE controller (4.0 or later) and not in use by bluetoothd or another program."))
            return checks
        }
        let info = await host.controller
        checks.append(.pass("controller", "\(info.publicAddress), HCI version \(info.version.hciVersion), manufacturer \(info.version.companyIdentifier); LE commands answered"))
        do {
            try await host.setRandomAddress(.randomNonResolvablePrivate())
            try await host.startAdvertising(TracerService.advertisingData(txPower: 0))
            try await host.stopAdvertising()
            checks.append(.pass("advertising", "started and stopped"))
        } catch {
            checks.append(.fail("advertising", "\(error)", fix: "Another program may be advertising on this controller; stop it, or reset the adapter."))
        }
        do {
            _ = try await host.startScanning()
            try await host.stopScanning()
            checks.append(.pass("scanning", "started and stopped"))
        } catch {
            checks.append(.fail("scanning", "\(error)", fix: "Another program may be scanning on this controller; stop it, or reset the adapter."))
        }
        await host.close()
        return checks
    }

    /// The kernel's Bluetooth adapters: each one's address, whether it is powered, who holds it,
    /// and which to run the node on. Only looks; never changes an adapter.
    func adapters() -> [DoctorCheck] {
        let adapters: [KernelAdapter]
        do { adapters = try KernelAdapters.list() } catch {
            if error == .noKernelBluetooth {
                return [.skipped("adapters", "\(error): no hciN adapter here; use a tcp:, unix: or serial: transport")]
            }
            return [.skipped("adapters", "cannot list the kernel's adapters: \(error)")]
        }
        guard !adapters.isEmpty else {
            return [.info("adapters", "the kernel has Bluetooth but no adapter: plug one in, or attach a UART controller with `btattach -B /dev/ttyS1 -P h4`")]
        }
        let bluetoothd = Self.bluetoothdIsRunning()
        var nodeAdapter: (index: UInt16, pid: Int32)?
        if let running = NodeRuntimeStatus.read(from: resolved.storeLocation.statusFilePath), running.mayBeRunning,
           case .hciUserChannel(let index)? = try? TransportSpec(parsing: running.transport) {
            nodeAdapter = (index, running.pid)
        }
        var checks = adapters.map { adapter in
            DoctorCheck.info(adapter.name, adapter.describe(bluetoothdRunning: bluetoothd,
                                                            heldByThisNode: nodeAdapter?.index == adapter.index ? nodeAdapter?.pid : nil))
        }
        if let advice = KernelAdapter.recommendation(adapters, bluetoothdRunning: bluetoothd) {
            checks.append(.info("adapters", advice))
        }
        return checks
    }

    /// True when a process named bluetoothd runs (it powers every adapter the management interface manages).
    static func bluetoothdIsRunning() -> Bool {
        let processes = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        return processes.contains { entry in
            entry.allSatisfy(\.isNumber)
                && (try? String(contentsOfFile: "/proc/\(entry)/comm", encoding: .utf8))?.trimmingCharacters(in: .whitespacesAndNewlines) == "bluetoothd"
        }
    }

    /// A running node's outages, from its status file: the radio checks cannot run beside it,
    /// but what it reports fails them just the same.
    private static func outages(of running: NodeRuntimeStatus) -> [DoctorCheck] {
        guard running.isDegraded, let radio = running.radio else { return [] }
        let now = SystemWallClock().now()
        let persists = "if this persists, unplug and replug the adapter or check that no other program uses it."
        let roles = [
            ("advertising", radio.advertising, "advertise", "the node resets the controller after a minute"),
            ("scanning", radio.scanning, "scan", "the node retries every second, and restarting it resets the controller"),
        ]
        return roles.compactMap { name, outage, verb, remedy in
            outage.map {
                .fail(name, "the running node (pid \(running.pid)) has not been \(name) since \(Output.ago($0.since, now: now))",
                      fix: "The controller refuses to \(verb): \($0.reason); \(remedy); \(persists)")
            }
        }
    }

    /// Updates the list cache as `tracer check` would; returns the server's clock when it answered.
    func listServer() async -> (DoctorCheck, Date?) {
        let parts = MatchingParts(settings: settings)
        guard settings.serverURL != nil else {
            return (.skipped("list server", "no server.url configured; exposure checks are off"), nil)
        }
        var serverDate: Date?
        do {
            let url = try parts.serverURL()
            let http = parts.httpClient()
            serverDate = try? await http.perform(HTTPRequest(url: url + "/healthz")).header("date").flatMap(Self.httpDate)
            let updater = try parts.homeUpdater(try parts.followedLog(), http: http)
            let lock = try await parts.cache.lock()
            defer { lock.release() }
            let update = try await updater.update(holding: lock)
            return (.pass("list server", "\(redactedURL(url)) answered; \(update.summary)"), serverDate)
        } catch {
            // The server's clock still tells whether this machine's clock is the cause.
            let fix = if case .outdated = error as? ListUpdateError {
                "If the clock check below fails, correct this machine's clock; otherwise tell the list's operator that the list stopped being updated."
            } else {
                "Check server.url and server.public_key against what your health authority publishes, and the network."
            }
            return (.fail("list server", UserMessage.describe(error), fix: fix), serverDate)
        }
    }

    /// Updates each further list (`[lists.<name>]`) as `tracer check` would, one check each.
    func furtherListServers() async -> [DoctorCheck] {
        let parts = MatchingParts(settings: settings)
        let lists: [AuthorityList]
        do { lists = try parts.furtherLists(offline: false) } catch {
            return [.fail("lists", UserMessage.describe(error), fix: "Check the [lists.<name>] tables of the configuration file.")]
        }
        var checks: [DoctorCheck] = []
        for (list, configured) in zip(lists, settings.furtherLists) {
            let name = "list \(list.name)"
            do {
                let lock = try await list.cache.lock()
                defer { lock.release() }
                // Made with offline: false, every further list has its updater.
                if let update = try await list.updater?.update(holding: lock) {
                    checks.append(.pass(name, "\(redactedURL(configured.url.absoluteString)) answered; \(update.summary)"))
                }
            } catch {
                checks.append(.fail(
                    name, UserMessage.describe(error),
                    fix: "Check url and public_key of [lists.\(list.name)] against what that health authority publishes, and the network; until it updates, `tracer check` names this list as not up to date and gives no \"no exposure\"."))
            }
            if let last = list.log.store.evidence().last {
                checks.append(.fail(
                    name, "the key of the list \(list.name) signed two different lists of the same size; the latest proof is in \(last)",
                    fix: "That list's server shows different lists to different people; the contradicting checkpoint was refused. Send the directory (two signed checkpoints; nothing about you) to that health authority or a journalist. Once the authority has answered, remove it."))
            }
        }
        return checks
    }

    /// Whether the list's key was ever caught signing two histories (a split view): the one
    /// fault of a list server that a node can prove to anyone, so it is a failure to act on.
    func listSplitView() -> DoctorCheck? {
        let evidence = MatchingParts(settings: settings).logStore.evidence()
        guard let last = evidence.last else { return nil }
        return .fail(
            "list log", "the list's key signed two different lists of the same size (\(evidence.count == 1 ? "once" : "\(evidence.count) times"); the latest proof is in \(last))",
            fix: "The list server shows different lists to different people; the checkpoint that contradicted this node's was refused. Send the directory (two signed checkpoints; nothing about you) to your health authority or a journalist: anyone can check it with the list's public key. Once the authority has answered, remove it.")
    }

    private static func transportFix(_ spec: TransportSpec, takeAdapter: Bool) -> String {
        switch spec {
        case .hciUserChannel where takeAdapter:
            // Doctor only looks: it does not power off an adapter that desktop Bluetooth may be using.
            "node.take_adapter is set, so `tracer run` powers a busy adapter off and takes it; doctor does not. If the error is not EBUSY, run with CAP_NET_ADMIN (`sudo setcap cap_net_admin+ep $(command -v tracer)`)."
        case .hciUserChannel:
            "Bring the adapter down and stop bluetoothd (`sudo systemctl stop bluetooth; sudo btmgmt --index 0 power off`), or let the node power the adapter off itself at every start with `--take-adapter` (node.take_adapter = true; desktop Bluetooth on that adapter stops while the node runs); and run with CAP_NET_ADMIN (`sudo setcap cap_net_admin+ep $(command -v tracer)`)."
        case .serial:
            "Check the device path, that you are in the dialout group, and the baud rate."
        case .tcp, .unix:
            "Check that the controller (for example a virtual controller an emulator serves) is running and listening there."
        }
    }

    static func httpDate(_ text: String) -> Date? {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss zzz"
        return formatter.date(from: text)
    }
}
