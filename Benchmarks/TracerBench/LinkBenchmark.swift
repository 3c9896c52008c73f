import Foundation
import BLEHost
import GATTExchange

/// Connect → discover → read → write → disconnect, 50 rounds, between our central and our
/// peripheral and between Bumble's central and Bumble's peripheral, on one virtual link (four
/// controllers of one Bumble process), in the same run.
///
/// A round is timed from the link's forming (the central's host told the connection is complete)
/// to Disconnection Complete, the same way on both sides. The wait before it, for the peripheral's
/// next advertising event (the virtual controller forms a link only on one), is the peripheral's
/// advertising interval, not the link's work, and differs between the two peripherals (0.4 s for
/// ours, 0.16 s for Bumble's in its controller), so it is reported apart.
struct LinkBenchmark {
    let repository: URL
    let rounds: Int

    var python: String {
        ProcessInfo.processInfo.environment["TRACER_BUMBLE_PYTHON"]
            ?? repository.appendingPathComponent(".venv-bumble/bin/python").path
    }

    func script(_ name: String) -> String { repository.appendingPathComponent("Tests/Support/bumble/\(name)").path }

    func run() async throws {
        say("# Link benchmark: connect, discover, read, write, disconnect (\(Date()))")
        let link = try ChildProcess.start(python, [script("virtual_link.py"), "4"])
        defer { link.stop() }
        let ready = try link.readLine(timeout: 20)
        let ports = ready.split(separator: " ").dropFirst().compactMap { UInt16($0) }
        guard ready.hasPrefix("READY"), ports.count == 4 else { throw BenchmarkError("virtual link said: \(ready)") }

        let ours = try await ourRounds(peripheralPort: ports[0], centralPort: ports[1])
        say(String(format: "ours done: median %.2f ms", median(ours.map(\.link))))
        let bumble = try bumbleRounds(peripheralPort: ports[2], centralPort: ports[3])
        let ourLinks = ours.map(\.link)
        let ourMedian = median(ourLinks)
        say(String(format: "ours:   median %.2f ms over %d rounds (min %.2f, max %.2f); with the wait for advertising %.2f ms",
                   ourMedian, ours.count, ourLinks.min() ?? 0, ourLinks.max() ?? 0, median(ours.map(\.withAdvertisingWait))))
        say(String(format: "bumble: median %.2f ms over %d rounds; with the wait for advertising %.2f ms",
                   bumble.link, bumble.rounds, bumble.withAdvertisingWait))
        say(String(format: "ratio ours/bumble: %.2fx (target <= 1.2x)", ourMedian / bumble.link))
    }

    /// One round's time, in milliseconds: from the link's forming to Disconnection Complete, and
    /// from the connect call, which includes the wait for the peripheral's advertising event.
    struct Round {
        let link: Double
        let withAdvertisingWait: Double
    }

    private func ourRounds(peripheralPort: UInt16, centralPort: UInt16) async throws -> [Round] {
        let peripheralID = PeerIDBytes([0xA1, 0xA2, 0xA3, 0xA4, 0xA5, 0xA6, 0xA7, 0xA8])!
        let centralID = PeerIDBytes([0xC1, 0xC2, 0xC3, 0xC4, 0xC5, 0xC6, 0xC7, 0xC8])!
        func database(_ id: PeerIDBytes) throws -> GATTDatabase {
            try GATTDatabase(services: [TracerService.definition(currentID: { id }, onPeerWrite: { _ in })])
        }
        let peripheral = try await LEHost.open(
            transport: try openHCITransport(.tcp(host: "127.0.0.1", port: peripheralPort)), database: try database(peripheralID))
        let central = try await LEHost.open(
            transport: try openHCITransport(.tcp(host: "127.0.0.1", port: centralPort)), database: try database(centralID))
        try await peripheral.startAdvertising(TracerService.advertisingData(txPower: 4))
        guard let address = await peripheral.randomAddress else { throw BenchmarkError("peripheral has no address") }

        var totals: [Round] = []
        let clock = ContinuousClock()
        for round in 0..<rounds {
            let started = clock.now
            let connection = try await central.connect(to: address, type: .random)
            let connected = clock.now
            let id = try await TracerPeerExchange(bearer: connection.bearer)
                .exchange(writing: PeerIDWrite(id: centralID, reportedRSSI: -60, txPower: 4))
            await central.disconnect(connection)
            _ = await connection.disconnected()
            let done = clock.now
            totals.append(Round(link: milliseconds(done - connected), withAdvertisingWait: milliseconds(done - started)))
            guard id == peripheralID else { throw BenchmarkError("round \(round) read the wrong id") }
        }
        await central.close()
        await peripheral.close()
        return totals
    }

