import Foundation
import TestTiers
#if canImport(Glibc)
import Glibc
#endif

/// nginx from Debian's package (/usr/sbin/nginx) in front of a tracer-server, configured with the
/// repository's deploy/nginx/tracer-server.conf, so tests and benchmarks exercise the example
/// configuration that operators install. Its pid file, temporary files and configuration live in
/// `prefix`; it listens on a free port of 127.0.0.1. Stop it with `stop()`.
public final class NginxProcess {
    public static let binary = "/usr/sbin/nginx"

    public let port: Int
    public let prefix: String
    private let process = Process()
    private let errors: Pipe?

    /// Writes the configuration into `prefix` (see `writeConfiguration`), starts nginx and returns
    /// once it listens. `captureErrors`: nginx's stderr goes to a pipe that is only read to explain
    /// a failed start (keeping test output quiet); otherwise nginx shares this process's stderr.
    public convenience init(
        prefix: String, publishedDirectory: String, upstreamPort: Int, repositoryRoot: String,
        workerProcesses: String, captureErrors: Bool
    ) async throws {
        try FileManager.default.createDirectory(atPath: prefix, withIntermediateDirectories: true)
        let port = try LoopbackPort.free()
        try Self.writeConfiguration(
            prefix: prefix, repositoryRoot: repositoryRoot, port: port, publishedDirectory: publishedDirectory,
            upstreamPort: upstreamPort, workerProcesses: workerProcesses)
        try await self.init(prefix: prefix, configuredToListenOn: port, captureErrors: captureErrors)
    }

    /// Starts nginx with the configuration already written to `prefix`/nginx.conf (by one of the
    /// `writeConfiguration` functions) and returns once it listens on `port`.
    public init(prefix: String, configuredToListenOn port: Int, captureErrors: Bool) async throws {
        try RequiredTool.nginx.require()
        self.prefix = prefix
        self.port = port
        errors = captureErrors ? Pipe() : nil
        chmod(prefix, 0o755)
        process.executableURL = URL(fileURLWithPath: Self.binary)
        process.arguments = ["-p", prefix, "-c", prefix + "/nginx.conf", "-e", "stderr"]
        if let errors { process.standardError = errors }
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        do {
            try await LoopbackPort.waitUntilListening(port, orExit: process)
        } catch {
            stop()
            let output = errors.map { String(decoding: $0.fileHandleForReading.availableData, as: UTF8.self) } ?? ""
            throw HarnessFailure(description: "nginx did not start: \(error)\n\(output)")
        }
    }

    /// SIGQUIT: nginx's graceful stop. Leaves `prefix` in place.
    public func stop() {
        if process.isRunning {
            kill(process.processIdentifier, SIGQUIT)
            process.waitUntilExit()
        }
    }

    /// Writes `prefix`/tracer-server.conf, a copy of deploy/nginx/tracer-server.conf with its three
    /// ADJUST values replaced (listen on `port`, `publishedDirectory` as root, the API proxied to
    /// `upstreamPort`), and `prefix`/nginx.conf (see the other `writeConfiguration`). `workerProcesses` is nginx's worker_processes value
    /// ("1", or "auto" for one per core).
    public static func writeConfiguration(
        prefix: String, repositoryRoot: String, port: Int, publishedDirectory: String, upstreamPort: Int,
        workerProcesses: String
    ) throws {
        let example = try String(contentsOfFile: repositoryRoot + "/deploy/nginx/tracer-server.conf", encoding: .utf8)
        let replacements = [
            ("listen 127.0.0.1:8081;", "listen 127.0.0.1:\(port);"),
            ("root /var/lib/tracer-server/public;", "root \(publishedDirectory);"),
            ("http://127.0.0.1:8080", "http://127.0.0.1:\(upstreamPort)"),
        ]
        var server = example
        for (original, replacement) in replacements {
            guard server.contains(original) else {
                throw HarnessFailure(description: "deploy/nginx/tracer-server.conf no longer contains `\(original)`; update Tests/TracerTestSupport/NginxProcess.swift with it.")
            }
            server = server.replacingOccurrences(of: original, with: replacement)
        }
        try writeConfiguration(prefix: prefix, server: server, workerProcesses: workerProcesses)
    }

    /// Writes `server` (server blocks) to `prefix`/tracer-server.conf and `prefix`/nginx.conf, a
    /// main configuration that includes it with the pid file and temporary files in `prefix`.
    public static func writeConfiguration(prefix: String, server: String, workerProcesses: String) throws {
        try server.write(toFile: prefix + "/tracer-server.conf", atomically: true, encoding: .utf8)
        // Run as root, nginx's workers switch to an unprivileged user (Debian has no group
        // "nobody"), which also proves the published files are readable by others.
        let user = geteuid() == 0 ? "user nobody nogroup;" : ""
        let main = """
            \(user)
            daemon off;
            master_process on;
            worker_processes \(workerProcesses);
            pid \(prefix)/nginx.pid;
            error_log stderr warn;
            events { worker_connections 1024; }
            http {
                access_log off;
                client_body_temp_path \(prefix)/client_body;
                proxy_temp_path \(prefix)/proxy;
                fastcgi_temp_path \(prefix)/fastcgi;
                uwsgi_temp_path \(prefix)/uwsgi;
                scgi_temp_path \(prefix)/scgi;
                include \(prefix)/tracer-server.conf;
            }
            """
        try main.write(toFile: prefix + "/nginx.conf", atomically: true, encoding: .utf8)
    }
}
