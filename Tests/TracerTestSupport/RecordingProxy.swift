import Foundation
import Testing
import TestTiers

/// Tests/Support/recording_proxy.py in front of `target`: every request's method, path and body go
/// to `record`. It ends when its stdin closes (`stop()`).
public final class RecordingProxy {
    static let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Support/recording_proxy.py").path

    private let process: Process
    private let input = Pipe()
    public let port: Int

    public init(target: String, record: String) throws {
        let python = try #require(RequiredTool.executableInPath("python3"))
        process = Process()
        process.executableURL = URL(fileURLWithPath: python)
        process.arguments = [Self.script, target, record]
        let output = Pipe()
        process.standardInput = input
        process.standardOutput = output
        try process.run()
        var line = Data()
        while let byte = try output.fileHandleForReading.read(upToCount: 1), !byte.isEmpty, byte != Data("\n".utf8) { line += byte }
        port = try #require(Int(String(decoding: line, as: UTF8.self)), "the proxy did not print its port")
    }

    public func stop() {
        try? input.fileHandleForWriting.close()
        process.waitUntilExit()
    }
}
