import Foundation

/// Tests/Support/http_fixture.py as a child process: a small HTTP(S) server that answers with
/// chosen statuses, delays and bodies. It exits by itself when its stdin closes, so it cannot
/// outlive a crashed test process.
public final class HTTPFixtureServer {
    public let port: Int
    public let scheme: String
    private let process = Process()
    private let input = Pipe()

    static let script = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("Support/http_fixture.py").path

    /// Plain HTTP, or HTTPS with this PEM certificate and key. With `listRoot`, it also serves
    /// that directory under /list/, with the misbehaviours its behaviour.json names.
    public init(certificatePath: String? = nil, keyPath: String? = nil, listRoot: String? = nil) throws {
        let output = Pipe()
        var arguments = ["python3", Self.script]
        if let certificatePath, let keyPath { arguments += ["--cert", certificatePath, "--key", keyPath] }
        if let listRoot { arguments += ["--root", listRoot] }
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = arguments
        process.standardInput = input
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        scheme = certificatePath == nil ? "http" : "https"

        var firstLine = Data()
        while !firstLine.contains(UInt8(ascii: "\n")) {
            let chunk = output.fileHandleForReading.availableData
            if chunk.isEmpty { break }
            firstLine.append(chunk)
        }
        guard let port = Int(String(decoding: firstLine, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)) else {
            process.terminate()
            throw HarnessFailure(description: "http_fixture.py did not print its port (got \(String(decoding: firstLine, as: UTF8.self).debugDescription))")
        }
        self.port = port
    }

    deinit { stop() }

    public func stop() {
        try? input.fileHandleForWriting.close()
        if process.isRunning { process.terminate() }
        process.waitUntilExit()
    }

    public func url(_ path: String) -> String { "\(scheme)://127.0.0.1:\(port)\(path)" }
}
