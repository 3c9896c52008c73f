import TracerCore

/// Reads the subset of TOML the node's configuration file uses: comments, one-level `[table]`
/// headers (and two-level `[lists.<name>]` ones, one per further list the node follows), and `key = value` lines whose values are strings, integers, floats or booleans.
///
/// Everything else TOML allows (arrays, inline tables, dotted or quoted keys, multi-line strings,
/// dates) is refused with the line it is on rather than half-understood. The reader works on
/// bytes with bounds-checked indexes and no recursion, so hostile input can only make it throw.
enum TOMLReader {
    /// The tables whose named subtables (`[lists.campus]`) the reader accepts.
    static let tablesWithSubtables: Set<String> = ["lists"]

    static func parse(_ bytes: [UInt8]) throws(TOMLSyntaxError) -> TOMLDocument {
        var tables = [TOMLTable(name: "", line: 0, entries: [])]
        var tableLines: [String: Int] = ["": 0]
        var lineNumber = 0
        var lineStart = bytes.starts(with: [0xEF, 0xBB, 0xBF]) ? 3 : 0  // a UTF-8 byte order mark
        while lineStart < bytes.count || (lineStart == bytes.count && lineNumber == 0) {
            lineNumber += 1
            let newline = bytes[lineStart...].firstIndex(of: UInt8(ascii: "\n")) ?? bytes.count
            var lineEnd = newline
            if lineEnd > lineStart, bytes[lineEnd - 1] == UInt8(ascii: "\r") { lineEnd -= 1 }
            var cursor = try LineCursor(Array(bytes[lineStart..<lineEnd]), line: lineNumber)
            lineStart = newline + 1

            switch try cursor.readLine() {
            case .blank:
                break
            case .header(let name):
                if let earlier = tableLines[name] {
                    throw cursor.failure(
                        earlier == 0 ? "the table [\(name)] cannot be opened here" : "the table [\(name)] is already defined on line \(earlier)")
                }
                tableLines[name] = lineNumber
                tables.append(TOMLTable(name: name, line: lineNumber, entries: []))
            case .entry(let key, let value):
                let current = tables.count - 1
                if let earlier = tables[current].entries.first(where: { $0.key == key }) {
                    throw cursor.failure("the key \(key) is already set on line \(earlier.line)")
                }
                tables[current].entries.append(TOMLEntry(key: key, value: value, line: lineNumber))
            }
        }
        return TOMLDocument(tables: tables)
    }
}

/// What one line holds.
private enum TOMLLine {
    case blank
    case header(String)
    case entry(key: String, value: TOMLValue)
}

/// A position in one line (without its line break).
private struct LineCursor {
    private let bytes: [UInt8]
    private var index = 0
    let line: Int

    init(_ bytes: [UInt8], line: Int) throws(TOMLSyntaxError) {
        self.bytes = bytes
        self.line = line
        guard String(validating: bytes, as: UTF8.self) != nil else {
            throw TOMLSyntaxError(line: line, problem: "the line is not valid UTF-8 text")
        }
        // TOML allows no raw control character anywhere, not even in comments; tabs are whitespace.
        if let control = bytes.first(where: { ($0 < 0x20 && $0 != 0x09) || $0 == 0x7F }) {
            throw TOMLSyntaxError(line: line, problem: "control character U+\(hex(control, width: 4)) is not allowed; remove it")
        }
    }

    func failure(_ problem: String) -> TOMLSyntaxError { TOMLSyntaxError(line: line, problem: problem) }

    private var current: UInt8? { index < bytes.count ? bytes[index] : nil }

    private func peek(_ offset: Int) -> UInt8? { index + offset < bytes.count ? bytes[index + offset] : nil }

    private mutating func skipWhitespace() {
        while let byte = current, byte == 0x20 || byte == 0x09 { index += 1 }
    }

    /// After the meaningful part of a line only whitespace and a comment may follow.
    private mutating func expectEndOfLine(after what: String) throws(TOMLSyntaxError) {
        skipWhitespace()
        guard let byte = current, byte != UInt8(ascii: "#") else { return }
        throw failure("unexpected \(describe(from: index)) after \(what); put one setting per line")
    }

    mutating func readLine() throws(TOMLSyntaxError) -> TOMLLine {
        skipWhitespace()
        guard let first = current, first != UInt8(ascii: "#") else { return .blank }
        if first == UInt8(ascii: "[") { return .header(try readHeader()) }
        let key = try readKey()
        skipWhitespace()
        if current == UInt8(ascii: ".") {
            throw failure("dotted keys such as \(key).… are not supported; put the key under a [section] header")
        }
        guard current == UInt8(ascii: "=") else {
            throw failure(current == nil ? "the key \(key) has no value; write \(key) = value" : "expected = after the key \(key)")
        }
        index += 1
        skipWhitespace()
        let value = try readValue()
        try expectEndOfLine(after: "the value of \(key)")
        return .entry(key: key, value: value)
    }

    private mutating func readHeader() throws(TOMLSyntaxError) -> String {
        index += 1
        if current == UInt8(ascii: "[") { throw failure("arrays of tables ([[…]]) are not supported") }
        skipWhitespace()
        var name = try readKey()
        skipWhitespace()
        // Only [lists.<name>]: each further list is a table of its own under [lists].
        if current == UInt8(ascii: "."), TOMLReader.tablesWithSubtables.contains(name) {
            index += 1
            skipWhitespace()
            name += "." + (try readKey())
            skipWhitespace()
        }
        if current == UInt8(ascii: ".") { throw failure("nested tables such as [\(name).…] are not supported") }
        guard current == UInt8(ascii: "]") else { throw failure("the table header [\(name) is missing its closing ]") }
        index += 1
        try expectEndOfLine(after: "the table header [\(name)]")
        return name
    }

