import Foundation

/// A virtual link of `controllers` controllers for in-process nodes: Bumble's
/// (`Tests/Support/bumble/virtual_link.py`) or RootCanal's (`Tests/Support/rootcanal/rootcanal_phy.py`),
/// started with the Bumble virtual environment's Python, and the TCP port of each controller.
struct VirtualLinkProcess {
    let process: ChildProcess
    let ports: [UInt16]

    static func python(repository: URL) -> String {
        ProcessInfo.processInfo.environment["TRACER_BUMBLE_PYTHON"]
            ?? repository.appendingPathComponent(".venv-bumble/bin/python").path
    }

    /// rootcanal_phy.py: TRACER_ROOTCANAL_PHY, or where the test harness keeps it.
    static func rootCanalLauncher(repository: URL) -> String {
        ProcessInfo.processInfo.environment["TRACER_ROOTCANAL_PHY"]
            ?? repository.appendingPathComponent("Tests/Support/rootcanal/rootcanal_phy.py").path
    }

    static func start(repository: URL, controllers: Int, onRootCanal: Bool) throws -> VirtualLinkProcess {
        if onRootCanal { return try start(repository: repository, rootCanalModels: Array(repeating: "DEFAULT", count: controllers)) }
        return try start(
            python(repository: repository), [repository.appendingPathComponent("Tests/Support/bumble/virtual_link.py").path, "\(controllers)"],
            controllers: controllers)
    }

    /// RootCanal controllers of the given models (`CrowdPhy.rootCanalModels`), one per entry, in
    /// that order; rootcanal's log goes into `logDirectory` when given.
    static func start(repository: URL, rootCanalModels models: [String], logDirectory: String? = nil) throws -> VirtualLinkProcess {
        let launcher = rootCanalLauncher(repository: repository)
        guard FileManager.default.fileExists(atPath: launcher) else {
            throw BenchmarkError("no RootCanal launcher at \(launcher); set TRACER_ROOTCANAL_PHY")
        }
        return try start(
            python(repository: repository), [launcher] + models, controllers: models.count,
            environment: logDirectory.map { ["TRACER_ROOTCANAL_LOG_DIR": $0] } ?? [:], timeout: 30)
    }

    private static func start(
        _ python: String, _ arguments: [String], controllers: Int, environment: [String: String] = [:], timeout: TimeInterval = 20
    ) throws -> VirtualLinkProcess {
        let link = try ChildProcess.start(python, arguments, environment: environment)
        let ready: String
        do { ready = try link.readLine(timeout: timeout) } catch {
            link.stop()
            throw error
        }
        let ports = ready.split(separator: " ").dropFirst().compactMap { UInt16($0) }
        guard ready.hasPrefix("READY"), ports.count == controllers else {
            link.stop()
            throw BenchmarkError("virtual link said: \(ready)")
        }
        return VirtualLinkProcess(process: link, ports: ports)
    }
}
