import Foundation
import IDRotation
import TracerCore

/// What a node's store holds after a crowd run.
struct NodeRecord {
    let ownIDs: [OwnID]
    let encounters: [Encounter]

    static func read(_ database: String) throws -> NodeRecord {
        let store = try NodeStore.open(StoreLocation(path: database, source: .flag, ownsDirectory: false))
        return NodeRecord(ownIDs: try store.ownIDs(), encounters: try store.encounters())
    }
}

/// A node's JSON log (`--log-format json`): one object per line, every value a string.
struct NodeLog {
    struct Event {
        let time: Double
        let level: String
        let message: String
        let fields: [String: String]
    }

    let events: [Event]

    static func read(_ path: String) -> NodeLog {
        let text = (try? String(contentsOfFile: path, encoding: .utf8)) ?? ""
        let style = Date.ISO8601FormatStyle(includingFractionalSeconds: true)
        var events: [Event] = []
        for line in text.split(separator: "\n") where line.hasPrefix("{") {
            guard let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: String],
                  let stamp = object["time"], let time = try? style.parse(stamp)
            else { continue }
            events.append(Event(time: time.timeIntervalSince1970, level: object["level"] ?? "", message: object["message"] ?? "",
                                fields: object))
        }
        return NodeLog(events: events.sorted { $0.time < $1.time })
    }
}

/// What the passive listener heard: one report per line, "UNIX_TIME ADDRESS KIND".
struct AirLog {
    struct Report {
        let time: Double
        let address: String
        /// 1 a Tracer advertisement, 2 the duty-cycle device, 0 anything else.
        let kind: Int
    }

    let reports: [Report]

    static func read(_ path: String) -> AirLog {
        let text = (try? String(contentsOfFile: path, encoding: .utf8)) ?? ""
        let reports = text.split(separator: "\n").compactMap { line -> Report? in
            let parts = line.split(separator: " ")
            guard parts.count == 3, let time = Double(parts[0]), let kind = Int(parts[2]) else { return nil }
            return Report(time: time, address: String(parts[1]), kind: kind)
        }
        return AirLog(reports: reports.sorted { $0.time < $1.time })
    }
}

/// What the figures of a crowd run need besides its files; kept as crowd.json in its folder, so
/// that `TracerBench crowd-figures FOLDER` can compute them again from a kept run (TRACER_CROWD_DIR).
struct CrowdRun: Codable {
    let phy: String
    let nodes: Int
    let rotationInterval: Int64
    let logLevel: String
    let observed: Bool
    /// Wall clock when the measurement started (every node running) and ended.
    let runStart: UnixSeconds
    let runEnd: UnixSeconds
    let runEndInstant: Double
}

/// The figures computed after a crowd run from the node stores, their logs and the listener.
struct CrowdFigures {
    /// Figures (a) and (b) of a finished run from the files in `directory`: node<i>.db,
    /// node<i>.log, air.txt.
    static func report(_ run: CrowdRun, directory: String) throws {
        guard let phy = CrowdPhy(rawValue: run.phy) else { throw BenchmarkError("unknown phy \(run.phy)") }
        let records = try (0..<run.nodes).map { try NodeRecord.read(directory + "/node\($0).db") }
        let figures = CrowdFigures(
            phy: phy, nodes: records, rotationInterval: run.rotationInterval,
            runStart: run.runStart, runEnd: run.runEnd, runEndInstant: run.runEndInstant)
        figures.exchangesPerWindow()
        figures.pairsLoggedPerWindow()
        let logs = (0..<run.nodes).map { NodeLog.read(directory + "/node\($0).log") }
        figures.advertisingFromLogs(logs, level: run.logLevel)
        if run.observed {
            figures.advertisingOnAir(AirLog.read(directory + "/air.txt"), logs: logs)
        }
    }

    let phy: CrowdPhy
    let nodes: [NodeRecord]
    let rotationInterval: Int64
    let runStart: UnixSeconds
    let runEnd: UnixSeconds
    let runEndInstant: Double

