import Foundation
import PositiveListFormat
import Settings
import TransparencyLog

/// A further authority's list the node follows besides the home one (`server.*`, `list.*`): a
/// `[lists.<name>]` table of the configuration file. Followed as a log, as the home list is; the
/// home list stays the one `tracer report` uploads to.
struct FurtherListSettings: Equatable, Sendable {
    var name: String
    var url: URL
    /// The raw 32-byte Ed25519 public key that signs this list's log.
    var publicKey: Data
    /// nil: the server's default origin for `publicKey`.
    var origin: String?
    var witnesses: [NoteVerifierKey] = []
    var witnessesRequired: Int64 = 0
    /// The file line of the table's header, for messages.
    var line: Int = 0

    /// The origin the list's checkpoints must name.
    var effectiveOrigin: String? {
        origin ?? (try? PositiveListPublicKey(base64: publicKey.base64EncodedString()))?.defaultLogOrigin
    }

    /// The settings a `[lists.<name>]` table may hold, each read as the home list's setting of
    /// the same meaning is (same checks, same messages).
    static let keys: KeyValuePairs<String, String> = [
        "url": "server.url", "public_key": "server.public_key", "origin": "list.origin",
        "witnesses": "list.witnesses", "witnesses_required": "list.witnesses_required",
    ]

    /// The table name "lists.<name>" a further list is read from.
    static let tablePrefix = "lists."

    /// Plain lowercase words: a letter, then letters, digits or `-`, at most 32 (a directory name
    /// and a word in messages). "home" names the home list in reports, so it is taken.
    static func nameProblem(_ name: String) -> String? {
        let bytes = Array(name.utf8)
        let isLetter = { (byte: UInt8) in (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte) }
        let isAllowed = { (byte: UInt8) in isLetter(byte) || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) || byte == UInt8(ascii: "-") }
        guard let first = bytes.first, isLetter(first), bytes.allSatisfy(isAllowed), bytes.count <= 32 else {
            return "a list's name must be a plain lowercase word (a to z, then letters, digits or -, at most 32), such as [lists.campus]; rename the table"
        }
        if name == "home" { return "the name home is taken by the list of server.url; choose another name for this table" }
        return nil
    }

    /// Reads one `[lists.<name>]` table; `table.name` starts with `tablePrefix`.
    static func read(_ table: TOMLTable, path: String, paths: PathContext) throws(ConfigurationError) -> FurtherListSettings {
        let name = String(table.name.dropFirst(tablePrefix.count))
        if let problem = nameProblem(name) { throw .listTable(path: path, line: table.line, problem: "[\(table.name)]: \(problem)") }
        var scratch = NodeSettings()
        for entry in table.entries {
            guard let homeKey = keys.first(where: { $0.key == entry.key })?.value, let definition = SettingRegistry.definition(homeKey) else {
                throw .listTable(
                    path: path, line: entry.line,
                    problem: "[\(table.name)]: \(entry.key) is not a setting of a list; a list's settings are \(keys.map(\.key).joined(separator: ", "))")
            }
            do {
                try definition.assign(&scratch, try definition.kind.check(entry.value.settingInput, paths: paths).get())
            } catch {
                throw .invalidValue(key: table.name + "." + entry.key, source: .file(path: path, line: entry.line), problem: error.text)
            }
        }
        guard let url = scratch.serverURL else {
            throw .listTable(path: path, line: table.line, problem: "[\(table.name)] has no url; add url = \"https://…\", the address of that authority's list server")
        }
        guard let key = scratch.serverPublicKey else {
            throw .listTable(path: path, line: table.line, problem: "[\(table.name)] has no public_key; add public_key = \"…\", the base64 key that authority publishes for its list")
        }
        let list = FurtherListSettings(
            name: name, url: url, publicKey: key, origin: scratch.listOrigin, witnesses: scratch.listWitnesses,
            witnessesRequired: scratch.listWitnessesRequired, line: table.line)
        if list.witnessesRequired > list.witnesses.count {
            throw .listTable(
                path: path, line: table.line,
                problem: "[\(table.name)]: witnesses_required (\(list.witnessesRequired)) must be at most the number of witnesses (\(list.witnesses.count)); add the witnesses' keys or lower witnesses_required")
        }
        return list
    }

    /// Refuses two tables following one log, or one following the home list's log: the lists
    /// would be matched twice and their state kept twice.
    static func checkDistinct(_ lists: [FurtherListSettings], home: NodeSettings, path: String) throws(ConfigurationError) {
        let homeOrigin = home.listOrigin
            ?? home.serverPublicKey.flatMap { try? PositiveListPublicKey(base64: $0.base64EncodedString()) }?.defaultLogOrigin
        var seen: [String: String] = [:]
        for list in lists {
            guard let origin = list.effectiveOrigin else { continue }
            if origin == homeOrigin {
                throw .listTable(
                    path: path, line: list.line,
                    problem: "[lists.\(list.name)] follows the same log as the home list (server.url, origin \(origin)); remove the table, the home list is followed already")
            }
            if let earlier = seen[origin] {
                throw .listTable(
                    path: path, line: list.line,
                    problem: "[lists.\(list.name)] follows the same log as [lists.\(earlier)] (origin \(origin)); keep one of the two tables")
            }
            seen[origin] = list.name
        }
    }
}
