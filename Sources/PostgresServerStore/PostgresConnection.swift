import CLibPQ
import Foundation
import ServerStorage
import TracerCore

/// A statement parameter. Integers, booleans and text go as text (the server parses them);
/// bytes go in binary, as bytea.
enum PostgresValue: Sendable {
    case null
    case int(Int64)
    case bool(Bool)
    case text(String)
    case bytes([UInt8])
    /// A bigint[] (written in PostgreSQL's array text form).
    case intArray([Int64])
    /// A bytea[], each element written as a quoted `\x` hexadecimal literal.
    case bytesArray([[UInt8]])

    fileprivate var oid: Oid {
        switch self {
        case .null, .text: 25
        case .int: 20
        case .bool: 16
        case .bytes: 17
        case .intArray: 1016
        case .bytesArray: 1001
        }
    }

    fileprivate var textForm: String? {
        switch self {
        case .null, .bytes: nil
        case .int(let value): String(value)
        case .bool(let value): value ? "t" : "f"
        case .text(let value): value
        case .intArray(let values): "{" + values.map(String.init).joined(separator: ",") + "}"
        case .bytesArray(let values): "{" + values.map { "\"\\\\x" + Hex.encode($0) + "\"" }.joined(separator: ",") + "}"
        }
    }
}

/// The rows of a statement, as PostgreSQL's text forms (NULL is nil), and how many rows a
/// command changed.
struct PostgresRows: Sendable {
    let rows: [[String?]]
    let affectedRowCount: Int

    var first: PostgresRow? { rows.first.map(PostgresRow.init) }
    var all: [PostgresRow] { rows.map(PostgresRow.init) }
}

/// One row, read by column position.
struct PostgresRow: Sendable {
    let cells: [String?]

    func isNull(_ column: Int) -> Bool { cells[column] == nil }

    func int(_ column: Int) throws(PostgresError) -> Int64 {
        guard let text = cells[column], let value = Int64(text) else { throw unexpected(column, "an integer") }
        return value
    }

    func optionalInt(_ column: Int) throws(PostgresError) -> Int64? {
        cells[column] == nil ? nil : try int(column)
    }

    func string(_ column: Int) throws(PostgresError) -> String {
        guard let text = cells[column] else { throw unexpected(column, "text") }
        return text
    }

    func bool(_ column: Int) throws(PostgresError) -> Bool {
        guard let text = cells[column], text == "t" || text == "f" else { throw unexpected(column, "a boolean") }
        return text == "t"
    }

    /// A bytea column in its text form, `\x` followed by hexadecimal digits.
    func bytes(_ column: Int) throws(PostgresError) -> [UInt8] {
        guard let text = cells[column], text.hasPrefix("\\x"), let bytes = Hex.decode(String(text.dropFirst(2))) else {
            throw unexpected(column, "bytea")
        }
        return bytes
    }

    private func unexpected(_ column: Int, _ expected: String) -> PostgresError {
        PostgresError(context: "reading a result", sqlState: nil, message: "column \(column) is not \(expected)")
    }
}

/// One libpq connection. Its calls block, so it is used from one thread at a time, never from
/// Swift's cooperative pool: ``PostgresConnectionPool`` runs each use on the connection's own
/// serial queue.
final class PostgresConnection {
    private let handle: OpaquePointer

    /// Connects with `settings`: libpq keywords and values (`dbname` may be a
    /// `postgresql://` URL, which libpq expands). A password goes in its own `password` entry,
    /// so that it is never part of a URL that could be logged.
    init(settings: [(String, String)]) throws(PostgresError) {
        let keywords = settings.map { strdup($0.0) } + [nil]
        let values = settings.map { strdup($0.1) } + [nil]
        defer {
            keywords.forEach { free($0) }
            values.forEach { free($0) }
        }
        let connection = keywords.map { UnsafePointer($0) }.withUnsafeBufferPointer { keywordPointers in
            values.map { UnsafePointer($0) }.withUnsafeBufferPointer { valuePointers in
                PQconnectdbParams(keywordPointers.baseAddress, valuePointers.baseAddress, 1)
            }
        }
        guard let connection else {
            throw PostgresError(context: "connecting", sqlState: nil, message: "libpq could not allocate a connection")
        }
        guard PQstatus(connection) == CONNECTION_OK else {
            let message = Self.trimmed(PQerrorMessage(connection))
            PQfinish(connection)
            throw PostgresError(context: "connecting", sqlState: "08001", message: message)
        }
        handle = connection
    }

    deinit { PQfinish(handle) }

    /// False once the connection broke; the pool then opens a new one.
    var isHealthy: Bool { PQstatus(handle) == CONNECTION_OK }

