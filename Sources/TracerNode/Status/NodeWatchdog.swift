import Foundation
import Logging
import TracerCore

extension NodeRuntimeStatus {
    /// How long, by default, the node may go without a working controller before it stops
    /// answering systemd's watchdog (`node.watchdog_dark_limit`). Longer than the node's own mending
    /// takes: a silent controller is found by the audit within 15 s and reset after 60 s of
    /// advertising off, which starts the count again (the reset is the node's own remedy), and a
    /// lost one is retried up to every 30 s (`ExchangeSupervisor`), so several tries fit; a routine
    /// reset, under 2 s, never comes near it.
    static let defaultWatchdogDarkLimit: Int64 = 180

    /// The least time without progress of the exchange that withholds the pings, whatever
    /// `node.watchdog_dark_limit` says (it may be as short as 5 s): the audit that reports progress
    /// runs every 15 s, 27 s apart when the controller answers nothing (each command waits out its
    /// timeout; measured in the kernel bed), and a rotation skips one. With a 10 s limit the pings
    /// of a working node stopped between two audits.
    static let minimumProgressLimit: Int64 = 60

    /// Since when the node has had no working controller: no session (starting or reconnecting), or
    /// a session whose controller does not advertise or scan as the node wants; nil while it works,
    /// and while the node is dark only because its store cannot record the next id.
    ///
    /// A store outage is left out on purpose: the node mends it by itself (it retries every 5 s and
    /// keeps its encounters in memory meanwhile), and a restart would neither free the disk nor
    /// unlock the database, while it would drop the encounters held in memory.
    var darkSince: UnixSeconds? {
        switch state {
        case .stopped:
            return nil
        case .starting, .reconnecting:
            guard idNotRecorded == nil else { return nil }
            return reconnectingSince ?? startedAt
        case .running:
            return [radio?.advertising?.since, radio?.scanning?.since].compactMap { $0 }.min()
        }
    }

    /// Why the node should stop answering systemd's watchdog, so that systemd restarts it; nil
    /// while it should keep answering. The watchdog is for what the node cannot mend by itself: a
    /// controller it has not had working for over `darkLimit` seconds, after its own resets and
    /// reconnections had their time (`defaultWatchdogDarkLimit`), and a running node whose exchange
    /// has made no progress for as long, or `minimumProgressLimit` if longer (`exchangeProgressAt`: its audit, every 15 s, waits behind
    /// every operation on the controller, so one operation that never ends, while the flags still
    /// say advertising and scanning are on, stops it). A fresh process opens the adapter anew and
    /// drops whatever state held the old one; when the adapter is simply gone it costs nothing (no
    /// radio, no sightings held), and the restarts show in `systemctl status`. A wedged process
    /// needs no rule here: the pings come from the node's own tasks, so they stop with it.
    /// `progressAge` and `darkAge`: seconds since that progress and since the node went dark on
    /// the monotonic clock (`NodeStatusRecorder.progressAge`, `.darkAge`), which a wall clock set
    /// forward or back does not move; without them, the wall clock's `now - exchangeProgressAt`
    /// and `now - darkSince`.
    func watchdogWithheld(now: UnixSeconds, darkLimit: Int64, progressAge: Int64? = nil, darkAge: Int64? = nil) -> String? {
        if let since = darkSince, (darkAge ?? now - since) > darkLimit {
            return "no working controller since \(Output.localTime(since)) (over \(Output.duration(darkLimit))): \(darkReason)"
        }
        let progressLimit = max(darkLimit, Self.minimumProgressLimit)
        if state == .running, let progress = exchangeProgressAt, (progressAge ?? now - progress) > progressLimit {
            return "no progress of the exchange since \(Output.localTime(progress)) (over \(Output.duration(progressLimit))): "
                + "the controller is held by an operation that has not ended"
        }
        return nil
    }

    /// Why the node is dark, in words.
    private var darkReason: String {
        if state == .running, let radio {
            if let outage = radio.advertising { return "not advertising: \(outage.reason)" }
            if let outage = radio.scanning { return "not scanning: \(outage.reason)" }
        }
        return "reconnecting to \(transport): \(lastError ?? "no controller session yet")"
    }

