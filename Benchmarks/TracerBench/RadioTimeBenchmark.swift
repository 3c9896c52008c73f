import Foundation
import BLEHost
import GATTExchange
import IDRotation
import Synchronization
import TracerCore

/// Issue 40, item 2: the node's own account of its radio's time (`RadioTimeAccount`, what
/// `tracer status` shows) against the same figures read from an HCI trace of the run, and item 1's
/// scan plans side by side. Two nodes under one plan (advertising every 250 ms) meet on a virtual
/// link (Bumble's, or RootCanal's), each rotating its id every 30 s (or as asked) so that they
/// connect again; every
/// packet between host and controller is kept with its time, and the trace is read here with its
/// own byte parsing (not the host's decoders), so the two accounts share no code.
struct RadioTimeBenchmark {
    let repository: URL
    let seconds: Int
    var onRootCanal = false
    /// Each plan runs in turn on a fresh link, the old schedule first (issue 40: side by side).
    var plans: [ScanPlan] = [.minuteBursts, .standard]
    /// How often both nodes take a new id (and so connect again).
    var rotationSeconds = 30

    func run() async throws {
        say("# Radio time on \(onRootCanal ? "RootCanal" : "Bumble"): the node's account against its HCI trace, \(seconds) s per plan, "
            + "ids every \(rotationSeconds) s, plans \(plans.map(\.rawValue).joined(separator: ", ")) (\(Date()))")
        var rows: [(plan: ScanPlan, node: Int, own: RadioTimeSummary, traced: RadioTimeSummary)] = []
        for plan in plans {
            say("## \(plan.rawValue)")
            for (index, (own, traced)) in try await run(plan).enumerated() { rows.append((plan, index, own, traced)) }
        }
        say("## Side by side (receiver and its parts as % of the time, from the node's account; the trace's receiver figure beside it)")
        say("plan            node  receiver  (trace)  scanning  connecting  links  advertising  attempts  connections")
        for row in rows {
            let share = { (seconds: Double) in 100 * seconds / max(row.own.observedSeconds, 1e-9) }
            say(row.plan.rawValue.padding(toLength: 15, withPad: " ", startingAt: 0)
                + String(format: " %4d  %7.2f  %7.2f  %8.2f  %10.2f  %5.2f  %11.2f  %8d  %11d", row.node,
                         100 * row.own.receiverFraction, 100 * row.traced.receiverFraction, share(row.own.scanningSeconds),
                         share(row.own.initiatingSeconds), share(row.own.linkListeningSeconds), share(row.own.advertisingSeconds),
                         row.own.connectionAttempts, row.own.connections))
        }
    }

    /// Two nodes under `plan` for `seconds`: each node's account and its trace's.
    func run(_ plan: ScanPlan) async throws -> [(RadioTimeSummary, RadioTimeSummary)] {
        let link = try VirtualLinkProcess.start(repository: repository, controllers: 2, onRootCanal: onRootCanal)
        defer { link.process.stop() }
        let ports = link.ports

        let nodes = try await [TracedNode.open(port: ports[0], plan: plan, rotationSeconds: rotationSeconds),
                               TracedNode.open(port: ports[1], plan: plan, rotationSeconds: rotationSeconds)]
        let clock = ContinuousClock()
        let start = clock.now
        let base = UnixSeconds(Date().timeIntervalSince1970)
        var round = 0
        for node in nodes { await node.exchange.rotate(to: node.id(round: 0, base: base)) }
        for node in nodes { try await node.exchange.start() }
        while clock.now - start < .seconds(seconds) {
            try await Task.sleep(for: .seconds(min(rotationSeconds, max(1, seconds - Int((clock.now - start) / .seconds(1))))))
            guard clock.now - start < .seconds(seconds) else { break }
            round += 1
            for node in nodes { await node.exchange.rotate(to: node.id(round: round, base: base)) }
        }
        for node in nodes {
            await node.exchange.stop()
            await node.host.close()
        }
        var results: [(RadioTimeSummary, RadioTimeSummary)] = []
        for (index, node) in nodes.enumerated() {
            let account = node.account.summary(over: .seconds(86_400))
            let trace = node.trace.account()
            results.append((account, trace))
            say("node \(index): the node's account, then the trace's")
            for (name, own, traced) in [
                ("observed s", account.observedSeconds, trace.observedSeconds),
                ("receiver s", account.receiverSeconds, trace.receiverSeconds),
                ("scanning s", account.scanningSeconds, trace.scanningSeconds),
                ("connecting s", account.initiatingSeconds, trace.initiatingSeconds),
                ("link listening s", account.linkListeningSeconds, trace.linkListeningSeconds),
                ("advertising s", account.advertisingSeconds, trace.advertisingSeconds),
                ("advertising events", Double(account.advertisingEvents), Double(trace.advertisingEvents)),
                ("connection attempts", Double(account.connectionAttempts), Double(trace.connectionAttempts)),
                ("connections", Double(account.connections), Double(trace.connections)),
            ] {
                let ratio = traced > 0 ? String(format: "%.3fx", own / traced) : (own == 0 ? "equal" : "trace has none")
                say("  " + name.padding(toLength: 20, withPad: " ", startingAt: 0) + String(format: " %10.2f %10.2f  ", own, traced) + ratio)
            }
            say(String(format: "  receiver on %.2f %% (account) vs %.2f %% (trace)", 100 * account.receiverFraction, 100 * trace.receiverFraction))
        }
        return results
    }