    /// A gap in advertising longer than this counts.
    static let gapThreshold = 2.0

    private func model(_ index: Int) -> String { phy.model(ofNode: index) }

    /// For every window of a node's own id that lies wholly inside the run, how many of the other
    /// nodes it exchanged ids with (read theirs or had them write to it).
    func exchangesPerWindow() {
        var complete = 0, total = 0, counts: [Int] = []
        for record in nodes {
            let windows = record.ownIDs.map(\.window).filter { $0.start >= runStart && $0.end <= runEnd }
            for window in windows {
                let peers = Set(record.encounters.filter { $0.ownWindowStart == window.start && !$0.learnedBy.isEmpty }.map(\.peer))
                counts.append(peers.count)
                total += 1
                if peers.count >= nodes.count - 1 { complete += 1 }
            }
        }
        let sorted = counts.sorted()
        let median = sorted.isEmpty ? 0 : sorted[sorted.count / 2]
        say("exchanges per \(rotationInterval) s window (peers of \(nodes.count - 1) exchanged with): min \(sorted.first ?? 0), median \(median), complete windows \(complete)/\(total) (target: all)")
    }

    /// Per id window wholly inside the run: of all (observer A, broadcaster B) pairs, A ≠ B, the
    /// share where A's store logged B's id of that window (in any of A's own windows, by any means).
    /// A node without an id for the window counts as unheard by everyone.
    func pairsLoggedPerWindow() {
        var loggedBy: [UserID: Set<Int>] = [:]
        for (observer, record) in nodes.enumerated() {
            for encounter in record.encounters { loggedBy[encounter.peer, default: []].insert(observer) }
        }
        let starts = Set(nodes.flatMap { $0.ownIDs.map(\.window) }.filter { $0.start >= runStart && $0.end <= runEnd }.map(\.start)).sorted()
        let formatter = DateFormatter()
        formatter.dateFormat = "HH:mm:ss"
        var shares: [Double] = []
        var missingByModels: [String: Int] = [:]
        var pairsByModels: [String: Int] = [:]
        say("")
        say("(a) pairs (observer, broadcaster id) logged, per \(rotationInterval) s id window wholly inside the run (target ≥ 95 % in each, none worse than the one before):")
        for start in starts {
            var pairs = 0, logged = 0
            var missing: [String] = []
            for (broadcaster, record) in nodes.enumerated() {
                let id = record.ownIDs.first { $0.window.start == start }?.id
                for observer in nodes.indices where observer != broadcaster {
                    pairs += 1
                    let key = model(broadcaster) + " heard by " + model(observer)
                    pairsByModels[key, default: 0] += 1
                    if let id, loggedBy[id]?.contains(observer) == true {
                        logged += 1
                    } else {
                        missingByModels[key, default: 0] += 1
                        missing.append("\(broadcaster)→\(observer)" + (id == nil ? " (no id)" : ""))
                    }
                }
            }
            let share = pairs == 0 ? 0 : Double(logged) / Double(pairs)
            let worse = shares.last.map { share < $0 } ?? false
            shares.append(share)
            let time = formatter.string(from: Date(timeIntervalSince1970: TimeInterval(start)))
            say(String(format: "  window %@  %6.1f %% (%d/%d)", time, share * 100, logged, pairs)
                + (worse ? "  worse than the window before" : "")
                + (missing.isEmpty ? "" : "  not logged (broadcaster→observer): " + missing.prefix(12).joined(separator: ", ")
                    + (missing.count > 12 ? " … (\(missing.count) in all)" : "")))
        }
        guard !shares.isEmpty else {
            say("  no id window lies wholly inside the run")
            return
        }
        let below = shares.filter { $0 < 0.95 }.count
        let declines = zip(shares, shares.dropFirst()).filter { $1 < $0 }.count
        say(String(format: "  windows: %d; min %.1f %%, mean %.1f %%; below 95 %%: %d; worse than the one before: %d",
                   shares.count, (shares.min() ?? 0) * 100, shares.reduce(0, +) / Double(shares.count) * 100,
                   below, declines))
        if phy == .rootcanal, !missingByModels.isEmpty {
            say("  pairs not logged, by controller models (broadcaster heard by observer): "
                + missingByModels.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)/\(pairsByModels[$0.key] ?? 0)" }.joined(separator: "; "))
        }
    }

