import Foundation

/// A scratch directory for one test; it doubles as HOME and XDG_DATA_HOME of every child process,
/// so no test ever touches the real user's data. Tests remove it with `defer { scratch.remove() }`.
public struct Scratch: Sendable {
    public let path: String

    public init() throws {
        let base = NSTemporaryDirectory().hasSuffix("/") ? NSTemporaryDirectory() : NSTemporaryDirectory() + "/"
        path = base + "tracer-node-test-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }

    public func remove() { try? FileManager.default.removeItem(atPath: path) }

    public func file(_ name: String) -> String { path + "/" + name }
}

/// Finds and runs the package's executables (`tracer`, `tracer-server`, `TracerSimulator`) as
/// child processes, each with a home of the test's own.
public enum Products {
    /// The build products directory: the one holding the running test binary, which on Linux is
    /// `.build/<triple>/debug/TracerPackageTests.xctest` (on macOS a bundle in that directory).
    public static let directory: String = {
        let executable = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe"))
            ?? CommandLine.arguments[0]
        var url = URL(fileURLWithPath: executable).standardizedFileURL
        // Climb out of an .xctest bundle, if the binary sits inside one.
        while url.pathComponents.contains(where: { $0.hasSuffix(".xctest") }) && url.pathComponents.count > 1 {
            url.deleteLastPathComponent()
        }
        if url.path == URL(fileURLWithPath: executable).standardizedFileURL.path {
            url.deleteLastPathComponent()
        }
        return url.path
    }()

    /// The path of a built executable; throws (failing the test) when it has not been built.
    public static func path(of name: String) throws -> String {
        let path = directory + "/" + name
        guard FileManager.default.isExecutableFile(atPath: path) else {
            throw HarnessFailure(description: """
                The executable '\(name)' is missing from \(directory). Build first: \
                run `swift build --build-tests` in the package directory, then run the tests again.
                """)
        }
        return path
    }

    /// Variables of the test's own environment a child must not see: the node's database
    /// (`StoreLocation.environmentVariable`; ChildEnvironmentTests checks that they agree) and
    /// systemd's runtime directory, either of which would send a child to the user's real data.
    public static let variablesNotInherited = ["TRACER_DB", "RUNTIME_DIRECTORY"]

    /// The environment for a child: ours, minus `variablesNotInherited`, with HOME, XDG_DATA_HOME
    /// and XDG_RUNTIME_DIR (where a node keeps the encounters its store refused when it stops)
    /// pointing into the test's scratch directory; `overrides` is applied last.
    public static func environment(home: String, overrides: [String: String] = [:]) -> [String: String] {
        var environment = ProcessInfo.processInfo.environment
        for variable in variablesNotInherited { environment.removeValue(forKey: variable) }
        environment["HOME"] = home
        environment["XDG_DATA_HOME"] = home + "/xdg-data"
        environment["XDG_RUNTIME_DIR"] = home + "/xdg-runtime"
        for (key, value) in overrides { environment[key] = value }
        return environment
    }

    /// Runs `tracer` with `arguments` and waits for it.
    public static func tracer(
        _ arguments: [String], home: String, environment: [String: String] = [:],
        timeout: Duration = .seconds(60)
    ) throws -> ProcessResult {
        try run(path(of: "tracer"), arguments, home: home, environment: environment, timeout: timeout)
    }

    /// Runs `TracerSimulator` with `arguments` and waits for it.
    public static func simulator(
        _ arguments: [String], home: String, environment: [String: String] = [:],
        timeout: Duration = .seconds(60)
    ) throws -> ProcessResult {
        try run(path(of: "TracerSimulator"), arguments, home: home, environment: environment, timeout: timeout)
    }

    /// `TracerSimulator seed` into `database`, requiring success.
    public static func seed(
        _ database: String, home: String, days: Int = 3, peersPerDay: Int = 60, interval: Int = 900, seed: Int = 7
    ) throws {
        let result = try simulator(
            ["seed", "--db", database, "--days", "\(days)", "--peers-per-day", "\(peersPerDay)",
             "--interval", "\(interval)", "--seed", "\(seed)"],
            home: home)
        guard result.exitCode == 0, !result.signaled else {
            throw HarnessFailure(description: "TracerSimulator seed failed: \(result)")
        }
    }

    /// Runs an executable in `home` with the environment above, stdin from `input` or nothing
    /// (never a terminal), through ``ProcessResult/collect(_:input:timeout:)``.
    public static func run(
        _ executable: String, _ arguments: [String], home: String, environment: [String: String] = [:],
        input: String? = nil, timeout: Duration = .seconds(60)
    ) throws -> ProcessResult {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        process.environment = Self.environment(home: home, overrides: environment)
        process.currentDirectoryURL = URL(fileURLWithPath: home)
        return try ProcessResult.collect(process, input: input, timeout: timeout)
    }
}
