import Foundation
import BLEHost
import GATTExchange
import IDRotation
import TracerCore

/// From a peer's first advertisement to both sides having logged each other, median of N rounds:
/// two of our nodes (one rotates to a new id and address each round, as if a new person walked
/// in) against two Bumble devices doing the same exchange, on one virtual link in the same run:
/// Bumble's (`virtual_link.py`) or RootCanal's (`rootcanal_phy.py`, four DEFAULT controllers).
///
/// Rounds are spaced by the exchange's crowd memory: a node counts the addresses it heard in the
/// last `crowdMemory` (10 s) to tell a lone pair from a crowd, and a peer rotating every half second
/// leaves behind as many stale addresses as a crowd would. People rotate every 15 minutes; without
/// the spacing, the benchmark measured the crowd's initiation spread, not a pair's exchange.
///
/// With scan plans (issue 40), the same rounds run again under each plan's own schedule instead of
/// continuous scanning, at the default advertising interval: the time then includes waiting for a
/// burst of either node, which is what a plan trades for its receiver's time.
struct ExchangeBenchmark {
    let repository: URL
    let rounds: Int
    var onRootCanal = false
    /// Plans whose schedule is measured after the continuous comparison with Bumble; none: only that.
    var plans: [ScanPlan] = []

    var python: String { VirtualLinkProcess.python(repository: repository) }

    func run() async throws {
        say("# Exchange benchmark on \(onRootCanal ? "RootCanal" : "Bumble"): first advertisement to both sides logged (\(Date()))")
        let link = try VirtualLinkProcess.start(repository: repository, controllers: 4, onRootCanal: onRootCanal)
        defer { link.process.stop() }
        let ports = link.ports

        let ours = try await ourRounds(ports[0], ports[1])
        let bumble = try bumbleRounds(peripheralPort: ports[2], centralPort: ports[3])
        let ourMedian = median(ours), bumbleMedian = median(bumble)
        say(String(format: "ours:   median %.1f ms, p90 %.1f ms over %d rounds", ourMedian, percentile(ours, 0.9), ours.count))
        say("ours, each round (ms): " + ours.map { String(format: "%.0f", $0) }.joined(separator: " "))
        say(String(format: "bumble: median %.1f ms, p90 %.1f ms over %d rounds", bumbleMedian, percentile(bumble, 0.9), bumble.count))
        say(String(format: "ratio ours/bumble (medians): %.2fx (target <= 1.2x)", ourMedian / bumbleMedian))
        var byPlan: [(ScanPlan, [Double])] = []
        for plan in plans {
            let times = try await ourRounds(ports[0], ports[1], plan: plan)
            say("\(plan.rawValue), each round (s): " + times.map { String(format: "%.1f", $0 / 1000) }.joined(separator: " "))
            byPlan.append((plan, times))
        }
        guard !byPlan.isEmpty else { return }
        say("## Under each plan's schedule (advertising every 250 ms): a newcomer's first advertisement to both sides logged")
        say("plan            rounds  median s  p90 s   max s")
        for (plan, times) in byPlan {
            say(plan.rawValue.padding(toLength: 15, withPad: " ", startingAt: 0) + String(
                format: " %6d  %8.1f  %5.1f  %6.1f", times.count, median(times) / 1000, percentile(times, 0.9) / 1000, (times.max() ?? .nan) / 1000))
        }
    }

    /// Records which (peer, our window) pairs were logged.
    actor RecordingSink: EncounterSink {
        private var logged: Set<String> = []
        func record(_ sighting: Sighting) { logged.insert("\(sighting.peer.rawValue)/\(sighting.ownWindowStart)") }
        func has(_ peer: UserID, window: UnixSeconds) -> Bool { logged.contains("\(peer.rawValue)/\(window)") }
    }

    struct Node {
        let host: LEHost
        let exchange: ProximityExchange
        let sink: RecordingSink

        /// Without a plan: continuous scanning at the Bumble peripheral's advertising interval.
        static func open(port: UInt16, plan: ScanPlan? = nil) async throws -> Node {
            var configuration = ExchangeConfiguration()
            if let plan {
                plan.apply(to: &configuration)
            } else {
                // The same advertising interval as the Bumble peripheral (0x00A0), for a like-for-like wait.
                configuration.radio.advertisingInterval = 0x00A0
                ScanPlan.continuous.apply(to: &configuration)
            }
            let identity = AdvertisedIdentity()
            let (writes, continuation) = AsyncStream.makeStream(of: PeerWriteEvent.self)
            let host = try await LEHost.open(
                transport: try openHCITransport(.tcp(host: "127.0.0.1", port: port)),
                databaseForLink: TracerGATTServer.databaseForLink(identity: identity, writes: continuation),
                configuration: configuration.radio)
            let sink = RecordingSink()
            let exchange = ProximityExchange(host: host, identity: identity, peerWrites: writes, sink: sink, configuration: configuration)
            return Node(host: host, exchange: exchange, sink: sink)
        }
    }

