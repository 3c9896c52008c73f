/// Where a setting's effective value came from, for the node (`tracer config`) and the server
/// (`tracer-server config`) alike: a flag wins over its environment variable, which wins over the
/// configuration file, which wins over the default.
public enum SettingSource: Equatable, Sendable, CustomStringConvertible, Encodable {
    /// The built-in default; `detail` says how a computed default was found, e.g. "$XDG_CACHE_HOME".
    case builtIn(detail: String?)
    /// The configuration file; the server's JSON file names neither itself nor a line.
    case file(path: String?, line: Int?)
    case environment(variable: String)
    case flag(String)

    /// "default", "tracer.toml:4" (or "file"), "env TRACER_X", "flag --x".
    public var description: String {
        switch self {
        case .builtIn(let detail): detail.map { "default (\($0))" } ?? "default"
        case .file(let path?, let line?): "\(path):\(line)"
        case .file(let path?, nil): path
        case .file(nil, _): "file"
        case .environment(let variable): "env \(variable)"
        case .flag(let flag): "flag \(flag)"
        }
    }

    /// How an error message points at the value: "tracer.toml line 4", "TRACER_X", "--x".
    public var location: String {
        switch self {
        case .builtIn: "the default"
        case .file(let path?, let line?): "\(path) line \(line)"
        case .file(let path?, nil): path
        case .file(nil, _): "the configuration file"
        case .environment(let variable): variable
        case .flag(let flag): flag
        }
    }

    /// What the user can do about a bad value from here.
    public var remedy: String {
        switch self {
        case .builtIn: "set it explicitly"
        case .file(_, _?): "fix that line, or delete it to use the default"
        case .file(_, nil): "fix the configuration file"
        case .environment(let variable): "fix or unset \(variable)"
        case .flag(let flag): "fix the value given to \(flag)"
        }
    }

    /// Which source wins over which: a flag (3) over a variable over the file over the default (0).
    public var precedence: Int {
        switch self {
        case .builtIn: 0
        case .file: 1
        case .environment: 2
        case .flag: 3
        }
    }

    private enum CodingKeys: String, CodingKey { case kind, detail, path, line, variable, flag }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        switch self {
        case .builtIn(let detail):
            try container.encode("default", forKey: .kind)
            try container.encodeIfPresent(detail, forKey: .detail)
        case .file(let path, let line):
            try container.encode("file", forKey: .kind)
            try container.encodeIfPresent(path, forKey: .path)
            try container.encodeIfPresent(line, forKey: .line)
        case .environment(let variable):
            try container.encode("environment", forKey: .kind)
            try container.encode(variable, forKey: .variable)
        case .flag(let flag):
            try container.encode("flag", forKey: .kind)
            try container.encode(flag, forKey: .flag)
        }
    }
}
