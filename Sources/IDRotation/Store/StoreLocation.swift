import Foundation

/// Where the node's database lives, and how that was decided.
public struct StoreLocation: Sendable, Equatable {
    public enum Source: String, Sendable {
        case flag = "--db"
        case environment = "TRACER_DB"
        case xdgDataHome = "$XDG_DATA_HOME"
        case home = "~/.local/share"
    }

    public static let environmentVariable = "TRACER_DB"
    public static let defaultFileName = "tracer.db"

    public let path: String
    public let source: Source
    /// True when the directory is Tracer's own (under the data home) and may be forced to 0700.
    public let ownsDirectory: Bool

    public init(path: String, source: Source, ownsDirectory: Bool) {
        self.path = path
        self.source = source
        self.ownsDirectory = ownsDirectory
    }

    /// Resolves the database path: `--db`, then `TRACER_DB`, then `$XDG_DATA_HOME/tracer/`,
    /// then `~/.local/share/tracer/`.
    public static func resolve(flag: String?, environment: [String: String]) throws(StoreError) -> StoreLocation {
        if let flag, !flag.isEmpty {
            return StoreLocation(path: absolute(flag), source: .flag, ownsDirectory: false)
        }
        if let fromEnvironment = environment[environmentVariable], !fromEnvironment.isEmpty {
            return StoreLocation(path: absolute(fromEnvironment), source: .environment, ownsDirectory: false)
        }
        // The XDG spec says a relative XDG_DATA_HOME is invalid and must be ignored.
        if let dataHome = environment["XDG_DATA_HOME"], dataHome.hasPrefix("/") {
            return StoreLocation(path: dataHome + "/tracer/" + defaultFileName, source: .xdgDataHome, ownsDirectory: true)
        }
        guard let home = environment["HOME"], home.hasPrefix("/") else { throw .noHomeDirectory }
        return StoreLocation(path: home + "/.local/share/tracer/" + defaultFileName, source: .home, ownsDirectory: true)
    }

    public var directory: String { (path as NSString).deletingLastPathComponent }

    /// The database file, SQLite's companion files, which hold recent data too, and the running
    /// node's status file.
    public var allFiles: [String] { [path, path + "-wal", path + "-shm", statusFilePath] }

    /// Where `tracer run` describes its state for `tracer status` (transport, controller, errors).
    public var statusFilePath: String { path + "-status.json" }

    public var exists: Bool { FileManager.default.fileExists(atPath: path) }

    private static func absolute(_ path: String) -> String {
        if path.hasPrefix("/") { return path }
        return FileManager.default.currentDirectoryPath + "/" + path
    }
}
