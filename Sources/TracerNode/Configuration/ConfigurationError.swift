import Settings
/// Why the configuration could not be resolved; each description is one sentence saying where
/// the problem is and what to do.
enum ConfigurationError: Error, Equatable, Sendable, CustomStringConvertible {
    /// A file named by --config or TRACER_CONFIG that is not there.
    case missingFile(path: String, origin: ConfigFileLocation.Origin)
    case unreadableFile(path: String, reason: String)
    case fileTooLarge(path: String, limit: Int)
    case syntax(path: String, line: Int, problem: String)
    case unknownSection(path: String, line: Int, section: String)
    case unknownKey(path: String, line: Int, key: String)
    /// A `[lists.<name>]` table (a further list) that cannot be followed as written.
    case listTable(path: String, line: Int, problem: String)
    case invalidValue(key: String, source: SettingSource, problem: String)
    /// Two settings that are fine alone but not together.
    case conflict(source: SettingSource, problem: String)
    /// A setting without a default found from HOME or XDG variables, when neither is set.
    case noDefault(key: String, flag: String?)
    /// A key passed to `NodeSettings.resolve` that the registry does not have (a programming error).
    case unknownFlagKey(String)

    var description: String {
        switch self {
        case .missingFile(let path, let origin):
            return "The configuration file \(path) given by \(origin.rawValue) does not exist; create it or name another file."
        case .unreadableFile(let path, let reason):
            return "Cannot read the configuration file \(path) (\(reason)); check that it is a file you may read."
        case .fileTooLarge(let path, let limit):
            return "The configuration file \(path) is larger than \(limit / 1024) KiB, which is more than any configuration needs; check that --config names the right file."
        case .syntax(let path, let line, let problem):
            return "\(path) line \(line): \(problem)."
        case .unknownSection(let path, let line, let section):
            return "\(path) line \(line): [\(section)] is not a section Tracer knows; the sections are \(Self.sectionList)."
        case .unknownKey(let path, let line, let key):
            let (section, _) = Self.split(key)
            if section.isEmpty {
                return "\(path) line \(line): \(key) must be inside a section such as [node]; the sections are \(Self.sectionList)."
            }
            let known = SettingRegistry.all.filter { $0.section == section }.map(\.name).joined(separator: ", ")
            return "\(path) line \(line): \(key) is not a setting Tracer knows; the [\(section)] settings are \(known)."
        case .listTable(let path, let line, let problem):
            return "\(path) line \(line): \(problem)."
        case .invalidValue(let key, let source, let problem):
            return "\(source.location): \(key) \(problem); \(source.remedy)."
        case .conflict(let source, let problem):
            return "\(source.location): \(problem); \(source.remedy)."
        case .noDefault(let key, let flag):
            let how = flag.map { "give \($0) or set \(key) in the configuration file" } ?? "set \(key) in the configuration file"
            return "\(key) has no default because neither HOME nor an XDG directory variable is set; \(how)."
        case .unknownFlagKey(let key):
            return "\(key) is not a setting Tracer knows; please report this with the command you ran."
        }
    }

    private static var sectionList: String {
        SettingRegistry.all.map { "[\($0.section)]" }.reduce(into: [String]()) { if !$0.contains($1) { $0.append($1) } }
            .joined(separator: ", ")
    }

    private static func split(_ key: String) -> (section: String, name: String) {
        guard let dot = key.firstIndex(of: ".") else { return ("", key) }
        return (String(key[..<dot]), String(key[key.index(after: dot)...]))
    }
}
