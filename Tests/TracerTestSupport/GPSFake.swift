import Foundation
import Testing
import TestTiers
#if canImport(Glibc)
import Glibc
#endif

/// `gpsfake` (Debian's gpsd-clients) replaying a committed NMEA log through a real gpsd on a port
/// of its own. gpsfake 3.22 leaves its gpsd running when it is interrupted, so `stop` also ends
/// that gpsd, found by the control socket named after gpsfake's pid, with SIGKILL: it inherits
/// the test process's blocked signal mask, so SIGTERM would wait forever.
public final class GPSFake {
    public let port: Int
    private let process: Process

    public static let logDirectory = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Support/gps").path

    public init(log name: String, scratch: Scratch) throws {
        try RequiredTool.gpsd.require()
        let gpsfake = try #require(RequiredTool.executableInPath("gpsfake"))
        port = try LoopbackPort.free()
        let process = Process()
        process.executableURL = URL(fileURLWithPath: gpsfake)
        // -c 0.1: a sentence every 0.1 s, so a fix every 0.2 s; the log repeats until stopped.
        process.arguments = ["-q", "-n", "-P", "\(port)", "-c", "0.1", Self.logDirectory + "/" + name]
        var environment = ProcessInfo.processInfo.environment
        // gpsfake starts gpsd by name; Debian installs it in /usr/sbin.
        environment["PATH"] = (environment["PATH"] ?? "/usr/bin:/bin") + ":/usr/sbin:/sbin"
        process.environment = environment
        process.standardInput = FileHandle.nullDevice
        let output = scratch.file("gpsfake-\(port).log")
        _ = FileManager.default.createFile(atPath: output, contents: nil)
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: output))
        process.standardOutput = handle
        process.standardError = handle
        try process.run()
        self.process = process
    }

    public func stop() {
        guard process.isRunning else { return }
        kill(process.processIdentifier, SIGINT)
        _ = eventuallyBlocking(timeout: .seconds(5), every: .milliseconds(20)) { !process.isRunning }
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
        let socket = "/tmp/gpsfake-\(process.processIdentifier).sock"
        for entry in (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? [] {
            guard let pid = Int32(entry), let command = FileManager.default.contents(atPath: "/proc/\(entry)/cmdline") else { continue }
            let arguments = command.split(separator: 0).map { String(decoding: $0, as: UTF8.self) }
            if arguments.first?.hasSuffix("gpsd") == true && arguments.contains(socket) { kill(pid, SIGKILL) }
        }
    }

    deinit { stop() }

    /// The positions of the log's GGA sentences with a fix, in degrees.
    public static func fixes(in name: String) throws -> [(latitude: Double, longitude: Double)] {
        let text = try String(contentsOfFile: logDirectory + "/" + name, encoding: .utf8)
        func degrees(_ field: Substring, _ hemisphere: Substring, wholeDigits: Int) -> Double? {
            guard let whole = Double(field.prefix(wholeDigits)), let minutes = Double(field.dropFirst(wholeDigits)) else { return nil }
            let value = whole + minutes / 60
            return hemisphere == "S" || hemisphere == "W" ? -value : value
        }
        return text.split(whereSeparator: \.isNewline).compactMap { line in
            let fields = line.split(separator: ",", omittingEmptySubsequences: false)
            guard fields.first == "$GPGGA", fields.count > 6, fields[6] != "0",
                let latitude = degrees(fields[2], fields[3], wholeDigits: 2), let longitude = degrees(fields[4], fields[5], wholeDigits: 3)
            else { return nil }
            return (latitude, longitude)
        }
    }
}