    /// Advertising outages as the nodes log them: "advertising is off" until "advertising again";
    /// a controller session that ended (or an address the controller refused) until the next
    /// session's "rotated", which comes just before it advertises again.
    func advertisingFromLogs(_ logs: [NodeLog], level: String) {
        say("")
        say("(b) advertising off, from the node logs (intervals > \(Int(Self.gapThreshold)) s inside the run):")
        if ["error", "critical"].contains(level) {
            say("  the nodes logged at \(level): outages are logged at warning and notice, so the logs cannot show them")
            return
        }
        let start = Double(runStart), end = runEndInstant
        var totals: [Double] = []
        var messages: [String: Int] = [:]
        for (index, log) in logs.enumerated() {
            var intervals: [(Double, Double, String)] = []
            var offSince: (time: Double, why: String)?
            var sessionDown = false
            var rotations = 0, sessionsEnded = 0
            for event in log.events {
                if ["warning", "error", "critical", "notice"].contains(event.level) {
                    // Messages may carry numbers (Unix times): count them by their first words.
                    let words = event.message.split(separator: " ").prefix(6).joined(separator: " ")
                    messages["\(event.level): \(words)", default: 0] += 1
                }
                switch event.message {
                case let message where message.hasPrefix("advertising is off"):
                    if offSince == nil { offSince = (event.time, "refused: \(event.fields["error"] ?? "?")") }
                case "advertising again":
                    if let since = offSince, !sessionDown { intervals.append((since.time, event.time, since.why)); offSince = nil }
                case "controller session ended; reconnecting":
                    sessionsEnded += 1
                    sessionDown = true
                    if offSince == nil { offSince = (event.time, "session ended: \(event.fields["error"] ?? "?")") }
                case let message where message.hasPrefix("could not change the address"):
                    sessionDown = true
                    if offSince == nil { offSince = (event.time, "address refused") }
                case "rotated":
                    rotations += 1
                    if sessionDown, let since = offSince {
                        intervals.append((since.time, event.time, since.why))
                        offSince = nil
                        sessionDown = false
                    }
                default:
                    break
                }
            }
            if let since = offSince { intervals.append((since.time, end, since.why + " (still off at the end)")) }
            let counted = intervals.map { (max($0.0, start), min($0.1, end), $0.2) }.filter { $0.1 - $0.0 > Self.gapThreshold }
            let total = counted.reduce(0) { $0 + $1.1 - $1.0 }
            totals.append(total)
            var line = String(format: "  node %2d (%@): %d \"rotated\" (rotations and session starts), %d sessions ended; %d outages > 2 s, %.1f s",
                              index, model(index), rotations, sessionsEnded, counted.count, total)
            if let worst = counted.max(by: { $0.1 - $0.0 < $1.1 - $1.0 }) {
                line += String(format: ", longest %.1f s (%@)", worst.1 - worst.0, worst.2)
            }
            say(line)
        }
        let hours = (end - start) / 3600
        say(String(format: "  all nodes: %.1f s logged off in all, mean %.1f s per node (%.2f %% of the run)",
                   totals.reduce(0, +), totals.reduce(0, +) / Double(max(1, totals.count)),
                   totals.reduce(0, +) / Double(max(1, totals.count)) / (hours * 3600) * 100))
        say("  what the logs cannot show: a controller stops advertising by itself when a central connects; the node")
        say("  asks for it again at once but does not log a refusal with Command Disallowed, and the audit that finds")
        say("  advertising off and turns it on (every 15 s) does not log that either. The listener below measures the air.")
        if !messages.isEmpty {
            say("  notice/warning/error messages in all node logs:")
            for (message, count) in messages.sorted(by: { $0.value > $1.value }).prefix(20) { say("    \(count)× \(message)") }
        }
    }

