import Foundation
import TestTiers
#if canImport(Glibc)
import Glibc
#endif

/// A throwaway PostgreSQL 15 server for one test or benchmark: `initdb` into a fresh directory,
/// `postgres` on a free port of 127.0.0.1 (no Unix socket, trust authentication, fsync off:
/// nothing here must survive a crash of the machine), and `stop()` at the end.
///
/// PostgreSQL refuses to run as root: as root, every command runs as the `postgres` system user
/// (`runuser -u postgres --`), which then owns the directory; otherwise as the current user.
/// A server that fails to start keeps its directory, and the error quotes its log.
///
/// `@unchecked Sendable`: every stored property is a constant, and `Process` is only asked
/// whether it runs and waited for.
public final class PostgresProcess: @unchecked Sendable {
    public static let binaries = "/usr/lib/postgresql/15/bin"

    public let port: Int
    public let directory: String
    private let server: Process
    private var dataDirectory: String { directory + "/data" }
    public var logPath: String { directory + "/postgres.log" }

    /// Whether the server process still runs (a test may have stopped it and failed before starting it again).
    public var isRunning: Bool { server.isRunning }

    /// A URL for `database` on this server as the superuser `postgres`, without a password.
    public func url(database: String = "postgres") -> String { "postgresql://postgres@127.0.0.1:\(port)/\(database)" }

    /// A new server, or with `port`, the server whose `directory` a stopped one kept (see
    /// ``restart(after:)``), started again on that port with its data.
    public init(directory: String? = nil, port: Int? = nil) throws {
        try RequiredTool.postgreSQL.require()
        let directory = directory ?? NSTemporaryDirectory() + "/tracer-postgres-" + UUID().uuidString
        self.directory = directory
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        if geteuid() == 0 {
            guard let user = getpwnam("postgres") else {
                throw HarnessFailure(description: "running as root, but there is no `postgres` user to run PostgreSQL as; install the postgresql package")
            }
            chown(directory, user.pointee.pw_uid, user.pointee.pw_gid)
        }
        self.port = try port ?? LoopbackPort.free()
        let port = self.port
        if !FileManager.default.fileExists(atPath: directory + "/data/PG_VERSION") {
            try Self.run(["initdb", "-D", directory + "/data", "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync"], log: directory + "/initdb.log")
        }
        // In the foreground, as nginx is run: `pg_ctl start` daemonizes, and the daemon would
        // inherit the descriptor Foundation's Process watches for its child's exit.
        server = Process()
        let arguments = [
            Self.binaries + "/postgres", "-D", directory + "/data", "-p", String(port), "-c", "listen_addresses=127.0.0.1",
            "-c", "unix_socket_directories=", "-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off",
            "-c", "max_connections=100",
        ]
        server.executableURL = URL(fileURLWithPath: geteuid() == 0 ? "/usr/sbin/runuser" : arguments[0])
        server.arguments = geteuid() == 0 ? ["-u", "postgres", "--"] + arguments : Array(arguments.dropFirst())
        _ = FileManager.default.createFile(atPath: directory + "/postgres.log", contents: nil)
        let log = try FileHandle(forWritingTo: URL(fileURLWithPath: directory + "/postgres.log"))
        server.standardOutput = log
        server.standardError = log
        server.standardInput = FileHandle.nullDevice
        try server.run()
        try? log.close()
        var ready = false
        _ = eventuallyBlocking(timeout: .seconds(30), every: .milliseconds(100)) {
            ready = (try? Self.run(["pg_isready", "-h", "127.0.0.1", "-p", String(port), "-t", "1"], log: directory + "/pg_isready.log")) != nil
            return ready || !server.isRunning
        }
        guard ready else {
            stop(keepDirectory: true)
            let text = (try? String(contentsOfFile: directory + "/postgres.log", encoding: .utf8)) ?? ""
            throw HarnessFailure(description: "PostgreSQL did not start; its log, kept in \(directory):\n\(text.suffix(3000))")
        }
    }

    /// Creates an empty database and returns its URL.
    public func createDatabase(_ name: String) throws -> String {
        try Self.run(["createdb", "-h", "127.0.0.1", "-p", String(port), "-U", "postgres", name], log: directory + "/createdb.log")
        return url(database: name)
    }

    /// Stops the server (fast shutdown: sessions are ended) and removes its directory unless
    /// `keepDirectory` (a failed test, whose log may explain it).
    public func stop(keepDirectory: Bool = false) {
        if server.isRunning {
            _ = try? Self.run(["pg_ctl", "stop", "-D", dataDirectory, "-m", "fast", "-w"], log: directory + "/pg_ctl-stop.log")
            server.waitUntilExit()
        }
        if !keepDirectory { try? FileManager.default.removeItem(atPath: directory) }
    }

    /// Stops the server as an operator's restart does (fast shutdown: open sessions are ended),
    /// waits `downtime`, and starts a new one on the same port and data; the caller uses the
    /// returned one from then on.
    public func restart(after downtime: Duration = .zero) async throws -> PostgresProcess {
        stop(keepDirectory: true)
        try await Task.sleep(for: downtime)
        return try PostgresProcess(directory: directory, port: port)
    }

    /// Runs a PostgreSQL program to its end, as `postgres` when root; throws with its output
    /// (also kept in `log`) when it fails.
    private static func run(_ arguments: [String], log: String) throws {
        let program = binaries + "/" + arguments[0]
        let result = geteuid() == 0
            ? try ProcessResult.run("/usr/sbin/runuser", ["-u", "postgres", "--", program] + arguments.dropFirst())
            : try ProcessResult.run(program, Array(arguments.dropFirst()))
        try? result.output.write(toFile: log, atomically: true, encoding: .utf8)
        try result.succeeded(arguments[0])
    }
}
