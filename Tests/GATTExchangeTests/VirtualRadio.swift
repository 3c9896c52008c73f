import Foundation
import Testing

/// A Bumble process with N virtual controllers on one LocalLink (Tests/Support/bumble/virtual_link.py),
/// each reachable as `tcp:127.0.0.1:PORT`. One per test; `stop()` ends it.
final class BumbleVirtualLink {
    let ports: [UInt16]
    private let process: Process
    private let standardInput: Pipe

    static let pythonEnvironmentVariable = "TRACER_BUMBLE_PYTHON"
    /// The repository's root, found from this file's path (Tests/GATTExchangeTests/...).
    static var repositoryRoot: URL {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    }

    /// The venv `scripts/setup` creates.
    static var defaultPython: String { repositoryRoot.appendingPathComponent(".venv-bumble/bin/python").path }

    static var launcherScript: String {
        repositoryRoot.appendingPathComponent("Tests/Support/bumble/virtual_link.py").path
    }

    enum LaunchError: Error, CustomStringConvertible {
        case pythonMissing(String)
        case notReady(String)

        var description: String {
            switch self {
            case .pythonMissing(let path):
                "No Python with Bumble at \(path). Run ./scripts/setup (it creates .venv-bumble), "
                    + "or point \(BumbleVirtualLink.pythonEnvironmentVariable) at a Python that has bumble installed."
            case .notReady(let detail): "Bumble virtual link did not start: \(detail)"
            }
        }
    }

    private init(process: Process, standardInput: Pipe, ports: [UInt16]) {
        self.process = process
        self.standardInput = standardInput
        self.ports = ports
    }

    static func launch(controllers: Int) async throws -> BumbleVirtualLink {
        try await launch(arguments: [String(controllers)], expecting: controllers)
    }

    /// A link whose controllers listen on these ports, for a test that restarts the "radio".
    static func launch(ports: [UInt16]) async throws -> BumbleVirtualLink {
        try await launch(arguments: ports.map(String.init), expecting: ports.count)
    }

    private static func launch(arguments: [String], expecting controllers: Int) async throws -> BumbleVirtualLink {
        let candidates = [ProcessInfo.processInfo.environment[pythonEnvironmentVariable], defaultPython].compactMap { $0 }
        guard let python = candidates.first(where: { FileManager.default.isExecutableFile(atPath: $0) }) else {
            throw LaunchError.pythonMissing(candidates.joined(separator: " or "))
        }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: python)
        process.arguments = [launcherScript] + arguments
        let input = Pipe()
        let output = Pipe()
        process.standardInput = input
        process.standardOutput = output
        process.standardError = FileHandle.standardError
        try process.run()
        let reader = output.fileHandleForReading
        let line: String
        do {
            line = try await readLine(from: reader, of: process, timeout: .seconds(20))
        } catch {
            process.terminate()
            throw error
        }
        let words = line.split(separator: " ")
        guard words.first == "READY", words.count == controllers + 1 else {
            process.terminate()
            throw LaunchError.notReady("unexpected first line \"\(line)\"")
        }
        return BumbleVirtualLink(process: process, standardInput: input, ports: words.dropFirst().compactMap { UInt16($0) })
    }

    /// Ends the process: SIGTERM, and closing its stdin in case the signal is missed.
    func stop() {
        if process.isRunning { process.terminate() }
        try? standardInput.fileHandleForWriting.close()
        // A launcher busy with a flood of radio traffic may miss both; a test must still end.
        let deadline = Date().addingTimeInterval(2)
        while process.isRunning && Date() < deadline { usleep(20_000) }
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
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