    struct TracedNode {
        let host: LEHost
        let exchange: ProximityExchange
        let account: RadioTimeAccount
        let trace: HCITrace
        let ids: [UserID]
        let rotationSeconds: Int

        func id(round: Int, base: UnixSeconds) -> OwnID {
            let length = UnixSeconds(rotationSeconds)
            return OwnID(id: ids[round % ids.count], window: IDWindow(
                start: base + UnixSeconds(round) * length, end: base + UnixSeconds(round + 1) * length + 10))
        }

        static func open(port: UInt16, plan: ScanPlan, rotationSeconds: Int) async throws -> TracedNode {
            var configuration = ExchangeConfiguration(scanPlan: plan)
            let account = RadioTimeAccount()
            configuration.radio.radioTimeAccount = account
            let trace = HCITrace()
            let identity = AdvertisedIdentity()
            let (writes, continuation) = AsyncStream.makeStream(of: PeerWriteEvent.self)
            let transport = TracingTransport(inner: try openHCITransport(.tcp(host: "127.0.0.1", port: port)), trace: trace)
            let host = try await LEHost.open(
                transport: transport,
                databaseForLink: TracerGATTServer.databaseForLink(identity: identity, writes: continuation),
                configuration: configuration.radio)
            let exchange = ProximityExchange(host: host, identity: identity, peerWrites: writes, sink: DiscardingSink(), configuration: configuration)
            return TracedNode(host: host, exchange: exchange, account: account, trace: trace, ids: (0..<1000).map { _ in .random() },
                              rotationSeconds: rotationSeconds)
        }
    }

    actor DiscardingSink: EncounterSink {
        func record(_ sighting: Sighting) {}
    }
}

/// Every HCI packet of one transport, with the time it passed.
final class HCITrace: Sendable {
    struct Entry {
        var at: ContinuousClock.Instant
        var fromHost: Bool
        var packet: HCIPacket
    }

    private let entries = Mutex<[Entry]>([])

    func append(_ packet: HCIPacket, fromHost: Bool) {
        let now = ContinuousClock.now
        entries.withLock { $0.append(Entry(at: now, fromHost: fromHost, packet: packet)) }
    }

