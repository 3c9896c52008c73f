import Foundation
import Testing

/// A program outside the Swift toolchain that a test needs (PostgreSQL, nginx, a browser, gpsd, the
/// virtual controllers, the kernel bed). The one place tests learn what to do when one is missing:
/// outside CI the test is skipped with a message naming the tool and how to install it; in CI
/// (`CI=true`, which .ci/run sets) a missing tool fails the test, so that no tier passes by
/// skipping. Benchmarks get the same message as an error.
public struct RequiredTool: Sendable, CustomStringConvertible {
    /// What the tool is, for messages: "PostgreSQL 15".
    public var name: String
    /// How to get it: "apt-get install postgresql-15".
    public var remedy: String
    private let findMissing: @Sendable () -> String?

    /// `findMissing` returns nil when the tool is there, or what is missing ("no /usr/sbin/nginx").
    public init(name: String, remedy: String, findMissing: @escaping @Sendable () -> String?) {
        self.name = name
        self.remedy = remedy
        self.findMissing = findMissing
    }

    /// A tool that is one executable file.
    public init(name: String, executable path: String, remedy: String) {
        self.init(name: name, remedy: remedy) {
            FileManager.default.isExecutableFile(atPath: path) ? nil : "no executable \(path)"
        }
    }

    public var description: String { name }

    /// What is missing of the tool, or nil when it is installed.
    public var missing: String? { findMissing() }

    public var isInstalled: Bool { missing == nil }

    /// The message a test without this tool gives: which tool, what is missing, what to do.
    public func message(missing detail: String) -> String {
        "needs \(name), which is not installed (\(detail)): \(remedy), or run ./scripts/setup"
    }

    /// Returns when the tool is installed; otherwise skips the current test (outside CI) or throws
    /// `MissingTool` (in CI, or outside a test).
    public func require(isCI: Bool = RequiredTool.isCI) throws {
        guard let detail = missing else { return }
        try Self.missing(message(missing: detail), isCI: isCI)
    }

    /// Whether this run is CI's: there, a skipped test would hide a tier that never ran.
    public static var isCI: Bool {
        ["true", "1", "yes"].contains(ProcessInfo.processInfo.environment["CI"]?.lowercased() ?? "")
    }

    /// Ends the current test for a missing tool that `message` names: skipped outside CI (Swift
    /// Testing reports it with the message), a failure in CI or outside a test.
    public static func missing(_ message: String, isCI: Bool = RequiredTool.isCI) throws -> Never {
        throw try missingToolError(message, isCI: isCI)
    }

    /// `missing` for a caller that throws the error itself: skips the current test outside CI,
    /// else returns the error to throw.
    public static func missingToolError(_ message: String, isCI: Bool = RequiredTool.isCI) throws -> MissingTool {
        if !isCI, Test.current != nil { try Test.cancel(Comment(rawValue: message)) }
        return MissingTool(message: isCI ? message + " (CI=true: a test that needs a tool fails without it)" : message)
    }
}

/// A tool a test or benchmark needs is not installed; the message says which and what to do.
public struct MissingTool: Error, CustomStringConvertible {
    public var message: String
    public var description: String { message }
}

