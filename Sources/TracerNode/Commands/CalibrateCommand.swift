import ArgumentParser
import BLEHost
import Foundation
import GATTExchange
import Logging
import Matching

struct CalibrateCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "calibrate",
        abstract: "Measure this node's RSSI correction against a reference Tracer node 1 m away.",
        discussion: """
            Put another machine running `tracer run` 1 m away, in line of sight, then run this on the \
            node to calibrate (its own `tracer run` stopped: both need the controller). It scans, keeps \
            only Tracer advertisements, and prints the median RSSI, the reference's advertised TX power, \
            the attenuation at 1 m and the risk.rssi_correction that makes it the \
            \(RSSICalibration.referenceAttenuationAtOneMetre) dB the risk model assumes at 1 m, with the \
            lines to add to the configuration file. With several Tracer nodes in range it uses the \
            strongest and says so; --peer chooses one. Exit code 1 when fewer than \
            \(RSSICalibration.minimumReadings) readings were heard.
            """)

    @OptionGroup var config: ConfigOptions
    @OptionGroup var store: StoreOptions
    @Option(help: ArgumentHelp("The Bluetooth controller: hci0, serial:DEVICE[,BAUD], tcp:HOST:PORT or unix:PATH (node.transport).", valueName: "transport"))
    var transport: String?
    @Option(help: ArgumentHelp("How long to scan, 1-600 seconds.", valueName: "seconds"))
    var seconds = 30
    @Option(help: ArgumentHelp("The reference node's address as the scan shows it (AA:BB:CC:DD:EE:FF), when several are in range.", valueName: "address"))
    var peer: String?

    func validate() throws {
        guard (1...600).contains(seconds) else { throw ValidationError("--seconds must be between 1 and 600.") }
        if let peer, BluetoothAddress(string: peer) == nil {
            throw ValidationError("--peer must be a Bluetooth address such as AA:BB:CC:DD:EE:FF.")
        }
    }

    func run() async throws {
        var flags: [String: String] = [:]
        flags["node.database"] = store.db
        flags["node.transport"] = transport
        let resolved = try config.resolve(flags: flags)
        guard let transportText = resolved.settings.transport else { throw CommandFailure.missingSetting(.transport) }
        // A node silent but present may still hold the controller: taking it (on serial, an HCI
        // Reset under the node) would break it.
        if let running = NodeRuntimeStatus.read(from: resolved.storeLocation.statusFilePath), running.mayBeRunning {
            throw CalibrationFailure.heldByRunningNode(pid: running.pid, transport: running.transport)
        }
        let spec: TransportSpec
        do { spec = try TransportSpec(parsing: transportText) } catch { throw CommandFailure.badTransport("\(error)") }
        let hciTransport: any HCITransport
        do { hciTransport = try openHCITransport(spec) } catch { throw CalibrationFailure.cannotOpen(spec: "\(spec)", reason: "\(error)") }
        var logger = Logger(label: "tracer.calibrate")
        logger.logLevel = .critical
        let host: LEHost
        do {
            host = try await LEHost.open(transport: hciTransport, database: try GATTDatabase(services: []), logger: logger)
        } catch {
            throw CalibrationFailure.controllerFailed("did not complete the LE initialisation: \(error)")
        }
        let heard: [BluetoothAddress: HeardPeer]
        do {
            heard = try await Self.scan(host, for: .seconds(seconds))
        } catch {
            await host.close()
            throw CalibrationFailure.controllerFailed("could not scan: \(error)")
        }
        await host.close()
        let assumedTxPower = Int(resolved.settings.risk.assumedTxPower)
        let chosen = try Self.choose(from: heard, peer: peer.flatMap(BluetoothAddress.init(string:)))
        // Said before the measurement is judged, so that a refusal still names the nodes heard.
        chosen.notice.forEach { print($0) }
        print(try Self.report(chosen.address, chosen.readings, seconds: seconds, assumedTxPower: assumedTxPower,
                              configFile: resolved.configFile.path))
    }

    /// One Tracer node's readings during the scan.
    struct HeardPeer: Equatable {
        var rssi: [Int] = []
        /// The last TX power it advertised; nil when it advertised none.
        var txPower: Int?
        var median: Double { RSSICalibration.median(rssi) ?? -.infinity }
    }

    /// Scans for `duration`, keeping the RSSI of every Tracer advertisement by address.
    static func scan(_ host: LEHost, for duration: Duration) async throws -> [BluetoothAddress: HeardPeer] {
        let sightings = try await host.startScanning()
        let collector = Task {
            var heard: [BluetoothAddress: HeardPeer] = [:]
            // 127 is the controller's "RSSI not available".
            for await sighting in sightings where sighting.rssi != 127 && TracerService.isAdvertised(in: sighting.data) {
                heard[sighting.address, default: HeardPeer()].rssi.append(Int(sighting.rssi))
                if let txPower = sighting.data.txPowerLevel { heard[sighting.address]?.txPower = Int(txPower) }
            }
            return heard
        }
        try await Task.sleep(for: duration)
        try await host.stopScanning()  // finishes the stream, so the collector returns
        return await collector.value
    }

    /// The reference: the given peer, else the strongest node heard (by median RSSI, then by
    /// readings), with a notice naming every node when several were heard.
    static func choose(from heard: [BluetoothAddress: HeardPeer], peer: BluetoothAddress?) throws
        -> (address: BluetoothAddress, readings: HeardPeer, notice: [String]) {
        if let peer { return (peer, heard[peer] ?? HeardPeer(), []) }
        let strongestFirst = heard.sorted {
            $0.value.median != $1.value.median ? $0.value.median > $1.value.median : $0.value.rssi.count > $1.value.rssi.count
        }
        guard let strongest = strongestFirst.first else {
            throw CalibrationError.tooFewReadings(0, needed: RSSICalibration.minimumReadings)
        }
        guard strongestFirst.count > 1 else { return (strongest.key, strongest.value, []) }
        let nodes = strongestFirst.map { "\($0.key) (\($0.value.rssi.count) readings, median \(RSSICalibration.decibels($0.value.median)) dBm)" }
        return (strongest.key, strongest.value, [
            "Heard \(strongestFirst.count) Tracer nodes: \(nodes.joined(separator: ", ")).",
            "Using the strongest, \(strongest.key); give --peer ADDRESS to choose the reference.",
        ])
    }

    /// The command's output, or the error that says why no value can be given.
    static func report(_ address: BluetoothAddress, _ readings: HeardPeer, seconds: Int,
                       assumedTxPower: Int, configFile: String?) throws -> String {
        let txPower = readings.txPower ?? assumedTxPower
        let calibration = try RSSICalibration(rssiReadings: readings.rssi, txPower: txPower)
        let reference = RSSICalibration.referenceAttenuationAtOneMetre
        return [
            "Reference node: \(address)",
            "Readings: \(calibration.readings) in \(seconds) s",
            "Median RSSI: \(RSSICalibration.decibels(calibration.medianRSSI)) dBm",
            "Advertised TX power: " + (readings.txPower.map { "\($0) dBm" } ?? "none; \(txPower) dBm assumed (risk.assumed_tx_power)"),
            "Attenuation at 1 m: \(RSSICalibration.decibels(calibration.attenuationAtOneMetre)) dB (the risk model assumes \(reference) dB)",
            "Correction: \(calibration.correction) dB",
            "",
            "Add to the configuration file\(configFile.map { " (\($0))" } ?? ""), then start `tracer run` again; `tracer check` uses it from its next run:",
            "[risk]",
            "rssi_correction = \(calibration.correction)",
        ].joined(separator: "\n")
    }
}

/// Why `tracer calibrate` could not measure, each with what to do.
enum CalibrationFailure: Error, CustomStringConvertible {
    case heldByRunningNode(pid: Int32, transport: String)
    case cannotOpen(spec: String, reason: String)
    case controllerFailed(String)

    var description: String {
        switch self {
        case .heldByRunningNode(let pid, let transport):
            return "A running node (pid \(pid)) holds \(transport); stop this node's `tracer run` while it calibrates (the reference node keeps running on its own machine), then try again."
        case .cannotOpen(let spec, let reason):
            return "Cannot open \(spec): \(reason). `tracer doctor` says what the controller needs."
        case .controllerFailed(let detail):
            return "The controller \(detail); check that no other program uses it (`tracer doctor`), then try again."
        }
    }
}