    /// The radio's time read from the trace: commands take effect when the controller answers
    /// them with success; legacy advertising stops when a peer connects to it; an attempt runs from
    /// LE Create Connection's status to its LE Connection Complete; a link from its LE Connection
    /// Complete to its Disconnection Complete; everything stops with the trace's end.
    func account() -> RadioTimeSummary {
        let entries = entries.withLock { $0 }
        guard let first = entries.first, let last = entries.last else { return RadioTimeSummary() }
        var summary = RadioTimeSummary()
        var sent: [UInt16: [UInt8]] = [:]
        var scanParameters = (window: 0.0, interval: 1.0)
        var advertisingInterval = 0.0
        var scanning: Double?
        var advertising: Double?
        var initiating: (window: Double, interval: Double)?
        var links: [UInt16: Double] = [:]
        var events = 0.0
        var counted = first.at

        func count(until instant: ContinuousClock.Instant) {
            let seconds = counted.duration(to: instant) / .seconds(1)
            guard seconds > 0 else { return }
            summary.observedSeconds += seconds
            let scan = scanning ?? 0
            let initiation = initiating.map { min(1, $0.window / $0.interval) } ?? 0
            let linkDuty = links.values.reduce(0) { $0 + min(1, 0.002 / $1) }
            summary.scanningSeconds += seconds * scan
            summary.initiatingSeconds += seconds * initiation
            summary.linkListeningSeconds += seconds * linkDuty
            summary.receiverSeconds += seconds * min(1, scan + initiation + linkDuty)
            if let interval = advertising {
                summary.advertisingSeconds += seconds
                events += seconds / (interval + 0.005)
            }
            summary.linkSeconds += seconds * Double(links.count)
            counted = instant
        }
        func u16(_ bytes: [UInt8], _ offset: Int) -> UInt16 { UInt16(bytes[offset]) | UInt16(bytes[offset + 1]) << 8 }

        for entry in entries {
            count(until: entry.at)
            let body = entry.packet.body
            if entry.fromHost {
                guard entry.packet.type == .command, body.count >= 3 else { continue }
                sent[u16(body, 0)] = Array(body.dropFirst(3))
                continue
            }
            guard entry.packet.type == .event, body.count >= 2 else { continue }
            let parameters = Array(body.dropFirst(2))
            switch body[0] {
            case 0x0E where parameters.count >= 4 && parameters[3] == 0:  // Command Complete, success
                let opcode = u16(parameters, 1)
                let command = sent[opcode] ?? []
                switch opcode {
                case 0x200B where command.count >= 5:  // LE Set Scan Parameters
                    scanParameters = (Double(u16(command, 3)) * 0.000625, Double(u16(command, 1)) * 0.000625)
                case 0x200C where command.count >= 1:  // LE Set Scan Enable
                    scanning = command[0] == 1 ? min(1, scanParameters.window / scanParameters.interval) : nil
                case 0x2006 where command.count >= 2:  // LE Set Advertising Parameters
                    advertisingInterval = Double(u16(command, 0)) * 0.000625
                case 0x200A where command.count >= 1:  // LE Set Advertising Enable
                    advertising = command[0] == 1 ? advertisingInterval : nil
                case 0x0C03:  // Reset
                    (scanning, advertising, initiating) = (nil, nil, nil)
                    links.removeAll()
                default: break
                }
            case 0x0F where parameters.count >= 4 && parameters[0] == 0:  // Command Status, success
                let command = sent[u16(parameters, 2)] ?? []
                if u16(parameters, 2) == 0x200D, command.count >= 4 {  // LE Create Connection
                    initiating = (Double(u16(command, 2)) * 0.000625, Double(u16(command, 0)) * 0.000625)
                    summary.connectionAttempts += 1
                }
            case 0x05 where parameters.count >= 3 && parameters[0] == 0:  // Disconnection Complete
                links[u16(parameters, 1)] = nil
            case 0x3E where parameters.count >= 1 && (parameters[0] == 0x01 || parameters[0] == 0x0A):  // LE (Enhanced) Connection Complete
                let intervalOffset = parameters[0] == 0x01 ? 12 : 24
                guard parameters.count >= intervalOffset + 2 else { continue }
                let role = parameters[4]
                if role == 0 { initiating = nil }
                guard parameters[1] == 0 else { continue }
                links[u16(parameters, 2)] = Double(u16(parameters, intervalOffset)) * 0.00125
                summary.connections += 1
                if role == 1 { advertising = nil }
            default: break
            }
        }
        count(until: last.at)
        summary.advertisingEvents = Int(events.rounded())
        return summary
    }
}

/// A transport that keeps every packet it carries in an `HCITrace`.
final class TracingTransport: HCITransport {
    let inner: any HCITransport
    let trace: HCITrace
    let incoming: AsyncThrowingStream<HCIPacket, any Error>

    init(inner: any HCITransport, trace: HCITrace) {
        self.inner = inner
        self.trace = trace
        let (stream, continuation) = AsyncThrowingStream.makeStream(of: HCIPacket.self, throwing: (any Error).self)
        incoming = stream
        Task {
            do {
                for try await packet in inner.incoming {
                    trace.append(packet, fromHost: false)
                    continuation.yield(packet)
                }
                continuation.finish()
            } catch {
                continuation.finish(throwing: error)
            }
        }
    }

    func send(_ packet: HCIPacket) async throws(HCITransportError) {
        trace.append(packet, fromHost: true)
        try await inner.send(packet)
    }

    func close() async { await inner.close() }
}