    /// Bumble's central times the same phases: `median_exchange_ms` is its rounds from the link's
    /// forming (its `connect` returned) to Disconnection Complete.
    private func bumbleRounds(
        peripheralPort: UInt16, centralPort: UInt16
    ) throws -> (link: Double, withAdvertisingWait: Double, rounds: Int) {
        let peripheral = try ChildProcess.start(python, [
            script("tracer_peripheral.py"), "--transport", "tcp-client:127.0.0.1:\(peripheralPort)",
            "--connections", String(rounds), "--timeout", "120",
        ])
        defer { peripheral.stop() }
        let central = try ChildProcess.start(python, [
            script("tracer_central.py"), "--transport", "tcp-client:127.0.0.1:\(centralPort)",
            "--rounds", String(rounds), "--timeout", "120",
        ])
        let output = try central.readAll(timeout: 150)
        guard let data = output.data(using: .utf8),
              let json = try JSONSerialization.jsonObject(with: data) as? [String: Any],
              let link = json["median_exchange_ms"] as? Double,
              let withAdvertisingWait = json["median_ms"] as? Double
        else { throw BenchmarkError("Bumble central printed: \(output.prefix(400))") }
        return (link, withAdvertisingWait, json["rounds"] as? Int ?? rounds)
    }

    private func milliseconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) * 1000 + Double(duration.components.attoseconds) / 1e15
    }
}

struct BenchmarkError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// A child process whose stdout the benchmark reads.
final class ChildProcess {
    private let process = Process()
    private let output = Pipe()

    var pid: Int32 { process.processIdentifier }
    var isRunning: Bool { process.isRunning }

    /// Closes the child's stdin: the Bumble scripts stop when it closes.
    func closeInput() {
        try? (process.standardInput as? Pipe)?.fileHandleForWriting.close()
    }

    /// - Parameters:
    ///   - logFile: where the child's stdout and stderr go (then `readLine` has nothing to read);
    ///     nil sends stdout to this process's pipe and stderr nowhere.
    ///   - environment: variables added to this process's environment for the child.
    static func start(
        _ executable: String, _ arguments: [String], logFile: String? = nil, environment: [String: String] = [:]
    ) throws -> ChildProcess {
        let child = ChildProcess()
        child.process.executableURL = URL(fileURLWithPath: executable)
        child.process.arguments = arguments
        if let logFile {
            guard FileManager.default.createFile(atPath: logFile, contents: nil),
                  let handle = FileHandle(forWritingAtPath: logFile)
            else { throw BenchmarkError("cannot create \(logFile)") }
            child.process.standardOutput = handle
            child.process.standardError = handle
        } else {
            child.process.standardOutput = child.output
            child.process.standardError = FileHandle.nullDevice
        }
        if !environment.isEmpty {
            child.process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        }
        child.process.standardInput = Pipe()
        try child.process.run()
        return child
    }

    /// The first line of output, waiting at most `timeout` seconds.
    func readLine(timeout: TimeInterval) throws -> String {
        let deadline = Date().addingTimeInterval(timeout)
        var bytes: [UInt8] = []
        let handle = output.fileHandleForReading
        while Date() < deadline {
            guard let byte = try handle.read(upToCount: 1)?.first else { break }
            if byte == UInt8(ascii: "\n") { return String(decoding: bytes, as: UTF8.self) }
            bytes.append(byte)
        }
        throw BenchmarkError("no line from \(process.executableURL?.path ?? "child") within \(timeout) s")
    }

    /// Everything the process prints until it exits.
    func readAll(timeout: TimeInterval) throws -> String {
        let data = try output.fileHandleForReading.readToEnd() ?? Data()
        process.waitUntilExit()
        return String(decoding: data, as: UTF8.self)
    }

    /// SIGTERM, then SIGKILL if the process is still there after `grace` seconds: a benchmark
    /// must end. False when it needed the SIGKILL.
    @discardableResult
    func stop(grace: TimeInterval = 2) -> Bool {
        guard process.isRunning else { return true }
        process.terminate()
        let deadline = Date().addingTimeInterval(grace)
        while process.isRunning && Date() < deadline { usleep(20_000) }
        let killed = process.isRunning
        if killed { kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
        return !killed
    }

    /// How the process ended, once it has: "exit 0", "signal 9"; nil while it runs.
    var exitDescription: String? {
        guard !process.isRunning else { return nil }
        return (process.terminationReason == .uncaughtSignal ? "signal " : "exit ") + "\(process.terminationStatus)"
    }
}