extension RequiredTool {
    public static let postgreSQL = RequiredTool(
        name: "PostgreSQL 15", executable: "/usr/lib/postgresql/15/bin/initdb", remedy: "apt-get install postgresql-15")
    public static let nginx = RequiredTool(name: "nginx", executable: "/usr/sbin/nginx", remedy: "apt-get install nginx")
    /// The command-line tools some tests run: openssl makes the HTTP client tests' self-signed
    /// certificate, curl plays the health authority and reads fixture counters.
    public static let openssl = RequiredTool(name: "the openssl command", executable: "/usr/bin/openssl", remedy: "apt-get install openssl")
    public static let curl = RequiredTool(name: "the curl command", executable: "/usr/bin/curl", remedy: "apt-get install curl")
    public static let chromium = RequiredTool(name: "Chromium and chromedriver", remedy: "apt-get install chromium chromium-driver") {
        ["/usr/bin/chromium", "/usr/bin/chromedriver"].first { !FileManager.default.isExecutableFile(atPath: $0) }
            .map { "no executable \($0)" }
    }
    /// Debian's Prometheus server and promtool (one package): the metrics tests scrape the server
    /// with it and check its exposition and the shipped rules.
    public static let prometheus = RequiredTool(name: "Prometheus and promtool", remedy: "apt-get install prometheus") {
        ["/usr/bin/prometheus", "/usr/bin/promtool"].first { !FileManager.default.isExecutableFile(atPath: $0) }
            .map { "no executable \($0)" }
    }
    /// Debian's node_exporter: the node's metrics tests read its metrics file through the textfile collector.
    public static let nodeExporter = RequiredTool(
        name: "node_exporter", executable: "/usr/bin/prometheus-node-exporter", remedy: "apt-get install prometheus-node-exporter")
    public static let gpsd = RequiredTool(name: "gpsd's gpsfake", remedy: "apt-get install gpsd gpsd-clients") {
        executableInPath("gpsfake") == nil ? "no gpsfake in PATH" : nil
    }
    public static let kernelBed = RequiredTool(name: "the kernel bed (Debian's kernel in .kernel-bed, qemu, busybox, cpio)",
                                               remedy: "apt-get install qemu-system-x86 busybox cpio") {
        let kernel = repositoryRoot + "/.kernel-bed/kernel"
        guard FileManager.default.fileExists(atPath: kernel) else { return "no \(kernel)" }
        return ["qemu-system-x86_64", "busybox", "cpio"].first { executableInPath($0) == nil }.map { "no \($0) in PATH" }
    }

    /// A Python with `package` (bumble, rootcanal, moto) installed: $`variable` or the venv
    /// scripts/setup makes, .venv-bumble.
    public static func python(with package: String, name: String, variable: String = "TRACER_BUMBLE_PYTHON") -> RequiredTool {
        RequiredTool(name: name, remedy: "python3 -m venv .venv-bumble && .venv-bumble/bin/pip install \(package), or set \(variable)") {
            let candidates = [ProcessInfo.processInfo.environment[variable], repositoryRoot + "/.venv-bumble/bin/python"]
                .compactMap { $0 }.filter { !$0.isEmpty }
            guard let python = candidates.first(where: { FileManager.default.isExecutableFile(atPath: $0) }) else {
                return "no Python at \(candidates.joined(separator: " or "))"
            }
            let environment = URL(fileURLWithPath: python).deletingLastPathComponent().deletingLastPathComponent().path
            let libraries = (try? FileManager.default.contentsOfDirectory(atPath: environment + "/lib")) ?? []
            let found = libraries.contains { FileManager.default.fileExists(atPath: "\(environment)/lib/\($0)/site-packages/\(package)") }
            // A Python outside a venv may have the package elsewhere; only a venv's own layout is checked.
            let isVenv = FileManager.default.fileExists(atPath: environment + "/pyvenv.cfg")
            return found || !isVenv ? nil : "\(python) has no \(package) package"
        }
    }

    /// Schemathesis's command-line tool: $TRACER_SCHEMATHESIS, else the venv scripts/setup makes
    /// for it, .venv-schemathesis (a venv of its own: its dependencies stay out of Bumble's).
    public static let schemathesis = RequiredTool(
        name: "Schemathesis (the schemathesis command)",
        remedy: "python3 -m venv .venv-schemathesis && .venv-schemathesis/bin/pip install schemathesis==4.32.5, or set TRACER_SCHEMATHESIS"
    ) {
        let path = schemathesisExecutable
        return FileManager.default.isExecutableFile(atPath: path) ? nil : "no executable \(path)"
    }

    /// Where ``schemathesis`` looks for the command.
    public static var schemathesisExecutable: String {
        let given = ProcessInfo.processInfo.environment["TRACER_SCHEMATHESIS"] ?? ""
        return given.isEmpty ? repositoryRoot + "/.venv-schemathesis/bin/schemathesis" : given
    }

    public static let bumble = python(with: "bumble", name: "Bumble (a Python with the bumble package)")
    public static let rootCanal = python(with: "rootcanal", name: "RootCanal (a Python with the rootcanal package)")
    public static let moto = python(with: "moto", name: "moto's S3 server (a Python with moto[server])", variable: "TRACER_MOTO_PYTHON")

    /// The repository's root, from this file's path (Tests/TestTiers/...).
    public static var repositoryRoot: String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().path
    }

    /// The first executable `name` in PATH.
    public static func executableInPath(_ name: String) -> String? {
        (ProcessInfo.processInfo.environment["PATH"] ?? "").split(separator: ":").map { "\($0)/\(name)" }
            .first { FileManager.default.isExecutableFile(atPath: $0) }
    }
}