    /// Advertising off as the passive listener heard it.
    ///
    /// Each address's reports make stretches on the air (each lasting until 0.5 s after its last
    /// report); a silence longer than 2 s ends one. A node
    /// has one address at a time, so at any moment the nodes not on the air are the node count
    /// minus the stretches under way; their sum over the run is the node-seconds without
    /// advertising, less the first 2 s after each window boundary (the rotation's allowance) and
    /// any time the listener heard nobody at all (then it, not the nodes, was deaf). It counts every
    /// moment, so also silences under 2 s between two addresses of a node. This needs no
    /// knowledge of which address is whose. Per node it is shown only when every address could be
    /// matched to its node: through the debug logs ("exchanged" names the peer's id tag and the
    /// link's address, the peripheral's advertising address, and the tag leads to a node through
    /// the stores; the peripheral's "connected" at the same moment names the central's address),
    /// or by elimination.
    func advertisingOnAir(_ air: AirLog, logs: [NodeLog]) {
        say("")
        say("(b) advertising off, heard by the passive listener (silences > \(Int(Self.gapThreshold)) s):")
        guard let first = air.reports.first else {
            say("  the listener heard nothing")
            return
        }
        let start = Double(runStart), end = runEndInstant
        // When nobody at all was heard for over a second, the listener was not listening.
        var deaf: [(Double, Double)] = []
        var previous = first.time
        for report in air.reports {
            if report.time - previous > 1 { deaf.append((previous, report.time)) }
            previous = report.time
        }
        if end - previous > 1 { deaf.append((previous, end)) }
        say(String(format: "  listener deaf (nobody heard for > 1 s): %d times, %.1f s in all", deaf.count, deaf.reduce(0) { $0 + $1.1 - $1.0 }))

        let reference = air.reports.filter { $0.kind == 2 }.map(\.time)
        let referenceGaps = zip(reference, reference.dropFirst()).map { $1 - $0 }
        say(String(format: "  reference (the Bumble duty-cycle device, one address, never stops): %d reports, %d silences > 2 s, longest %.2f s",
                   reference.count, referenceGaps.filter { $0 > Self.gapThreshold }.count, referenceGaps.max() ?? 0))

        let tracer = Dictionary(grouping: air.reports.filter { $0.kind == 1 }, by: \.address).mapValues { $0.map(\.time) }
        // An address counts as on the air until half a second after a report: the nodes advertise
        // every 250 ms, and reports arrive up to about 0.4 s apart.
        let tail = 0.5
        var stretches: [(from: Double, to: Double, address: String)] = []
        var sameAddressSilences: [Double] = []
        for (address, times) in tracer {
            var from = times[0]
            for (previous, next) in zip(times, times.dropFirst()) where next - previous > Self.gapThreshold {
                stretches.append((from, previous + tail, address))
                sameAddressSilences.append(next - previous)
                from = next
            }
            stretches.append((from, times.last! + tail, address))
        }
        say(String(format: "  Tracer addresses heard: %d; silences > 2 s within one address (advertising stopped and resumed, neither a rotation nor a controller reset): %d, %.1f s in all, longest %.1f s",
                   tracer.count, sameAddressSilences.count, sameAddressSilences.reduce(0, +), sameAddressSilences.max() ?? 0))

        // The moments to leave out: the rotation's allowance after each boundary, and deafness.
        let interval = Double(rotationInterval)
        var excluded = deaf
        var boundary = (start / interval).rounded(.up) * interval
        while boundary < end {
            excluded.append((boundary, boundary + Self.gapThreshold))
            boundary += interval
        }
        // Node-seconds off the air, from 2 s after the start (the nodes' first advertisement) to the end.
        var points = Set([start + Self.gapThreshold, end])
        for stretch in stretches { points.formUnion([stretch.from, stretch.to]) }
        for interval in excluded { points.formUnion([interval.0, interval.1]) }
        let sorted = points.filter { $0 >= start + Self.gapThreshold && $0 <= end }.sorted()
        var offNodeSeconds = 0.0, allOffNodeSeconds = 0.0
        for (from, to) in zip(sorted, sorted.dropFirst()) {
            let middle = (from + to) / 2
            let onAir = stretches.filter { $0.from <= middle && middle <= $0.to }.count
            let missing = Double(max(0, nodes.count - onAir)) * (to - from)
            if deaf.contains(where: { $0.0 <= middle && middle <= $0.1 }) { continue }
            allOffNodeSeconds += missing
            if excluded.contains(where: { $0.0 <= middle && middle <= $0.1 }) { continue }
            offNodeSeconds += missing
        }
        let span = end - start - Self.gapThreshold
        say(String(format: "  node-seconds without advertising outside rotations: %.1f, mean %.1f s per node (%.2f %% of the run); within 2 s after a window boundary: %.1f more",
                   offNodeSeconds, offNodeSeconds / Double(nodes.count), offNodeSeconds / Double(nodes.count) / span * 100,
                   allOffNodeSeconds - offNodeSeconds))

        // Per node, when every address can be named.
        var owners: [String: [(node: Int, window: IDWindow)]] = [:]
        for (index, record) in nodes.enumerated() {
            for own in record.ownIDs { owners[own.id.tag, default: []].append((index, own.window)) }
        }
        func address(in link: String) -> String? {
            link.range(of: "peer ").map { String(link[$0.upperBound...].prefix(17)) }
        }
        var votes: [String: [Int: Int]] = [:]
        for (observer, log) in logs.enumerated() {
            for event in log.events where event.message == "exchanged" {
                guard let tag = event.fields["peer"], let peerAddress = address(in: event.fields["link"] ?? "") else { continue }
                let candidates = Set((owners[tag] ?? []).filter {
                    $0.node != observer && Double($0.window.start) - 3 <= event.time && event.time < Double($0.window.end) + 3
                }.map(\.node))
                if candidates.count == 1 { votes[peerAddress, default: [:]][candidates.first!, default: 0] += 1 }
            }
        }
        let peripheralLinks = logs.map { log in
            log.events.filter { $0.message == "connected" && ($0.fields["link"] ?? "").contains("(peripheral,") }
        }
        for (central, log) in logs.enumerated() {
            var opened: [String: Double] = [:]
            for event in log.events {
                guard let link = event.fields["link"], link.contains("(central,") else { continue }
                if event.message == "connected" { opened[link] = event.time; continue }
                guard event.message == "exchanged", let time = opened[link], let peerAddress = address(in: link),
                      let peripheral = votes[peerAddress]?.max(by: { $0.value < $1.value })?.key
                else { continue }
                let matches = peripheralLinks[peripheral].filter { abs($0.time - time) < 0.3 }
                if matches.count == 1, let centralAddress = address(in: matches[0].fields["link"] ?? "") {
                    votes[centralAddress, default: [:]][central, default: 0] += 1
                }
            }
        }
        var owner: [String: Int] = [:]
        for (address, tally) in votes { owner[address] = tally.max { $0.value < $1.value }!.key }
        // A node has one address at a time: when exactly one node was heard under no other address
        // while an unnamed one was on the air, it is that node's (repeated while that settles more).
        var settled = true
        while settled {
            settled = false
            for (address, times) in tracer where owner[address] == nil {
                let from = times.first!, to = times.last!
                let free = nodes.indices.filter { node in
                    !tracer.contains { owner[$0.key] == node && $0.value.contains { $0 > from && $0 < to } }
                }
                if free.count == 1 {
                    owner[address] = free[0]
                    settled = true
                }
            }
        }
        let unmatched = tracer.keys.filter { owner[$0] == nil }.count
        guard unmatched == 0 else {
            say("  per node: \(unmatched) of \(tracer.count) addresses could not be matched to a node (nobody exchanged with them), so no per-node figures from the air")
            return
        }
        for index in nodes.indices {
            let mine = stretches.filter { owner[$0.address] == index }.sorted { $0.from < $1.from }
            guard let firstHeard = mine.first?.from else {
                say("  node \(index) (\(model(index))): never heard")
                continue
            }
            var silences: [(Double, Double)] = []
            for (before, after) in zip(mine, mine.dropFirst()) where after.from - before.to > Self.gapThreshold {
                silences.append((before.to, after.from))
            }
            if end - mine.last!.to > Self.gapThreshold { silences.append((mine.last!.to, end)) }
            // Less the rotation allowance and deafness.
            let off = silences.map { silence in
                (silence, silence.1 - silence.0 - excluded.reduce(0) { $0 + max(0, min(silence.1, $1.1) - max(silence.0, $1.0)) })
            }.filter { $0.1 > 0 }
            let total = off.reduce(0) { $0 + $1.1 }
            var line = String(format: "  node %2d (%@): %d addresses, first heard %.1f s into the run; off outside rotations: %d silences, %.1f s",
                              index, model(index), Set(mine.map(\.address)).count, firstHeard - start, off.count, total)
            if !off.isEmpty {
                line += " (" + off.prefix(6).map { String(format: "at %.0f s for %.1f s", $0.0.0 - start, $0.1) }.joined(separator: ", ")
                    + (off.count > 6 ? ", …" : "") + ")"
            }
            say(line)
        }
    }

