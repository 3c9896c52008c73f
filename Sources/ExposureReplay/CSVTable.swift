import Foundation

/// A CSV file read by column name: the replay needs a handful of named columns and ignores the
/// rest, so recordings with more (or reordered) columns are read alike.
struct CSVTable {
    let path: String
    let header: [String]
    let rows: [[Substring]]

    init(path: String) throws(ReplayError) {
        let text: String
        do { text = try String(contentsOfFile: path, encoding: .utf8) } catch {
            throw .unreadable(path: path, reason: error.localizedDescription)
        }
        var lines = text.split(omittingEmptySubsequences: true, whereSeparator: \.isNewline)
        guard !lines.isEmpty else { throw .unreadable(path: path, reason: "the file is empty") }
        let header = Self.fields(of: lines.removeFirst()).map { String($0) }
        self.path = path
        self.header = header
        self.rows = lines.map(Self.fields(of:))
    }

    /// The index of `name`, or a typed error that names the file and the column.
    func column(_ name: String) throws(ReplayError) -> Int {
        guard let index = header.firstIndex(of: name) else { throw .missingColumn(name, path: path) }
        return index
    }

    /// Splits one line; a quoted field may hold commas (the quotes are dropped, "" is a quote).
    static func fields(of line: Substring) -> [Substring] {
        guard line.contains("\"") else { return line.split(separator: ",", omittingEmptySubsequences: false) }
        var fields: [Substring] = []
        var current = ""
        var quoted = false
        var previous: Character?
        for character in line {
            switch character {
            case "\"" where quoted: quoted = false
            case "\"": if previous == "\"" { current.append("\"") }; quoted = true
            case "," where !quoted:
                fields.append(Substring(current))
                current = ""
            default: current.append(character)
            }
            previous = character
        }
        fields.append(Substring(current))
        return fields
    }
}

public enum ReplayError: Error, Equatable, Sendable, CustomStringConvertible {
    case unreadable(path: String, reason: String)
    case missingColumn(String, path: String)
    case badValue(column: String, row: Int, value: String, path: String)
    case store(String)

    public var description: String {
        switch self {
        case .unreadable(let path, let reason):
            return "cannot read \(path): \(reason); give the folder holding the sessions and readings CSV files"
        case .missingColumn(let name, let path):
            return "\(path) has no column \"\(name)\"; the replay needs the columns described in the data's README"
        case .badValue(let column, let row, let value, let path):
            return "\(path), data row \(row): \"\(value)\" is not a valid \(column)"
        case .store(let reason):
            return "the replay's temporary node store failed: \(reason)"
        }
    }
}
