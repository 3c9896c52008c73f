import ArgumentParser
import Dispatch
import Foundation
import GATTExchange
import IDRotation
import Logging

struct RunCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "run",
        abstract: "Run the node: rotate ids, advertise and scan over Bluetooth LE, log encounters.",
        discussion: """
            The transport names the Bluetooth controller: hci0 (a Linux adapter through the HCI user \
            channel; it must be down and not held by bluetoothd), serial:/dev/ttyACM0[,BAUD] (a UART \
            controller), or tcp:HOST:PORT / unix:PATH (H4 over a socket, for example a Bumble virtual \
            controller). Stops cleanly on SIGINT or SIGTERM.
            """)

    @OptionGroup var store: StoreOptions
    @Option(help: ArgumentHelp("The Bluetooth controller: hci0, serial:DEVICE[,BAUD], tcp:HOST:PORT or unix:PATH.", valueName: "transport"))
    var transport: String
    @Option(help: ArgumentHelp("Seconds between id rotations (5-86400).", valueName: "seconds"))
    var rotationInterval: Int64 = RotationSchedule.defaultInterval
    @Option(help: ArgumentHelp("Largest random delay of a rotation after its boundary, in seconds.", valueName: "seconds"))
    var rotationJitter: Int64 = 0
    @Flag(help: "Scan without pause instead of 10 s bursts every minute (for demos and tests; costs battery).")
    var continuousScan = false
    @Option(help: ArgumentHelp("Log level: trace, debug, info, notice, warning, error.", valueName: "level"))
    var logLevel: String = "info"

    func validate() throws {
        guard Logger.Level(rawValue: logLevel) != nil else {
            throw ValidationError("--log-level must be one of trace, debug, info, notice, warning, error.")
        }
    }

    func run() async throws {
        let spec: TransportSpec
        do { spec = try TransportSpec(parsing: transport) } catch { throw CommandFailure.badTransport("\(error)") }
        let schedule = try RotationSchedule(intervalSeconds: rotationInterval, jitterSeconds: rotationJitter)
        let opened = try store.open()
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = Logger.Level(rawValue: logLevel) ?? .info
            return handler
        }
        var exchange = ExchangeConfiguration()
        if continuousScan { exchange.scanOffTime = .zero }
        let service = NodeService(
            store: opened, transport: spec, schedule: schedule, retention: .standard, exchange: exchange,
            logger: Logger(label: "tracer.node"))
        let task = Task { await service.run() }
        let signals = [SIGINT, SIGTERM].map { number -> any DispatchSourceSignal in
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler { task.cancel() }
            source.resume()
            return source
        }
        await task.value
        signals.forEach { $0.cancel() }
    }
}
