import ArgumentParser
import Foundation

struct DoctorCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "doctor",
        abstract: "Check what the node needs and say how to fix what fails.",
        discussion: """
            Checks the configuration, the database (integrity check; whether a running node can write \
            its ids and encounters), the Bluetooth controller \
            (transport, LE initialisation, advertising, scanning; while `tracer run` holds it, advertising \
            and scanning fail only when the running node reports them off), \
            the kernel's Bluetooth adapters (address, powered, held by bluetoothd or a user channel, which to use), \
            the positive list server (reachable, list verifies with the configured key), the clock \
            and, with place.source = gpsd, gpsd (reachable at place.gpsd_host:place.gpsd_port, has a fix). \
            Exit code 0 when nothing failed, 1 otherwise.
            """)

    @OptionGroup var config: ConfigOptions
    @OptionGroup var store: StoreOptions
    @OptionGroup var server: ListServerOptions
    @Option(help: ArgumentHelp("The Bluetooth controller to check (node.transport).", valueName: "transport"))
    var transport: String?
    @Flag(help: "Print the results as JSON.") var json = false

    func run() async throws {
        var flags = server.settingFlags
        flags["node.database"] = store.db
        flags["node.transport"] = transport
        var results: [DoctorCheck]
        do {
            let resolved = try config.resolve(flags: flags)
            let file = resolved.configFile.path.map { resolved.configFile.exists ? $0 : "\($0) (absent: defaults apply)" } ?? "none"
            results = [.pass("configuration", file)]
            let checks = DoctorChecks(resolved: resolved)
            results.append(checks.store())
            results += checks.runningNodeStore()
            results += await checks.radio()
            results += checks.adapters()
            let (list, serverDate) = await checks.listServer()
            results.append(list)
            if let splitView = checks.listSplitView() { results.append(splitView) }
            results += await checks.furtherListServers()
            results.append(checks.clock(serverDate: serverDate))
            results.append(checks.calibration())
            let place = PlaceInForce(settings: resolved.settings)
            if let gpsd = place.doctorCheck(gpsd: await place.probeGPSD()) { results.append(gpsd) }
        } catch {
            results = [.fail("configuration", UserMessage.describe(error), fix: "Fix the setting named above; `tracer config` shows every value and its source.")]
        }
        if json {
            try Output.printJSON(results)
        } else {
            for result in results {
                let mark = switch result.outcome {
                case .pass: "[ ok ]"
                case .fail: "[FAIL]"
                case .skipped: "[skip]"
                case .info: "[info]"
                }
                print("\(mark) \(result.name): \(result.detail)")
                if let fix = result.fix { print("       fix: \(fix)") }
            }
        }
        if results.contains(where: { $0.outcome == .fail }) { throw ExitCode.failure }
    }
}
