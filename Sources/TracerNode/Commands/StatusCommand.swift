import ArgumentParser
import BLEHost
import Foundation
import IDRotation
import Matching
import TracerCore

struct StatusCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "status",
        abstract: "Show the node's data, the positive list's age and the last check's result.",
        discussion: """
            Exit code 1 when the node runs but cannot advertise, scan or record (a controller that \
            is gone or refuses, a full disk, a locked or read-only database): the first line says \
            since when, why and what to do. The node recovers by itself once the cause is gone. \
            Reconnecting to the controller is shown at once but counts only after \(NodeRuntimeStatus.reconnectingIsAProblemAfter) s, so that \
            a routine controller reset (under 2 s) does not make monitoring flap.
            """)

    @OptionGroup var config: ConfigOptions
    @OptionGroup var store: StoreOptions
    @OptionGroup var server: ListServerOptions
    @Flag(help: "Print the status as JSON.") var json = false

    /// One further list's state, as its own directory keeps it.
    struct FurtherList: Encodable {
        var name: String
        var cache: String
        var lastUpdated: UnixSeconds?
        var lastFailure: String?
        var logEntries: UInt64?
        var splitViewEvidence: [String]

        init(_ list: FurtherListSettings, parts: MatchingParts) {
            let cache = parts.furtherCache(list)
            let store = parts.furtherLogStore(list)
            name = list.name
            self.cache = cache.directory
            lastUpdated = cache.state.lastUpdated
            lastFailure = cache.state.lastFailure
            logEntries = store.heldState()?.treeSize
            splitViewEvidence = store.evidence()
        }
    }

    struct HeldSightings: Encodable {
        var sightings: Int
        var files: [String]
    }

    struct Status: Encodable {
        var node: NodeRuntimeStatus?
        var nodeRunning: Bool
        /// Running with a problem: `nodeProblems` is not empty (it says what and since when).
        var nodeDegraded: Bool
        /// What keeps the running node from advertising, scanning or recording, most serious
        /// first, with the fix; empty when it does all three. Not empty: `tracer status` exits 1.
        var nodeProblems: [String]
        var peersMetToday: Int
        var database: String
        var ownIDs: Int
        var dailyKeys: Int
        var encounters: Int
        var distinctPeers: Int
        /// Sightings a node kept in its runtime directory when it stopped with a store that
        /// refused writes (`EncounterSpill`), not yet written into the store; nil: none.
        var heldForNextStart: HeldSightings?
        var currentIDTag: String?
        var currentWindowEnd: UnixSeconds?
        var listCache: String
        var listLastUpdated: UnixSeconds?
        var listLastFailure: String?
        /// Entries of the followed list log; nil before the first update.
        var listLogEntries: UInt64?
        /// Directories holding two signed checkpoints of one size that differ: the list's key
        /// signed two histories (a split view), kept for the user to hand over.
        var listSplitViewEvidence: [String]
        /// The further authorities' lists (`[lists.<name>]`); nil for a node following one list.
        var furtherLists: [FurtherList]?
        var lastCheck: ExposureCheckReport?
        var reports: [ReportReceipt]
        /// The configured place name and what gpsd says; never a position.
        var place: String
    }

    func run() async throws {
        var flags = server.settingFlags
        flags["node.database"] = store.db
        let resolved = try config.resolve(flags: flags)
        let settings = resolved.settings
        let location = resolved.storeLocation
        guard let opened = try StoreOptions.openExisting(location) else { return }
        let counts = try opened.counts()
        let current = try opened.latestOwnID()
        let parts = MatchingParts(settings: settings)
        let cache = parts.cache
        let cacheState = cache.state
        let runtime = NodeRuntimeStatus.read(from: location.statusFilePath)
        let startOfToday = UnixSeconds(Calendar.current.startOfDay(for: Date()).timeIntervalSince1970)
        let peersToday = Set(try opened.encounterTimes(since: startOfToday).map(\.peer)).count
        let alive = runtime?.processIsAlive ?? false
        let now = SystemWallClock().now()
        var problems = alive ? runtime?.problems(now: now) ?? [] : []
        if let runtime, !alive, runtime.isSilentButPresent {
            problems = [runtime.silence(path: location.statusFilePath, now: now)]
        }
        // A node on a read-only file system cannot say so in its status file (which soon reads as
        // silent) and one started there cannot open its store: asked here, whatever the file says.
        if ReadOnlyFileSystem.holds(location.path) {
            problems.insert("not recording: " + StoreError.readOnlyFileSystem(path: location.path).whileRunning(.ids), at: 0)
        }
        let spill = EncounterSpill(forStoreAt: location.path, environment: ProcessInfo.processInfo.environment)
        // Read only: a spill the node removes meanwhile is simply not shown.
        let held = spill.take().flatMap { taken in
            taken.from.isEmpty ? nil : HeldSightings(sightings: taken.batch.sightingCount, files: taken.from.map(\.path))
        }
        let status = Status(
            node: runtime, nodeRunning: alive,
            nodeDegraded: alive && !problems.isEmpty, nodeProblems: problems, peersMetToday: peersToday,
            database: location.path, ownIDs: counts.ownIDs, dailyKeys: counts.dailyKeys, encounters: counts.encounters, distinctPeers: counts.distinctPeers,
            heldForNextStart: held,
            currentIDTag: current?.id.tag, currentWindowEnd: current?.window.end, listCache: cache.directory,
            listLastUpdated: cacheState.lastUpdated, listLastFailure: cacheState.lastFailure,
            listLogEntries: parts.logStore.heldState()?.treeSize, listSplitViewEvidence: parts.logStore.evidence(),
            furtherLists: settings.furtherLists.isEmpty ? nil : settings.furtherLists.map { FurtherList($0, parts: parts) },
            lastCheck: try ExposureChecker.lastReport(in: opened), reports: HistoryReporter.receipts(in: opened),
            place: PlaceInForce(settings: settings).summary(gpsd: await PlaceInForce(settings: settings).probeGPSD()))
        if json {
            try Output.printJSON(status)
        } else {
            print(render(status))
        }
        // A node that runs but cannot be heard, cannot hear or cannot record is a failure to act
        // on (the first line says which and what to do), for scripts and monitoring as for people.
        if !problems.isEmpty { throw ExitCode.failure }
    }

    private func render(_ status: Status) -> String {
        let now = SystemWallClock().now()
        func ago(_ time: UnixSeconds) -> String { Output.ago(time, now: now) }
        var lines = nodeLines(status, now: now, ago: ago)
        if let controller = status.node?.controller, status.nodeRunning {
            lines.append("Controller:     \(controller.address), HCI version \(controller.hciVersion), manufacturer \(controller.manufacturer)")
        }
        if let resets = status.node?.controllerResets, status.nodeRunning {
            lines.append("Controller resets: \(resets.count) (last \(Output.localTime(resets.lastAt)): \(resets.lastReason))")
        }
        if let radio = status.node?.radioTime, status.nodeRunning {
            lines.append("Radio:          " + Self.radioLine(radio.lastHour, over: 3600, "last hour"))
            lines.append("                " + Self.radioLine(radio.lastDay, over: 86_400, "last day"))
        }
        lines += [
            "Database:       \(status.database)",
            "Met today:      \(status.peersMetToday) peer ids",
            "Data kept:      \(status.ownIDs) own ids, \(status.dailyKeys) daily keys, \(status.encounters) encounters with \(status.distinctPeers) peer ids",
        ]
        if let held = status.heldForNextStart {
            lines.append("Held:           \(held.sightings) sightings the store refused when the node stopped, kept in memory in \(held.files.joined(separator: ", ")) for its next start to write (lost if the machine restarts first)")
        }
        if let tag = status.currentIDTag, let end = status.currentWindowEnd {
            lines.append("Latest own id:  \(tag), \(end > now ? "in use until \(Output.localTime(end))" : "window ended \(ago(end))")")
        }
        lines.append("Place:          \(status.place)")
        let followed = status.listLogEntries.map { ", list log of \($0) entries" } ?? ""
        lines.append("Positive list:  " + (status.listLastUpdated.map { "last updated \(ago($0))\(followed)" } ?? "never downloaded"))
        if let failure = status.listLastFailure { lines.append("                last update failed: \(failure)") }
        if let evidence = status.listSplitViewEvidence.last {
            lines.append("                SPLIT VIEW: the list's key signed two different lists, so its server shows different lists to different people; "
                + "the proof is in \(evidence). Hand it to the health authority (`tracer doctor` says more).")
        }
        for list in status.furtherLists ?? [] {
            let entries = list.logEntries.map { ", list log of \($0) entries" } ?? ""
            lines.append("List \(list.name):".padding(toLength: 16, withPad: " ", startingAt: 0)
                + (list.lastUpdated.map { "last updated \(ago($0))\(entries)" } ?? "never downloaded; run `tracer check`"))
            if let failure = list.lastFailure { lines.append("                last update failed: \(failure)") }
            if let evidence = list.splitViewEvidence.last {
                lines.append("                SPLIT VIEW: the key of the list \(list.name) signed two different lists, so its server shows different lists to different people; "
                    + "the proof is in \(evidence). Hand it to that list's health authority (`tracer doctor` says more).")
            }
        }
        if let check = status.lastCheck {
            let notUpToDate = check.listsNotUpToDate.map(\.name)
            let result = check.exposureFound
                ? "exposure found (\(check.assessment.level.rawValue) risk) on \(check.assessment.exposureDays.map(\.day).joined(separator: ", "))"
                : !notUpToDate.isEmpty
                ? "nothing found, but not every list was up to date (\(notUpToDate.joined(separator: ", "))), so no result; run `tracer check` again"
                : "no exposure found" + (check.listIsStale ? " (in a list that could not be updated)" : "")
            lines.append("Last check:     \(ago(check.checkedAt)): \(result), \(check.idsChecked) ids checked")
        } else {
            lines.append("Last check:     never; run `tracer check`")
        }
        if let last = status.reports.last {
            let what = last.keys.map { $0 == 1 ? "1 daily key" : "\($0) daily keys" } ?? "\(last.ids) own ids"
            lines.append("Reported:       \(what) at \(Output.localTime(last.reportedAt))")
        }
        return lines.joined(separator: "\n")
    }

    /// One line of the radio's account: the receiver's share first (what costs power), then what
    /// the node sent and connected. A stretch the node has not run for in full says how much it saw.
    static func radioLine(_ time: RadioTimeSummary, over stretch: Double, _ name: String) -> String {
        let observed = time.observedSeconds < stretch - 60 ? " (this run's \(Output.duration(Int64(time.observedSeconds))))" : ""
        let receiver = share(time.receiverSeconds, of: time.observedSeconds)
        let scanning = share(time.scanningSeconds, of: time.observedSeconds)
        let connecting = share(time.initiatingSeconds, of: time.observedSeconds)
        let links = share(time.linkListeningSeconds, of: time.observedSeconds)
        let advertising = share(time.advertisingSeconds, of: time.observedSeconds)
        return "\(name)\(observed): receiver on \(receiver) (scanning \(scanning), connecting \(connecting), links \(links)); "
            + "advertising \(advertising), \(time.advertisingEvents) events; "
            + "\(time.connections) connections, \(time.connectionAttempts) attempts"
    }

    /// "8.3 %": one decimal, since the defaults differ in tenths (a low-power schedule is near 1 %).
    private static func share(_ part: Double, of whole: Double) -> String {
        String(format: "%.1f %%", whole > 0 ? 100 * part / whole : 0)
    }

    private func nodeLines(_ status: Status, now: UnixSeconds, ago: (UnixSeconds) -> String) -> [String] {
        guard let node = status.node else {
            return ["Node:           " + (status.nodeProblems.first ?? "not running (no `tracer run` has used this database)")]
        }
        guard status.nodeRunning else {
            // A node it has not heard from but whose pid exists: `nodeProblems` says so.
            if let silence = status.nodeProblems.first { return ["Node:           " + silence] }
            return ["Node:           not running (last seen \(ago(node.updatedAt)))"]
        }
        let started = "since \(Output.localTime(node.startedAt)) on \(node.transport) (pid \(node.pid))"
        if let first = status.nodeProblems.first, node.state != .reconnecting || node.idNotRecorded != nil {
            // Never a plain "running": a node that cannot be heard, cannot hear or cannot record says so first.
            return ["Node:           degraded — " + first] + status.nodeProblems.dropFirst().map { "                " + $0 }
                + ["                up \(started)"]
        }
        switch node.state {
        case .running: return ["Node:           running \(started)"]
        case .starting: return ["Node:           starting on \(node.transport) (pid \(node.pid))"]
        case .reconnecting:
            // Shown at once, counted as a problem (exit 1) only past `reconnectingIsAProblemAfter`.
            let since = node.reconnectingSince.map { " since \(ago($0))" } ?? ""
            let reconnecting = node.reconnectingProblem(now: now)
            return ["Node:           reconnecting to \(node.transport)\(since) (pid \(node.pid)): \(node.lastError ?? "controller lost")"]
                + status.nodeProblems.filter { $0 != reconnecting }.map { "                " + $0 }
        case .stopped: return ["Node:           stopped at \(Output.localTime(node.updatedAt))"]
        }
    }
}