    private var tracing: Bool { ProcessInfo.processInfo.environment["TRACER_BENCH_LOG_LEVEL"] != nil }

    private func ourRounds(_ portA: UInt16, _ portB: UInt16, plan: ScanPlan? = nil) async throws -> [Double] {
        let a = try await Node.open(port: portA, plan: plan)
        let b = try await Node.open(port: portB, plan: plan)
        // Continuous scanning meets within a second; under a plan, two of its longest cycles on top.
        let roundLimit = Duration.seconds(15) + (plan.map { ExchangeConfiguration(scanPlan: $0).longestScanCycle * 2 } ?? .zero)
        // Windows from now on: the exchange starts no attempt for an id whose window is over.
        let base = UnixSeconds(Date().timeIntervalSince1970)
        let ownA = OwnID(id: .random(), window: IDWindow(start: base, end: base + 1_000_000))
        await a.exchange.rotate(to: ownA)
        try await a.exchange.start()
        var times: [Double] = []
        let clock = ContinuousClock()
        let spacing = ExchangeConfiguration().crowdMemory + .milliseconds(500)
        var previousRound: ContinuousClock.Instant?
        for round in 0..<rounds {
            if let previousRound { try await Task.sleep(until: previousRound + spacing, clock: clock) }
            previousRound = clock.now
            let window = IDWindow(start: base + UnixSeconds(round + 1) * 1_000, end: base + UnixSeconds(round + 2) * 1_000)
            let ownB = OwnID(id: .random(), window: window)
            await b.exchange.rotate(to: ownB)
            if round == 0 { try await b.exchange.start() }
            // Advertising from B's new address has just resumed: a newcomer's first advertisement.
            let started = clock.now
            if tracing { FileHandle.standardError.write(Data("round \(round) begins at \(Date())\n".utf8)) }
            while true {
                let aLoggedB = await a.sink.has(ownB.id, window: ownA.window.start)
                let bLoggedA = await b.sink.has(ownA.id, window: window.start)
                if aLoggedB && bLoggedA { break }
                if clock.now - started > roundLimit { throw BenchmarkError("round \(round): no exchange within \(roundLimit)") }
                try await Task.sleep(for: .milliseconds(2))
            }
            times.append(milliseconds(clock.now - started))
        }
        await a.exchange.stop()
        await b.exchange.stop()
        await a.host.close()
        await b.host.close()
        return times
    }

    /// Bumble's peripheral advertises; each round a fresh Bumble central scans, connects, discovers,
    /// reads the id and writes its own. Time = scan start to the first write's response, the
    /// moment both sides have logged each other (the peripheral records the write on arrival).
    private func bumbleRounds(peripheralPort: UInt16, centralPort: UInt16) throws -> [Double] {
        let script = { (name: String) in repository.appendingPathComponent("Tests/Support/bumble/\(name)").path }
        let peripheral = try ChildProcess.start(python, [
            script("tracer_peripheral.py"), "--transport", "tcp-client:127.0.0.1:\(peripheralPort)",
            "--connections", String(rounds), "--timeout", String(rounds * 10),
        ])
        defer { peripheral.stop() }
        var times: [Double] = []
        for round in 0..<rounds {
            let central = try ChildProcess.start(python, [
                script("tracer_central.py"), "--transport", "tcp-client:127.0.0.1:\(centralPort)", "--timeout", "20",
            ])
            let output = try central.readAll(timeout: 30)
            guard let json = try JSONSerialization.jsonObject(with: Data(output.utf8)) as? [String: Any],
                  let timings = json["timings_ms"] as? [String: Any]
            else { throw BenchmarkError("round \(round): Bumble central printed \(output.prefix(300))") }
            let phases = ["scan_to_connected", "discovery", "read", "write"].compactMap { timings[$0] as? Double }
            guard phases.count == 4 else { throw BenchmarkError("round \(round): timings \(timings)") }
            times.append(phases.reduce(0, +))
        }
        return times
    }

    private func median(_ values: [Double]) -> Double { percentile(values, 0.5) }

    private func percentile(_ values: [Double], _ fraction: Double) -> Double {
        let sorted = values.sorted()
        guard !sorted.isEmpty else { return .nan }
        return sorted[min(sorted.count - 1, Int((Double(sorted.count - 1) * fraction).rounded()))]
    }

    private func milliseconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) * 1000 + Double(duration.components.attoseconds) / 1e15
    }
}