    /// Runs `sql` with `$1`, `$2`… bound to `parameters` (never spliced into the text).
    @discardableResult
    func exec(_ sql: String, _ parameters: [PostgresValue] = []) throws(PostgresError) -> PostgresRows {
        let texts = parameters.map { $0.textForm.map { strdup($0) } ?? nil }
        defer { texts.forEach { free($0) } }
        let binaries: [[UInt8]?] = parameters.map { if case .bytes(let bytes) = $0 { bytes } else { nil } }
        let types = parameters.map(\.oid)
        let formats: [Int32] = parameters.map { if case .bytes = $0 { 1 } else { 0 } }
        let lengths: [Int32] = binaries.map { Int32($0?.count ?? 0) }
        // Binary values are copied to buffers that live until the call returns.
        let buffers: [UnsafeMutablePointer<CChar>?] = binaries.map { bytes in
            guard let bytes else { return nil }
            let buffer = UnsafeMutablePointer<CChar>.allocate(capacity: max(bytes.count, 1))
            for (offset, byte) in bytes.enumerated() { buffer[offset] = CChar(bitPattern: byte) }
            return buffer
        }
        defer { buffers.forEach { $0?.deallocate() } }
        var pointers: [UnsafePointer<CChar>?] = []
        for (text, buffer) in zip(texts, buffers) {
            if let text { pointers.append(UnsafePointer(text)) } else if let buffer { pointers.append(UnsafePointer(buffer)) } else { pointers.append(nil) }
        }
        let result = PQexecParams(handle, sql, Int32(parameters.count), types, pointers, lengths, formats, 0)
        defer { PQclear(result) }
        switch PQresultStatus(result) {
        case PGRES_COMMAND_OK, PGRES_TUPLES_OK:
            break
        default:
            let state = PQresultErrorField(result, Int32(UInt8(ascii: "C"))).map { String(cString: $0) }
            let primary = PQresultErrorField(result, Int32(UInt8(ascii: "M"))).map { String(cString: $0) }
            throw PostgresError(
                context: "running " + Self.statementName(sql), sqlState: state, message: primary ?? Self.trimmed(PQerrorMessage(handle)))
        }
        let rowCount = Int(PQntuples(result))
        let columnCount = Int(PQnfields(result))
        var rows: [[String?]] = []
        rows.reserveCapacity(rowCount)
        for row in 0..<rowCount {
            var cells: [String?] = []
            cells.reserveCapacity(columnCount)
            for column in 0..<columnCount {
                if PQgetisnull(result, Int32(row), Int32(column)) == 1 {
                    cells.append(nil)
                } else {
                    cells.append(String(cString: PQgetvalue(result, Int32(row), Int32(column))))
                }
            }
            rows.append(cells)
        }
        let affected = Int(String(cString: PQcmdTuples(result))) ?? 0
        return PostgresRows(rows: rows, affectedRowCount: affected)
    }

    /// Runs a script of several statements without parameters (a migration step).
    func execScript(_ sql: String) throws(PostgresError) {
        let result = PQexec(handle, sql)
        defer { PQclear(result) }
        guard PQresultStatus(result) == PGRES_COMMAND_OK || PQresultStatus(result) == PGRES_TUPLES_OK else {
            let state = PQresultErrorField(result, Int32(UInt8(ascii: "C"))).map { String(cString: $0) }
            let primary = PQresultErrorField(result, Int32(UInt8(ascii: "M"))).map { String(cString: $0) }
            throw PostgresError(context: "running a schema step", sqlState: state, message: primary ?? Self.trimmed(PQerrorMessage(handle)))
        }
    }

    /// Runs `body` in one transaction at `isolation`, committing when it returns and rolling
    /// back when it throws.
    func transaction<T>(_ isolation: String = "READ COMMITTED", _ body: (PostgresConnection) throws -> T) throws -> T {
        do throws(PostgresError) {
            try exec("BEGIN ISOLATION LEVEL " + isolation)
        } catch where error.isConnectionFailure {
            throw PostgresError(context: error.context, sqlState: error.sqlState, message: error.message, nothingDone: true)
        }
        do {
            let value = try body(self)
            try exec("COMMIT")
            return value
        } catch {
            _ = try? exec("ROLLBACK")
            throw error
        }
    }

    /// The statement's first words, for error messages: never its parameters.
    private static func statementName(_ sql: String) -> String {
        let words = sql.split(whereSeparator: \.isWhitespace).prefix(4).joined(separator: " ")
        return "`\(words)…`"
    }

    private static func trimmed(_ message: UnsafePointer<CChar>?) -> String {
        message.map { String(cString: $0).trimmingCharacters(in: .whitespacesAndNewlines) } ?? "no message"
    }
}
