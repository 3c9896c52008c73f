import Foundation
import IDRotation
import Settings

extension NodeSettings {
    /// The effective settings: each from its flag, else its environment variable, else the
    /// configuration file, else its default.
    ///
    /// - Parameters:
    ///   - configFlag: the value of `--config`, if given.
    ///   - flags: the flags the command was given, keyed by setting key ("check.interval") with
    ///     the value as typed ("120"; "true" for a switch such as --continuous-scan). Leave out
    ///     flags the user did not give, so that the file and environment still apply.
    ///   - environment: usually `ProcessInfo.processInfo.environment`.
    static func resolve(
        configFlag: String?, flags: [String: String], environment: [String: String],
        workingDirectory: String = FileManager.default.currentDirectoryPath
    ) throws(ConfigurationError) -> ResolvedSettings {
        if let unknown = flags.keys.sorted().first(where: { SettingRegistry.definition($0) == nil }) {
            throw .unknownFlagKey(unknown)
        }
        var configFile = ConfigFileLocation.resolve(
            flag: configFlag, environment: environment, workingDirectory: workingDirectory)
        let file = try ConfigFileReader.load(configFile, home: environment["HOME"])
        configFile.exists = file.exists
        let commandLinePaths = PathContext(baseDirectory: workingDirectory, home: environment["HOME"])

        let resolution: SettingResolution<NodeSettings>
        do {
            resolution = try SettingResolution(
                rows: SettingRegistry.all, constraints: SettingRegistry.constraints, start: NodeSettings(), file: file.values, flags: flags,
                environment: environment, paths: commandLinePaths)
        } catch {
            throw ConfigurationError(error)
        }
        var settings = resolution.settings
        if let path = configFile.path, !file.lists.isEmpty {
            try FurtherListSettings.checkDistinct(file.lists, home: settings, path: path)
        }
        // Only from the file: a further list is a table of settings, which no flag or variable carries.
        settings.furtherLists = file.lists
        return ResolvedSettings(settings: settings, entries: resolution.entries, configFile: configFile)
    }
}

extension ConfigurationError {
    init(_ error: SettingError) {
        switch error {
        case .invalidValue(let key, let source, let problem): self = .invalidValue(key: key, source: source, problem: problem.text)
        case .conflict(_, let source, let problem): self = .conflict(source: source, problem: problem)
        case .noDefault(let key, let flag): self = .noDefault(key: key, flag: flag)
        }
    }
}

extension ResolvedSettings {
    /// The database location for `NodeStore.open`, as `StoreOptions.location()` would give it.
    /// Only the default place is Tracer's own directory, which it may restrict to 0700.
    var storeLocation: StoreLocation {
        let path = settings.database
        switch source(of: "node.database") {
        case .environment?:
            return StoreLocation(path: path, source: .environment, ownsDirectory: false)
        case .builtIn(let detail)?:
            let source: StoreLocation.Source = detail == StoreLocation.Source.xdgDataHome.rawValue ? .xdgDataHome : .home
            return StoreLocation(path: path, source: source, ownsDirectory: true)
        default:
            // StoreLocation.Source has no case for a configuration file yet; like --db, the
            // path was chosen by the user, so Tracer does not own its directory.
            return StoreLocation(path: path, source: .flag, ownsDirectory: false)
        }
    }
}
