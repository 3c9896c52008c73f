import Foundation
import TestTiers

/// A Bumble device (Tests/Support/bumble/tracer_*.py) running as a separate process: a foreign BLE
/// stack, the stand-in for a phone app. It prints one JSON object when it finishes.
package final class BumblePeer: @unchecked Sendable {
    // @unchecked: `process` and `output` are set once in `start` and only read afterwards; the
    // collected stdout is guarded by `lock`.
    private let process = Process()
    private let output = Pipe()
    private let lock = NSLock()
    private var collected = Data()
    private let finished = DispatchSemaphore(value: 0)

    /// Names a directory to keep each peer's debug log in (`-v`, stderr); unset, peers run quiet.
    package static let logDirectoryVariable = "TRACER_TEST_PEER_LOG_DIR"

    package static func start(_ script: String, _ arguments: [String]) throws -> BumblePeer {
        try RequiredTool.bumble.require()
        let peer = BumblePeer()
        let python = [ProcessInfo.processInfo.environment[VirtualRadio.pythonEnvironmentVariable],
                      VirtualRadio.defaultPython].compactMap { $0 }
            .first { FileManager.default.isExecutableFile(atPath: $0) }
        guard let python else { throw VirtualRadio.LaunchError.pythonMissing(VirtualRadio.defaultPython) }
        peer.process.executableURL = URL(fileURLWithPath: python)
        peer.process.arguments = [VirtualRadio.repositoryRoot.appendingPathComponent("Tests/Support/bumble/\(script)").path]
            + arguments
        peer.process.standardOutput = peer.output
        peer.process.standardError = FileHandle.nullDevice
        if let directory = ProcessInfo.processInfo.environment[logDirectoryVariable] {
            // For debugging a test: each peer's debug log (Bumble's HCI and link traffic included) in its own file.
            let path = "\(directory)/\(script)-\(UUID().uuidString.prefix(8)).log"
            if FileManager.default.createFile(atPath: path, contents: nil),
               let log = FileHandle(forWritingAtPath: path) {
                peer.process.arguments?.append("-v")
                peer.process.standardError = log
            }
        }
        peer.process.standardInput = FileHandle.nullDevice
        try peer.process.run()
        let handle = peer.output.fileHandleForReading
        Thread.detachNewThread {
            while true {
                let chunk = handle.availableData
                if chunk.isEmpty { break }
                peer.lock.withLock { peer.collected.append(chunk) }
            }
            peer.finished.signal()
        }
        return peer
    }

    /// The JSON object the script printed, once it exits (at most `timeout`).
    package func result(timeout: Duration = .seconds(30)) async throws -> [String: Any] {
        let seconds = Double(timeout.components.seconds)
        let done: Bool = await withCheckedContinuation { continuation in
            Thread.detachNewThread { continuation.resume(returning: self.finished.wait(timeout: .now() + seconds) == .success) }
        }
        if !done { stop() }
        process.waitUntilExit()
        let text = lock.withLock { String(decoding: collected, as: UTF8.self) }
        guard let object = try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any] else {
            throw PeerFailure(description: "\(process.arguments?.first ?? "peer") exited \(process.terminationStatus) printing: \(text.prefix(500))")
        }
        return object
    }

    package func stop() {
        if process.isRunning { process.terminate() }
    }

    package struct PeerFailure: Error, CustomStringConvertible { package let description: String }
}
