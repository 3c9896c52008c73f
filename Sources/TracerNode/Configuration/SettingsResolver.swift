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

        var settings = NodeSettings()
        var entries: [ResolvedSettings.Entry] = []
        for definition in SettingRegistry.all {
            // Every layer is checked, not only the winning one: a bad variable is reported even
            // when a flag hides it today, rather than surfacing later without the flag.
            var environmentValue: SettingValue?
            var environmentSource: SettingSource?
            if let variable = definition.environmentVariable, let raw = SettingText.environmentValue(variable, in: environment) {
                let source = SettingSource.environment(variable: variable)
                environmentValue = try checked(raw, for: definition, from: source, paths: commandLinePaths)
                environmentSource = source
            }
            var flagValue: SettingValue?
            var flagSource: SettingSource?
            if let raw = flags[definition.key] {
                let source = SettingSource.flag(definition.flag ?? "--" + definition.key)
                flagValue = try checked(raw, for: definition, from: source, paths: commandLinePaths)
                flagSource = source
            }

            let value: SettingValue?
            let source: SettingSource
            if let flagValue, let flagSource {
                (value, source) = (flagValue, flagSource)
            } else if let environmentValue, let environmentSource {
                (value, source) = (environmentValue, environmentSource)
            } else if let fromFile = file.values[definition.key], let path = configFile.path {
                (value, source) = (fromFile.value, .file(path: path, line: fromFile.line))
            } else {
                (value, source) = try defaultValue(of: definition, environment: environment)
            }
            if let value { definition.assign(&settings, value) }
            entries.append(ResolvedSettings.Entry(definition: definition, value: value, source: source))
        }

        if let path = configFile.path, !file.lists.isEmpty {
            try FurtherListSettings.checkDistinct(file.lists, home: settings, path: path)
        }
        // Only from the file: a further list is a table of settings, which no flag or variable carries.
        settings.furtherLists = file.lists
        let resolved = ResolvedSettings(settings: settings, entries: entries, configFile: configFile)
        for constraint in SettingRegistry.constraints {
            guard let problem = constraint.problem(settings) else { continue }
            var source = resolved.source(of: constraint.blamed) ?? .builtIn(detail: nil)
            if case .builtIn = source { source = resolved.source(of: constraint.other) ?? source }
            throw .conflict(source: source, problem: problem)
        }
        return resolved
    }

    private static func checked(
        _ raw: String, for definition: SettingDefinition, from source: SettingSource, paths: PathContext
    ) throws(ConfigurationError) -> SettingValue {
        switch definition.kind.check(text: raw, paths: paths) {
        case .success(let value): return value
        case .failure(let problem): throw .invalidValue(key: definition.key, source: source, problem: problem.text)
        }
    }

    private static func defaultValue(
        of definition: SettingDefinition, environment: [String: String]
    ) throws(ConfigurationError) -> (SettingValue?, SettingSource) {
        switch definition.defaultValue {
        case .none:
            return (nil, .builtIn(detail: nil))
        case .value(let value):
            return (value, .builtIn(detail: nil))
        case .computed(let find):
            guard let found = find(environment) else { throw .noDefault(key: definition.key, flag: definition.flag) }
            return (found.value, .builtIn(detail: found.detail))
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
