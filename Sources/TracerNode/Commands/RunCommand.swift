import ArgumentParser
import Dispatch
import Foundation
import GATTExchange
import Logging

struct RunCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "run",
        abstract: "Run the node: rotate ids, advertise and scan over Bluetooth LE, log encounters, check the list.",
        discussion: """
            The transport names the Bluetooth controller: hci0 (a Linux adapter through the HCI user \
            channel; it must be down and not held by bluetoothd, unless --take-adapter lets the node power it off), serial:/dev/ttyACM0[,BAUD] (a UART \
            controller), or tcp:HOST:PORT / unix:PATH (H4 over a socket, for example a virtual controller \
            an emulator serves). With a positive list server configured, the node also checks the list every \
            check.interval seconds (plus a random delay of up to check.jitter), and between checks \
            revalidates it every check.refresh_interval seconds (plus up to check.refresh_jitter), \
            checking at once when it changed. Every option is also a \
            setting of the configuration file (see `tracer config`). Stops cleanly on SIGINT or \
            SIGTERM; SIGHUP reloads the configuration.
            """)

    @OptionGroup var config: ConfigOptions
    @OptionGroup var store: StoreOptions
    @OptionGroup var server: ListServerOptions
    @Option(help: ArgumentHelp("The Bluetooth controller: hci0, serial:DEVICE[,BAUD], tcp:HOST:PORT or unix:PATH (node.transport).", valueName: "transport"))
    var transport: String?
    @Option(help: ArgumentHelp("Seconds between id rotations, 5-86400 (node.rotation_interval).", valueName: "seconds"))
    var rotationInterval: String?
    @Option(help: ArgumentHelp("Largest random delay of a rotation after its boundary, in seconds (node.rotation_jitter).", valueName: "seconds"))
    var rotationJitter: String?
    @Option(help: ArgumentHelp("When the receiver listens: standard, low-power, continuous or minute-bursts (node.scan_schedule).", valueName: "schedule"))
    var scanSchedule: String?
    @Flag(help: "Scan without pause (node.continuous_scan, the same as --scan-schedule continuous; for demos and tests, costs battery).")
    var continuousScan = false
    @Flag(help: "On an hciN adapter that bluetoothd holds up, power it off and take it; desktop Bluetooth on it stops while the node runs (node.take_adapter).")
    var takeAdapter = false
    @Option(help: ArgumentHelp("Keep the node's metrics in this file for node_exporter's textfile collector (node.metrics_file).", valueName: "path"))
    var metricsFile: String?
    @Option(help: ArgumentHelp("Answer GET /metrics on PORT (127.0.0.1) or HOST:PORT with the same metrics (node.metrics_listen).", valueName: "address"))
    var metricsListen: String?
    @Option(help: ArgumentHelp("Log level: trace, debug, info, notice, warning, error (log.level).", valueName: "level"))
    var logLevel: String?
    @Option(help: ArgumentHelp("Log lines as text or json (log.format).", valueName: "format"))
    var logFormat: String?
    @Option(help: ArgumentHelp("Seconds between positive list checks, at least 60 (check.interval).", valueName: "seconds"))
    var checkInterval: String?
    @Option(help: ArgumentHelp("Largest random delay added to each check, in seconds (check.jitter).", valueName: "seconds"))
    var checkJitter: String?
    @Option(help: ArgumentHelp("Seconds between revalidations of the list, checked at once when it changed; 0: off (check.refresh_interval).", valueName: "seconds"))
    var refreshInterval: String?
    @Option(help: ArgumentHelp("Largest random delay added to each revalidation, in seconds (check.refresh_jitter).", valueName: "seconds"))
    var refreshJitter: String?
    @Flag(help: "Wait on the server's long poll and revalidate as soon as it publishes (check.long_poll).")
    var longPoll = false
    @Option(name: .customLong("on-exposure"), help: ArgumentHelp("A shell command to run when a check finds a new exposure (check.on_exposure).", valueName: "command"))
    var onExposure: String?
    @Option(help: ArgumentHelp("The name of this node's place, recorded with each encounter (place.name).", valueName: "name"))
    var placeName: String?
    @Option(help: ArgumentHelp("Where the node's position comes from: none or gpsd (place.source).", valueName: "source"))
    var placeSource: String?
    @Option(help: ArgumentHelp("Grid cell size positions are rounded to, in metres (place.precision).", valueName: "metres"))
    var placePrecision: String?

    /// The setting flags given on the command line, by setting key; the rest come from the
    /// environment, the configuration file or defaults.
    var settingFlags: [String: String] {
        var flags = server.settingFlags
        flags["node.database"] = store.db
        flags["node.transport"] = transport
        flags["node.rotation_interval"] = rotationInterval
        flags["node.rotation_jitter"] = rotationJitter
        flags["node.scan_schedule"] = scanSchedule
        if continuousScan { flags["node.continuous_scan"] = "true" }
        if takeAdapter { flags["node.take_adapter"] = "true" }
        flags["node.metrics_file"] = metricsFile
        flags["node.metrics_listen"] = metricsListen
        flags["log.level"] = logLevel
        flags["log.format"] = logFormat
        flags["check.interval"] = checkInterval
        flags["check.jitter"] = checkJitter
        flags["check.refresh_interval"] = refreshInterval
        flags["check.refresh_jitter"] = refreshJitter
        if longPoll { flags["check.long_poll"] = "true" }
        flags["check.on_exposure"] = onExposure
        flags["place.name"] = placeName
        flags["place.source"] = placeSource
        flags["place.precision"] = placePrecision
        return flags
    }

    func run() async throws {
        let resolved = try config.resolve(flags: settingFlags)
        // Before any part creates its logger: a logger keeps the handler it was made with.
        let levelControl = NodeLogging.bootstrap(format: resolved.settings.logFormat, level: resolved.settings.logLevel)
        let node = try RunningNode(resolved: resolved)
        await node.run(levelControl: levelControl) { [config, settingFlags] in
            try config.resolve(flags: settingFlags)
        }
    }
}