    /// The radio condition and controller resets the nodes wrote into DB-status.json, if they write them.
    /// radioTime.lastHour's receiver share in a node's status file (NodeRuntimeStatus), if it has one.
    static func receiverShare(status: Data) -> Double? {
        guard let object = try? JSONSerialization.jsonObject(with: status) as? [String: Any],
              let hour = (object["radioTime"] as? [String: Any])?["lastHour"] as? [String: Any],
              let observed = hour["observedSeconds"] as? Double, observed > 0,
              let receiver = hour["receiverSeconds"] as? Double
        else { return nil }
        return receiver / observed
    }

    static func statusFiles(_ contents: [String]) {
        say("")
        let shares = contents.compactMap { receiverShare(status: Data($0.utf8)) }
        if !shares.isEmpty {
            say(String(format: "receiver on (the nodes' radio accounts, last hour): mean %.2f %%, min %.2f %%, max %.2f %% over %d nodes",
                       100 * shares.reduce(0, +) / Double(shares.count), 100 * shares.min()!, 100 * shares.max()!, shares.count))
        }
        let conditions = contents.enumerated().compactMap { index, text -> String? in
            guard let object = try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any] else { return nil }
            // NodeRuntimeStatus's two fields on the radio; a healthy radio is written as {}: left out.
            let radio = object.filter { key, value in
                ["radio", "controllerResets"].contains(key) && (value as? [String: Any])?.isEmpty != true
            }
            guard !radio.isEmpty, let data = try? JSONSerialization.data(withJSONObject: radio, options: [.sortedKeys]) else { return nil }
            return "  node \(index): " + String(decoding: data, as: UTF8.self)
        }
        if conditions.isEmpty {
            let keys = (try? JSONSerialization.jsonObject(with: Data((contents.first ?? "").utf8)) as? [String: Any])?.keys.sorted() ?? []
            say("status files at the end: no outage in their radio condition, no controller reset (fields: \(keys.joined(separator: ", ")))")
        } else {
            say("radio condition and controller resets in the status files at the end of the run (nodes without either are left out):")
            conditions.forEach(say)
        }
    }
}