    /// The node's state in a few plain words, for systemd's STATUS= (`systemctl status` shows it):
    /// no "ago", so that it changes only when the state does.
    var systemdStatus: String {
        var parts: [String]
        switch state {
        case .starting: parts = ["starting on \(transport)"]
        case .stopped: parts = ["stopped"]
        case .reconnecting:
            if let outage = idNotRecorded {
                parts = ["not advertising since \(Output.localTime(outage.since)): \(outage.problem)"]
            } else {
                parts = ["reconnecting to \(transport) since \(Output.localTime(reconnectingSince ?? startedAt)): \(lastError ?? "controller lost")"]
            }
        case .running:
            parts = ["running on \(transport)"]
            if let outage = radio?.advertising { parts.append("not advertising since \(Output.localTime(outage.since)): \(outage.reason)") }
            if let outage = radio?.scanning { parts.append("not scanning since \(Output.localTime(outage.since)): \(outage.reason)") }
        }
        if let outage = encountersNotWritten {
            parts.append("not writing encounters since \(Output.localTime(outage.since)): \(outage.problem)")
        }
        return parts.joined(separator: "; ")
    }
}

/// Tells systemd how the node is, when systemd runs it with a notification socket (`Type=notify`):
/// READY=1 once the node knows whether its controller works (its first session started or
/// failed), so that `systemctl start` returns with a meaningful state; STATUS= whenever that state
/// changes; WATCHDOG=1 every half watchdog period while `watchdogWithheld` finds nothing; and
/// STOPPING=1 as soon as the node begins to stop.
actor NodeWatchdog {
    private let notifier: SystemdNotifier
    private let darkLimit: Int64
    private let logger: Logger
    private var ready = false
    private var lastStatus: String?
    /// Why pings are withheld, while they are: logged when that starts and when it ends.
    private var withheld: String?
    /// The last failure to reach systemd, so that each new one is logged once.
    private var lastFailure: SystemdNotifier.Failure?

    init(notifier: SystemdNotifier, darkLimit: Int64, logger: Logger) {
        self.notifier = notifier
        self.darkLimit = darkLimit
        self.logger = logger
    }

    /// Follows `recorder` until the calling task is cancelled (the node stops), then says STOPPING=1.
    func run(following recorder: NodeStatusRecorder, clock: some WallClock = SystemWallClock()) async {
        let changes = recorder.changes
        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                for await status in changes { await self.observe(status) }
            }
            if let timeout = notifier.watchdogTimeout {
                group.addTask {
                    // Timer: systemd's watchdog wants a ping within each period; half leaves room
                    // for a busy machine. The status is asked of the recorder each time, so that
                    // pings stop when the node's tasks do.
                    while (try? await Task.sleep(for: timeout / 2)) != nil {
                        await self.watchdogTick(
                            await recorder.current, now: clock.now(), progressAge: await recorder.progressAge, darkAge: await recorder.darkAge)
                    }
                }
            }
            await group.waitForAll()
        }
        stopping()
    }

    /// A change of the node's status: READY=1 the first time it is past starting, STATUS= when
    /// its words changed.
    func observe(_ status: NodeRuntimeStatus) {
        var assignments: [String] = []
        if !ready, status.state != .starting {
            ready = true
            assignments.append("READY=1")
        }
        let words = status.systemdStatus + (withheld.map { "; not answering the watchdog: \($0)" } ?? "")
        if words != lastStatus {
            lastStatus = words
            assignments.append("STATUS=\(words)")
        }
        send(assignments)
    }

    /// Pings the watchdog unless `status` at `now` says the node cannot mend itself; returns
    /// whether it pinged.
    @discardableResult
    func watchdogTick(_ status: NodeRuntimeStatus, now: UnixSeconds, progressAge: Int64? = nil, darkAge: Int64? = nil) -> Bool {
        let reason = status.watchdogWithheld(now: now, darkLimit: darkLimit, progressAge: progressAge, darkAge: darkAge)
        if reason != withheld {
            if let reason {
                logger.error("not answering systemd's watchdog, so that systemd restarts the node", metadata: ["reason": "\(reason)"])
                lastStatus = "\(status.systemdStatus); not answering the watchdog: \(reason)"
                send(["STATUS=\(lastStatus ?? "")"])
            } else {
                logger.notice("answering systemd's watchdog again: the controller works and the exchange makes progress")
                lastStatus = status.systemdStatus
                send(["STATUS=\(status.systemdStatus)"])
            }
            withheld = reason
        }
        guard reason == nil else { return false }
        send(["WATCHDOG=1"])
        return true
    }

    func stopping() {
        send(["STOPPING=1", "STATUS=stopping"])
    }

    private func send(_ assignments: [String]) {
        guard !assignments.isEmpty else { return }
        do throws(SystemdNotifier.Failure) {
            try notifier.send(assignments)
            lastFailure = nil
        } catch {
            // Best effort: the node runs on without systemd's ear; said once per kind of failure.
            if error != lastFailure { logger.warning("\(error)") }
            lastFailure = error
        }
    }
}