    private mutating func readKey() throws(TOMLSyntaxError) -> String {
        if current == UInt8(ascii: "\"") || current == UInt8(ascii: "'") {
            throw failure("quoted keys are not supported; write the key without quotes")
        }
        let start = index
        while let byte = current, Self.isBareKeyByte(byte) { index += 1 }
        guard index > start else {
            throw failure(current == nil ? "expected a key" : "expected a key, found \(describe(from: index))")
        }
        return String(decoding: bytes[start..<index], as: UTF8.self)
    }

    private static func isBareKeyByte(_ byte: UInt8) -> Bool {
        (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte) || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte)
            || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) || byte == UInt8(ascii: "_") || byte == UInt8(ascii: "-")
    }

    private mutating func readValue() throws(TOMLSyntaxError) -> TOMLValue {
        guard let first = current, first != UInt8(ascii: "#") else { throw failure("a value is missing after =") }
        switch first {
        case UInt8(ascii: "\""):
            if peek(1) == UInt8(ascii: "\""), peek(2) == UInt8(ascii: "\"") { throw failure("multi-line strings are not supported") }
            return .string(try readBasicString())
        case UInt8(ascii: "'"):
            if peek(1) == UInt8(ascii: "'"), peek(2) == UInt8(ascii: "'") { throw failure("multi-line strings are not supported") }
            return .string(try readLiteralString())
        case UInt8(ascii: "["):
            throw failure("arrays are not supported")
        case UInt8(ascii: "{"):
            throw failure("inline tables are not supported")
        default:
            let start = index
            while let byte = current, byte != 0x20, byte != 0x09, byte != UInt8(ascii: "#") { index += 1 }
            return try TOMLScalar.parse(String(decoding: bytes[start..<index], as: UTF8.self), line: line)
        }
    }

    private mutating func readBasicString() throws(TOMLSyntaxError) -> String {
        index += 1
        var text: [UInt8] = []
        while let byte = current {
            index += 1
            switch byte {
            case UInt8(ascii: "\""):
                return String(decoding: text, as: UTF8.self)
            case UInt8(ascii: "\\"):
                text.append(contentsOf: try readEscape())
            default:
                text.append(byte)
            }
        }
        throw failure("unterminated string; close it with \" on the same line")
    }

    /// The bytes an escape sequence stands for; `index` is just past the backslash.
    private mutating func readEscape() throws(TOMLSyntaxError) -> [UInt8] {
        guard let letter = current else { throw failure("unterminated string; close it with \" on the same line") }
        index += 1
        switch letter {
        case UInt8(ascii: "\""): return [UInt8(ascii: "\"")]
        case UInt8(ascii: "\\"): return [UInt8(ascii: "\\")]
        case UInt8(ascii: "n"): return [0x0A]
        case UInt8(ascii: "t"): return [0x09]
        case UInt8(ascii: "r"): return [0x0D]
        case UInt8(ascii: "b"): return [0x08]
        case UInt8(ascii: "f"): return [0x0C]
        case UInt8(ascii: "u"): return try readUnicodeEscape(digits: 4)
        case UInt8(ascii: "U"): return try readUnicodeEscape(digits: 8)
        default:
            throw failure("unknown escape sequence \\\(describeByte(letter)) in a string; write \\\\ for a backslash")
        }
    }

    private mutating func readUnicodeEscape(digits: Int) throws(TOMLSyntaxError) -> [UInt8] {
        var code: UInt32 = 0
        for _ in 0..<digits {
            guard let byte = current, let digit = Hex.digitValue(byte) else {
                throw failure("a \\\(digits == 4 ? "u" : "U") escape needs exactly \(digits) hexadecimal digits")
            }
            code = code << 4 | UInt32(digit)
            index += 1
        }
        guard let scalar = Unicode.Scalar(code) else {
            throw failure("\\\(digits == 4 ? "u" : "U")\(hex(code, width: digits)) is not a Unicode scalar value")
        }
        return Array(String(Character(scalar)).utf8)
    }

    private mutating func readLiteralString() throws(TOMLSyntaxError) -> String {
        index += 1
        let start = index
        while let byte = current {
            if byte == UInt8(ascii: "'") {
                index += 1
                return String(decoding: bytes[start..<(index - 1)], as: UTF8.self)
            }
            index += 1
        }
        throw failure("unterminated string; close it with ' on the same line")
    }

    /// The rest of the line from `position`, shortened, for messages.
    private func describe(from position: Int) -> String {
        let rest = String(decoding: bytes[min(position, bytes.count)...], as: UTF8.self)
        return "\"" + String(rest.prefix(20)) + (rest.count > 20 ? "…" : "") + "\""
    }

    private func describeByte(_ byte: UInt8) -> String {
        byte < 0x80 ? String(UnicodeScalar(byte)) : "U+" + hex(byte, width: 2)
    }
}

private func hex(_ value: some BinaryInteger, width: Int) -> String {
    let digits = String(value, radix: 16, uppercase: true)
    return String(repeating: "0", count: max(0, width - digits.count)) + digits
}
