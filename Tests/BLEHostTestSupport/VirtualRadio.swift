import Foundation
// For Test.current, which names a launcher's log directory after the test that started it.
import Testing
import TestTiers

/// The virtual controller an end-to-end test runs on.
package enum VirtualController: String, CaseIterable, CustomStringConvertible, Sendable {
    /// Bumble's controllers on one LocalLink (Tests/Support/bumble/virtual_link.py): lenient, instant,
    /// quirky (/work/shared/bumble/NOTES.md).
    case bumble
    /// Android's RootCanal 1.10.0 (Tests/Support/rootcanal/rootcanal_phy.py): a link layer that follows
    /// the Core specification and takes the shape of real controller models.
    case rootCanal

    package var description: String {
        switch self {
        case .bumble: "Bumble"
        case .rootCanal: "RootCanal"
        }
    }
}

/// One launcher process with N virtual controllers that all hear each other, each reachable as
/// `tcp:127.0.0.1:PORT`: Bumble's (virtual_link.py) or RootCanal's (rootcanal_phy.py); both print
/// `READY port…` and stop when stdin closes or on SIGTERM. One per test; `stop()` ends it.
package final class VirtualRadio {
    package let kind: VirtualController
    package let ports: [UInt16]
    /// RootCanal model of each controller, in port order (empty for Bumble).
    package let models: [String]
    /// Holds the launcher's stderr and, for RootCanal, rootcanal's log (every HCI command it received,
    /// and why it refused or ignored things). Kept when TRACER_ROOTCANAL_LOG_DIR is set, else removed by `stop()`.
    package let logDirectory: String
    private let keepLogs: Bool
    private let process: Process
    private let standardInput: Pipe

    package static let pythonEnvironmentVariable = "TRACER_BUMBLE_PYTHON"
    /// A directory for the launchers' logs (one subdirectory per launch), which are then kept.
    package static let logDirectoryEnvironmentVariable = "TRACER_ROOTCANAL_LOG_DIR"
    /// The repository's root, found from this file's path (Tests/BLEHostTestSupport/...).
    package static var repositoryRoot: URL {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    }

    /// The venv `scripts/setup` creates (Bumble and rootcanal).
    package static var defaultPython: String { repositoryRoot.appendingPathComponent(".venv-bumble/bin/python").path }

    package static func launcherScript(_ kind: VirtualController) -> String {
        switch kind {
        case .bumble: repositoryRoot.appendingPathComponent("Tests/Support/bumble/virtual_link.py").path
        case .rootCanal: repositoryRoot.appendingPathComponent("Tests/Support/rootcanal/rootcanal_phy.py").path
        }
    }

    /// The RootCanal models that N controllers get, in turn, so that every test meets a mix of real
    /// controller shapes: a BR/EDR+LE 5.3 controller, an nRF52840 dongle (LE only, 5.4, 512-octet LE
    /// buffers), a CSR 4.2 dongle (LE shares BR/EDR buffers, no extended advertising), and strict ones.
    package static let rootCanalModelCycle = ["DEFAULT", "LAIRD_BL654", "CSR_RCK_PTS_DONGLE+strict", "DEFAULT+strict"]

    package static func rootCanalModels(count: Int) -> [String] {
        (0..<count).map { rootCanalModelCycle[$0 % rootCanalModelCycle.count] }
    }

    package enum LaunchError: Error, CustomStringConvertible {
        case pythonMissing(String)
        case notReady(String)

        package var description: String {
            switch self {
            case .pythonMissing(let path):
                "No Python with Bumble and rootcanal at \(path). Run ./scripts/setup (it creates .venv-bumble), "
                    + "or point \(VirtualRadio.pythonEnvironmentVariable) at a Python that has bumble and rootcanal installed."
            case .notReady(let detail): "The virtual radio did not start: \(detail)"
            }
        }
    }

    private init(kind: VirtualController, process: Process, standardInput: Pipe, ports: [UInt16], models: [String],
                 logDirectory: String, keepLogs: Bool) {
        self.kind = kind
        self.process = process
        self.standardInput = standardInput
        self.ports = ports
        self.models = models
        self.logDirectory = logDirectory
        self.keepLogs = keepLogs
    }

    package static func launch(_ kind: VirtualController, controllers: Int) async throws -> VirtualRadio {
        switch kind {
        case .bumble: try await launch(.bumble, arguments: [String(controllers)], models: [], expecting: controllers, retries: 3)
        case .rootCanal: try await launch(rootCanalModels: rootCanalModels(count: controllers))
        }
    }

    /// A radio whose controllers listen on these ports, for a test that restarts the "radio". RootCanal
    /// controllers get the same models as `launch(_:controllers:)` gives.
    package static func launch(_ kind: VirtualController, ports: [UInt16]) async throws -> VirtualRadio {
        let arguments = ports.map(String.init)
        switch kind {
        case .bumble:
            return try await launch(.bumble, arguments: arguments, models: [], expecting: ports.count, retries: 1)
        case .rootCanal:
            let models = rootCanalModels(count: ports.count)
            return try await launch(.rootCanal, arguments: ["--ports", arguments.joined(separator: ",")] + models,
                                    models: models, expecting: ports.count, retries: 1)
        }
    }

    /// RootCanal controllers of these models (`DEFAULT`, `LAIRD_BL654`, `CSR_RCK_PTS_DONGLE`, each
    /// optionally `+strict`) on free ports.
    package static func launch(rootCanalModels models: [String]) async throws -> VirtualRadio {
        try await launch(.rootCanal, arguments: models, models: models, expecting: models.count, retries: 3)
    }

    /// The launcher picks free ports by probing; another process can take one before the controller
    /// binds it, so a start on ports of its choosing is tried again (`retries` attempts in all).
    private static func launch(
        _ kind: VirtualController, arguments: [String], models: [String], expecting controllers: Int, retries: Int
    ) async throws -> VirtualRadio {
        try (kind == .bumble ? RequiredTool.bumble : RequiredTool.rootCanal).require()
        let candidates = [ProcessInfo.processInfo.environment[pythonEnvironmentVariable], defaultPython].compactMap { $0 }
        guard let python = candidates.first(where: { FileManager.default.isExecutableFile(atPath: $0) }) else {
            throw LaunchError.pythonMissing(candidates.joined(separator: " or "))
        }
        var failures: [String] = []
        for _ in 0..<retries {
            do {
                return try await start(kind, python: python, arguments: arguments, models: models, expecting: controllers)
            } catch LaunchError.notReady(let detail) {
                failures.append(detail)
            }
        }
        throw LaunchError.notReady(failures.joined(separator: "\n--- then ---\n"))
    }

    private static func start(
        _ kind: VirtualController, python: String, arguments: [String], models: [String], expecting controllers: Int
    ) async throws -> VirtualRadio {
        let base = ProcessInfo.processInfo.environment[logDirectoryEnvironmentVariable].flatMap { $0.isEmpty ? nil : $0 }
        let testName = (Test.current?.name ?? "radio").filter { $0.isLetter || $0.isNumber }
        let stamp = Int(Date().timeIntervalSince1970 * 1000)
        let logDirectory = (base ?? NSTemporaryDirectory()) + "/\(stamp)-\(kind.rawValue)-\(testName)-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: logDirectory, withIntermediateDirectories: true)
        let launcherLog = logDirectory + "/launcher.log"
        guard FileManager.default.createFile(atPath: launcherLog, contents: nil),
              let log = FileHandle(forWritingAtPath: launcherLog) else { throw LaunchError.notReady("cannot create \(launcherLog)") }
        defer { try? log.close() }

        let process = Process()
        process.executableURL = URL(fileURLWithPath: python)
        process.arguments = [launcherScript(kind)] + arguments
        var environment = ProcessInfo.processInfo.environment
        environment[logDirectoryEnvironmentVariable] = logDirectory
        process.environment = environment
        let input = Pipe()
        let output = Pipe()
        process.standardInput = input
        process.standardOutput = output
        process.standardError = log
        try process.run()

        func failure(_ detail: String) -> LaunchError {
            if process.isRunning { process.terminate() }
            try? input.fileHandleForWriting.close()
            process.waitUntilExit()
            let stderr = (try? String(contentsOfFile: launcherLog, encoding: .utf8)) ?? ""
            return .notReady("\(kind) launcher \(arguments.joined(separator: " ")): \(detail); "
                + "logs kept in \(logDirectory); its stderr ends:\n\(stderr.suffix(2000))")
        }
        let line: String
        do {
            line = try await readLine(from: output.fileHandleForReading, of: process, timeout: .seconds(20))
        } catch {
            throw failure("\(error)")
        }
        let words = line.split(separator: " ")
        guard words.first == "READY", words.count == controllers + 1 else {
            throw failure("unexpected first line \"\(line)\"")
        }
        return VirtualRadio(kind: kind, process: process, standardInput: input, ports: words.dropFirst().compactMap { UInt16($0) },
                            models: models, logDirectory: logDirectory, keepLogs: base != nil)
    }

    /// The radio dies without a goodbye to the hosts on it (SIGKILL): Bumble's controllers live in
    /// the launcher's process and end with it. Not for RootCanal, whose rootcanal process would
    /// outlive its launcher.
    package func killHard() {
        precondition(kind == .bumble, "killHard() ends Bumble's radio only; rootcanal would outlive its launcher")
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
        try? standardInput.fileHandleForWriting.close()
    }

    /// Ends the process: SIGTERM, and closing its stdin in case the signal is missed.
    package func stop() {
        if process.isRunning { process.terminate() }
        try? standardInput.fileHandleForWriting.close()
        // A launcher busy with a flood of radio traffic may miss both; a test must still end.
        // rootcanal_phy.py gives rootcanal 2 s to stop before killing it.
        _ = eventuallyBlocking(timeout: .seconds(kind == .rootCanal ? 4 : 2), every: .milliseconds(20)) { !process.isRunning }
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
        if !keepLogs { try? FileManager.default.removeItem(atPath: logDirectory) }
    }

    private static func readLine(from handle: FileHandle, of process: Process, timeout: Duration) async throws -> String {
        try await withThrowingTaskGroup(of: String.self) { group in
            group.addTask {
                try await withCheckedThrowingContinuation { continuation in
                    // The blocking read runs on its own thread so that it never holds a cooperative thread.
                    Thread.detachNewThread {
                        var collected = Data()
                        while !collected.contains(0x0A) {
                            let chunk = handle.availableData
                            if chunk.isEmpty { break }
                            collected.append(chunk)
                        }
                        guard let newline = collected.firstIndex(of: 0x0A) else {
                            continuation.resume(throwing: LaunchError.notReady("process exited before READY"))
                            return
                        }
                        continuation.resume(returning: String(decoding: collected[..<newline], as: UTF8.self))
                    }
                }
            }
            group.addTask {
                try await Task.sleep(for: timeout)
                // Ends the blocked read above (end of file), so that the group can finish.
                process.terminate()
                throw LaunchError.notReady("no READY line within \(timeout)")
            }
            let first = try await group.next() ?? ""
            group.cancelAll()
            return first
        }
    }
}
