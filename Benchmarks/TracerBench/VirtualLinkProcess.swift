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

    static func start(repository: URL, controllers: Int, onRootCanal: Bool) throws -> VirtualLinkProcess {
        let launcher = onRootCanal ? "Tests/Support/rootcanal/rootcanal_phy.py" : "Tests/Support/bumble/virtual_link.py"
        let link = try ChildProcess.start(python(repository: repository), [repository.appendingPathComponent(launcher).path, "\(controllers)"])
        let ready = try link.readLine(timeout: 20)
        let ports = ready.split(separator: " ").dropFirst().compactMap { UInt16($0) }
        guard ready.hasPrefix("READY"), ports.count == controllers else {
            link.stop()
            throw BenchmarkError("virtual link said: \(ready)")
        }
        return VirtualLinkProcess(process: link, ports: ports)
    }
}
