import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Settings

/// Reads the configuration file and checks every entry in it against the registry, so a
/// mistake in the file is reported even when a flag or variable overrides that setting.
enum ConfigFileReader {
    /// Far beyond any real configuration; stops `--config /dev/zero` from reading forever.
    static let sizeLimit = 256 * 1024

    typealias FileValue = SettingResolution<NodeSettings>.FileValue

    /// The checked values by key, the further lists (`[lists.<name>]`, in file order), and
    /// whether the file exists.
    static func load(
        _ location: ConfigFileLocation, home: String?
    ) throws(ConfigurationError) -> (values: [String: FileValue], lists: [FurtherListSettings], exists: Bool) {
        guard let path = location.path else { return ([:], [], false) }
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else {
            if let origin = location.origin, location.isExplicit { throw .missingFile(path: path, origin: origin) }
            return ([:], [], false)
        }
        if isDirectory.boolValue { throw .unreadableFile(path: path, reason: "it is a directory") }

        let bytes = try contents(of: path)
        let document: TOMLDocument
        do {
            document = try TOMLReader.parse(bytes)
        } catch {
            throw .syntax(path: path, line: error.line, problem: error.problem)
        }
        let paths = PathContext(baseDirectory: (path as NSString).deletingLastPathComponent, home: home)
        var values: [String: FileValue] = [:]
        var lists: [FurtherListSettings] = []
        for table in document.tables {
            if table.name + "." == FurtherListSettings.tablePrefix {
                throw .listTable(
                    path: path, line: table.line,
                    problem: "[lists] holds no settings itself; give each further list a table of its own, such as [lists.campus] with url and public_key")
            }
            if table.name.hasPrefix(FurtherListSettings.tablePrefix) {
                lists.append(try FurtherListSettings.read(table, path: path, paths: paths))
                continue
            }
            if !table.name.isEmpty, !SettingRegistry.sections.contains(table.name) {
                throw .unknownSection(path: path, line: table.line, section: table.name)
            }
            for entry in table.entries {
                let key = table.name.isEmpty ? entry.key : table.name + "." + entry.key
                guard let definition = SettingRegistry.definition(key) else {
                    throw .unknownKey(path: path, line: entry.line, key: key)
                }
                let source = SettingSource.file(path: path, line: entry.line)
                switch definition.kind.check(entry.value.settingInput, paths: paths) {
                case .success(let value):
                    values[key] = FileValue(value: value, source: source)
                case .failure(let problem):
                    throw .invalidValue(key: key, source: source, problem: problem.text)
                }
            }
        }
        return (values, lists, true)
    }

    /// The file's bytes, at most `sizeLimit` of them.
    private static func contents(of path: String) throws(ConfigurationError) -> [UInt8] {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { throw .unreadableFile(path: path, reason: String(cString: strerror(errno))) }
        defer { close(descriptor) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 16 * 1024)
        while bytes.count <= sizeLimit {
            let count = chunk.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
            if count < 0 {
                if errno == EINTR { continue }
                throw .unreadableFile(path: path, reason: String(cString: strerror(errno)))
            }
            if count == 0 { return bytes }
            bytes.append(contentsOf: chunk[0..<count])
        }
        throw .fileTooLarge(path: path, limit: sizeLimit)
    }
}
