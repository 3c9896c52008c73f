import ArgumentParser
import Crypto
import Foundation
import Logging
import PositiveListFormat
import PositiveListServer
import PostgresServerStore
import ServerStorage
import SQLiteServerStore
import TracerCore

struct TracerServerCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "tracer-server",
        abstract: "The positive list server: health authorities append diagnosed id histories; the server publishes them as signed static files.",
        discussion: """
            Files live in the data directory (--data-dir, $TRACER_SERVER_DATA_DIR, else \
            $XDG_DATA_HOME/tracer-server or ~/.local/share/tracer-server): server.db, signing-key, \
            config.json and public/, the directory to serve.

            Every setting of config.json except authorities, database, objectStore, console, metrics, \
            witnessedLogs and witnesses (which hold secrets or are objects) may also be given in the environment as \
            TRACER_SERVER_ and its name in capitals with underscores (TRACER_SERVER_RETENTION_DAYS) \
            or, to any subcommand, as a flag: its name in small letters with dashes \
            (--retention-days 14). A flag wins over the environment, which wins over the file; \
            `tracer-server config --help` lists them and `tracer-server config` shows which gave each value.
            """,
        subcommands: [Serve.self, Keygen.self, WitnessKeygen.self, Append.self, IssueCode.self, Publish.self, Sync.self, Status.self, Doctor.self, Config.self, ConsoleCommand.self])
}

/// Where the server's files are; shared by every subcommand.
struct LocationOptions: ParsableArguments {
    @Option(name: .customLong("data-dir"), help: "The server's data directory (env TRACER_SERVER_DATA_DIR).")
    var dataDirectory: String?

    @Option(name: .customLong("config"), help: "The JSON configuration file (env TRACER_SERVER_CONFIG; default DATA_DIR/config.json).")
    var configurationPath: String?

    @Option(name: .customLong("key"), help: "The Ed25519 signing key file (env TRACER_SERVER_KEY; default DATA_DIR/signing-key).")
    var keyPath: String?

    private var environment: [String: String] { ProcessInfo.processInfo.environment }

    var paths: ServerPaths {
        if let dataDirectory = dataDirectory ?? environment["TRACER_SERVER_DATA_DIR"], !dataDirectory.isEmpty {
            return ServerPaths(dataDirectory: Self.absolute(dataDirectory))
        }
        if let dataHome = environment["XDG_DATA_HOME"], dataHome.hasPrefix("/") {
            return ServerPaths(dataDirectory: dataHome + "/tracer-server")
        }
        return ServerPaths(dataDirectory: (environment["HOME"] ?? NSHomeDirectory()) + "/.local/share/tracer-server")
    }

    var resolvedConfigurationPath: String {
        (configurationPath ?? environment["TRACER_SERVER_CONFIG"]).map(Self.absolute) ?? paths.configuration
    }

    var resolvedKeyPath: String {
        (keyPath ?? environment["TRACER_SERVER_KEY"]).map(Self.absolute) ?? paths.signingKey
    }

    /// Creates the data directory if needed. It is not made private: its public/ must stay
    /// reachable by the web server's user; the secrets in it are 0600 files.
    func prepareDataDirectory() throws {
        let path = paths.dataDirectory
        do {
            try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o755])
        } catch {
            throw CommandFailure.cannotCreateDirectory(path: path, reason: (error as NSError).localizedDescription)
        }
    }

    func loadConfiguration() throws -> ServerConfiguration {
        try ServerConfiguration.load(path: resolvedConfigurationPath, overrides: settingOverrides)
    }

    /// The settings given by flags (taken out of the command line by `TracerServerMain`, which
    /// already refused one without its value) or by environment variables.
    var settingOverrides: ServerSettingOverrides {
        let flags = (try? ServerSettingFlags.split(Array(CommandLine.arguments.dropFirst())).settings) ?? [:]
        return ServerSettingOverrides(environment: environment, flags: flags)
    }

    /// The configured store: PostgreSQL when the configuration has a `database` setting,
    /// otherwise DATA_DIR/server.db.
    func openStore(configuration: ServerConfiguration?) async throws -> any SubmissionStore {
        try prepareDataDirectory()
        if let database = configuration?.database {
            return try await PostgresServerStore.open(settings: try database.settings(), publishedDirectory: paths.published, poolSize: database.poolSize)
        }
        return try ServerStore.open(path: paths.database, publishedDirectory: paths.published, publicationLockPath: paths.publishLock)
    }

    /// `pause`: a test's hold between two publication steps (`serve` only, debug builds only).
    func makePublisher(store: any SubmissionStore, configuration: ServerConfiguration, logger: Logger, pause: PublicationPause? = nil) throws -> Publisher {
        let key = try SigningKeyFile.load(from: resolvedKeyPath)
        return Publisher(
            store: store, directory: paths.published, signingKey: key,
            retentionSeconds: configuration.retentionSeconds, indexRefreshSeconds: configuration.indexRefreshSeconds,
            keySettings: KeyPublicationSettings(configuration), idPublicationDelaySeconds: configuration.clockSkewSeconds,
            clock: SystemWallClock(), logger: logger, recordPath: paths.publicationRecord,
            logOrigin: configuration.logOrigin, logStatePath: paths.logState,
            cosigner: configuration.witnesses.isEmpty ? nil : CheckpointCosigner(
                witnesses: configuration.witnesses, timeout: .seconds(configuration.witnessTimeoutSeconds),
                recordPath: paths.witnessCosigningRecord, clock: SystemWallClock(), logger: logger),
            pause: pause)
    }

    /// The witness role, when the configuration lists logs to witness; its key must exist.
    func makeWitness(configuration: ServerConfiguration, logger: Logger) throws -> CheckpointWitness? {
        guard !configuration.witnessedLogs.isEmpty else { return nil }
        let key = try SigningKeyFile.load(from: paths.witnessKey, kind: .witness)
        do {
            return try CheckpointWitness(
                key: key, name: configuration.witnessName, logs: configuration.witnessedLogs, directory: paths.witnessDirectory,
                clock: SystemWallClock(), logger: logger)
        } catch {
            throw CommandFailure.witnessName("\(error)")
        }
    }

    private static func absolute(_ path: String) -> String {
        path.hasPrefix("/") ? path : FileManager.default.currentDirectoryPath + "/" + path
    }
}

extension UnixSeconds {
    var utcText: String {
        let formatter = ISO8601DateFormatter()
        return formatter.string(from: Date(timeIntervalSince1970: TimeInterval(self)))
    }
}
