import Foundation
import TracerCore

/// Why a request body is not a history (or not a code request); every case becomes a 400
/// `invalid_json`.
///
/// Paths name the place in the document (`ids[3].validFrom`), never its content: ids are
/// personal data and must not be echoed or logged.
public enum HistoryDecodingError: Error, Sendable, Equatable {
    /// Not JSON (RFC 8259) at this byte offset: a stray or missing character, a bad escape,
    /// invalid UTF-8, or the end of the body in the middle of a value.
    case notJSON(offset: Int)
    /// Arrays and objects nested deeper than ``HistoryJSONDecoder/maximumDepth``.
    case nestedTooDeeply(offset: Int)
    case notAnObject
    /// The key-history form of ``notAnObject``.
    case notAKeyHistoryObject
    /// The code-request (`POST /v1/codes`) form of ``notAnObject``.
    case notACodeRequestObject
    /// A member the shape does not have, where the shape allows no others.
    case unknownField(name: String)
    case missingField(path: String)
    case duplicateField(path: String)
    case wrongType(path: String)
    /// A time that is not an integer, or one outside the 64-bit range.
    case notAnInteger(path: String)

    public var detail: String {
        switch self {
        case .notJSON(let offset):
            return "it is not valid JSON (at byte \(offset))"
        case .nestedTooDeeply(let offset):
            return "it nests arrays or objects more than \(HistoryJSONDecoder.maximumDepth) deep (at byte \(offset))"
        case .notAnObject:
            return #"it is not a JSON object of the form {"ids": [{"id": "…", "validFrom": …, "validUntil": …}]}"#
        case .notAKeyHistoryObject:
            return #"it is not a JSON object of the form {"keys": [{"day": …, "intervalSeconds": …, "key": "…"}]}"#
        case .notACodeRequestObject:
            return #"it is not a JSON object of the form {"expiresInSeconds": …}"#
        case .unknownField(let name):
            // The name is the client's own text: shown only when it is short and plain.
            let plain = name.count <= 40 && name.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "_") }
            return plain ? "it has a member \"\(name)\" that is not allowed" : "it has a member that is not allowed"
        case .missingField(let path):
            return "\(path) is missing"
        case .duplicateField(let path):
            return "\(path) appears more than once"
        case .wrongType(let path):
            return "\(path) has the wrong type"
        case .notAnInteger(let path):
            return "\(path) is not a whole number of seconds in the 64-bit range"
        }
    }
}

extension SubmittedHistory {
    /// Decodes `{"ids": [{"id": "…", "validFrom": N, "validUntil": N}, …]}` with
    /// ``HistoryJSONDecoder``.
    public init(json: Data) throws(HistoryDecodingError) {
        self = try HistoryJSONDecoder.decode(json) { (decoder: inout HistoryJSONDecoder) throws(HistoryDecodingError) in
            try decoder.decodeHistory()
        }
    }
}

/// A decoder for the one JSON shape `POST /v1/histories` accepts.
///
/// Foundation's `JSONDecoder` spent about 7 ms on a 2,688-id history, a third of an upload's
/// cost, building a generic tree and boxing every value; this reads the bytes once, straight
/// into ``SubmittedHistory``. It accepts what `JSONDecoder` accepted for this shape, with the
/// same outcomes: unknown members are skipped, a missing or mistyped field is an error, a time
/// written as `1.7e9` or `1700000000.0` is read as the integer it denotes, and what is not an
/// id (wrong length, not hex) is left to ``HistoryRules`` to refuse as `invalid_id` with its
/// position. It is stricter where RFC 8259 is: no trailing commas, no raw control characters
/// or invalid UTF-8 in strings, no repeated member names (which one would count would be
/// ambiguous); and a time must denote an integer exactly (`JSONDecoder` went through Double and
/// read 1.0000000000000001 as 1).
///
/// `POST /v1/key-histories` is read by the same decoder (KeyHistoryJSONDecoder.swift), with the
/// same rules.
///
/// Hostile input only ever produces a ``HistoryDecodingError``: every read checks the end of
/// the buffer, integers are checked for overflow, exponents are bounded, and skipped values
/// may nest at most ``maximumDepth`` deep (the recursion depth, so the stack stays small).
struct HistoryJSONDecoder {
    /// Far more than the history shape (3 levels) needs, and as deep as skipping may recurse.
    static let maximumDepth = 64

    let bytes: UnsafeBufferPointer<UInt8>
    var position = 0

    init(_ bytes: UnsafeBufferPointer<UInt8>) {
        self.bytes = bytes
    }

    /// Runs `read` on a decoder over `json`'s bytes.
    static func decode<Value>(
        _ json: Data, _ read: (inout HistoryJSONDecoder) throws(HistoryDecodingError) -> Value
    ) throws(HistoryDecodingError) -> Value {
        // Data.withUnsafeBytes rethrows untyped errors; a Result keeps the type.
        let decoded = json.withUnsafeBytes { (raw: UnsafeRawBufferPointer) -> Result<Value, HistoryDecodingError> in
            var decoder = HistoryJSONDecoder(raw.bindMemory(to: UInt8.self))
            return Result { () throws(HistoryDecodingError) in try read(&decoder) }
        }
        return try decoded.get()
    }

    mutating func decodeHistory() throws(HistoryDecodingError) -> SubmittedHistory {
        SubmittedHistory(ids: try decodeObject(requiring: "ids", notAnObject: .notAnObject) {
            (decoder: inout HistoryJSONDecoder) throws(HistoryDecodingError) in try decoder.readEntries()
        })
    }

    /// The top level of an upload (id or key history): one object whose member `field` is read by
    /// `readField`, once; other members are skipped.
    mutating func decodeObject<Value>(
        requiring field: String, notAnObject: HistoryDecodingError,
        _ readField: (inout HistoryJSONDecoder) throws(HistoryDecodingError) -> Value
    ) throws(HistoryDecodingError) -> Value {
        var value: Value?
        try decodeTopLevelObject(notAnObject: notAnObject) { (decoder: inout HistoryJSONDecoder, name: String) throws(HistoryDecodingError) in
            guard name == field else { return try decoder.skipValue(depth: 2) }
            guard value == nil else { throw .duplicateField(path: field) }
            value = try readField(&decoder)
        }
        guard let value else { throw .missingField(path: field) }
        return value
    }

    /// The whole body as one object, each member handed to `member` by name, which must consume
    /// its value; anything after the object is an error.
    mutating func decodeTopLevelObject(
        notAnObject: HistoryDecodingError, _ member: (inout HistoryJSONDecoder, String) throws(HistoryDecodingError) -> Void
    ) throws(HistoryDecodingError) {
        // JSONDecoder accepted a UTF-8 byte order mark; so does this.
        if bytes.count >= 3, bytes[0] == 0xEF, bytes[1] == 0xBB, bytes[2] == 0xBF { position = 3 }
        skipWhitespace()
        guard let first = peek() else { throw .notJSON(offset: position) }
        guard first == ASCII.openBrace else {
            // Still a syntax error if it is not JSON at all; otherwise the wrong shape.
            try skipValue(depth: 1)
            try expectEnd()
            throw notAnObject
        }
        try readObject(depth: 1, member)
        try expectEnd()
    }

    // MARK: The history's shape

    private mutating func readEntries() throws(HistoryDecodingError) -> [SubmittedEntry] {
        // An entry takes at least 30 bytes.
        try readArrayOfObjects(named: "ids", minimumElementSize: 30) {
            (decoder: inout HistoryJSONDecoder, index: Int) throws(HistoryDecodingError) in try decoder.readEntry(index: index)
        }
    }

    private mutating func readEntry(index: Int) throws(HistoryDecodingError) -> SubmittedEntry {
        var id: String?
        var validFrom: Int64?
        var validUntil: Int64?
        try readObject(depth: 3) { (decoder: inout HistoryJSONDecoder, name: String) throws(HistoryDecodingError) in
            switch name {
            case "id": try decoder.readOnce(string: &id, path: { "ids[\(index)].id" })
            case "validFrom": try decoder.readOnce(integer: &validFrom, path: { "ids[\(index)].validFrom" })
            case "validUntil": try decoder.readOnce(integer: &validUntil, path: { "ids[\(index)].validUntil" })
            default: try decoder.skipValue(depth: 4)
            }
        }
        guard let id else { throw .missingField(path: "ids[\(index)].id") }
        guard let validFrom else { throw .missingField(path: "ids[\(index)].validFrom") }
        guard let validUntil else { throw .missingField(path: "ids[\(index)].validUntil") }
        return SubmittedEntry(id: id, validFrom: validFrom, validUntil: validUntil)
    }

    // MARK: What an id and a key history share

    /// The top-level member `field` as an array of objects (`ids`, `keys`), each read by
    /// `readElement`, positioned on its `{` and given its index; any other value, or an element
    /// that is not an object, is the wrong type.
    ///
    /// With `minimumElementSize`, the array is reserved for as many elements as the body could
    /// hold, which avoids regrowing it without trusting the body's size further than a constant
    /// factor.
    mutating func readArrayOfObjects<Element>(
        named field: String, minimumElementSize: Int? = nil,
        _ readElement: (inout HistoryJSONDecoder, Int) throws(HistoryDecodingError) -> Element
    ) throws(HistoryDecodingError) -> [Element] {
        guard peek() == ASCII.openBracket else {
            try skipValue(depth: 2)
            throw .wrongType(path: field)
        }
        var elements: [Element] = []
        if let minimumElementSize { elements.reserveCapacity(min(bytes.count / minimumElementSize, 100_000)) }
        try readArray(depth: 2) { (decoder: inout HistoryJSONDecoder) throws(HistoryDecodingError) in
            let index = elements.count
            guard decoder.peek() == ASCII.openBrace else {
                try decoder.skipValue(depth: 3)
                throw .wrongType(path: "\(field)[\(index)]")
            }
            elements.append(try readElement(&decoder, index))
        }
        return elements
    }

    /// An element's string member into `slot`, which must still be empty: a repeated member is
    /// refused, since which one would count would be ambiguous.
    mutating func readOnce(string slot: inout String?, path: () -> String) throws(HistoryDecodingError) {
        guard slot == nil else { throw .duplicateField(path: path()) }
        guard peek() == ASCII.quote else {
            try skipValue(depth: 4)
            throw .wrongType(path: path())
        }
        slot = try readString()
    }

    /// An element's integer member into `slot`, which must still be empty (see
    /// ``readOnce(string:path:)``).
    mutating func readOnce(integer slot: inout Int64?, path: () -> String) throws(HistoryDecodingError) {
        guard slot == nil else { throw .duplicateField(path: path()) }
        slot = try readInteger(path: path)
    }

    /// Reads an array's elements, calling `element` for each, which must consume it.
    /// Positioned on the `[`.
    mutating func readArray(
        depth: Int, _ element: (inout HistoryJSONDecoder) throws(HistoryDecodingError) -> Void
    ) throws(HistoryDecodingError) {
        guard depth <= Self.maximumDepth else { throw .nestedTooDeeply(offset: position) }
        position += 1
        skipWhitespace()
        if peek() == ASCII.closeBracket {
            position += 1
            return
        }
        while true {
            skipWhitespace()
            try element(&self)
            skipWhitespace()
            switch next() {
            case ASCII.comma: continue
            case ASCII.closeBracket: return
            default: throw .notJSON(offset: position - 1)
            }
        }
    }

    /// Reads an object's members, handing each member's name to `member`, which must consume
    /// the value. Positioned on the `{`.
    mutating func readObject(
        depth: Int, _ member: (inout HistoryJSONDecoder, String) throws(HistoryDecodingError) -> Void
    ) throws(HistoryDecodingError) {
        guard depth <= Self.maximumDepth else { throw .nestedTooDeeply(offset: position) }
        position += 1
        skipWhitespace()
        if peek() == ASCII.closeBrace {
            position += 1
            return
        }
        while true {
            skipWhitespace()
            guard peek() == ASCII.quote else { throw .notJSON(offset: position) }
            let name = try readString()
            skipWhitespace()
            guard next() == ASCII.colon else { throw .notJSON(offset: position - 1) }
            skipWhitespace()
            try member(&self, name)
            skipWhitespace()
            switch next() {
            case ASCII.comma: continue
            case ASCII.closeBrace: return
            default: throw .notJSON(offset: position - 1)
            }
        }
    }

    // MARK: Values

    /// Reads a number that must denote an integer in Int64's range; any other value is the
    /// wrong type (after checking that it is JSON at all).
    mutating func readInteger(path: () -> String) throws(HistoryDecodingError) -> Int64 {
        guard let first = peek(), first == ASCII.minus || ASCII.isDigit(first) else {
            try skipValue(depth: 4)
            throw .wrongType(path: path())
        }
        let number = try scanNumber()
        if !number.hasFraction && !number.hasExponent {
            // The common case: plain digits, accumulated as a negative number so that
            // Int64.min fits too.
            var value: Int64 = 0
            for digit in bytes[number.integerDigits] {
                let (shifted, overflowShift) = value.multipliedReportingOverflow(by: 10)
                let (sum, overflowAdd) = shifted.subtractingReportingOverflow(Int64(digit &- ASCII.zero))
                guard !overflowShift, !overflowAdd else { throw .notAnInteger(path: path()) }
                value = sum
            }
            if number.isNegative { return value }
            guard value != .min else { throw .notAnInteger(path: path()) }
            return -value
        }
        guard let value = exactInteger(number) else { throw .notAnInteger(path: path()) }
        return value
    }

    /// The integer a number with a fraction or an exponent denotes (`1.7e9`, `100.0`), or nil
    /// when it has a non-zero fractional part or does not fit in Int64.
    private func exactInteger(_ number: ScannedNumber) -> Int64? {
        let digits = Array(bytes[number.integerDigits]) + Array(bytes[number.fractionDigits])
        // Slices, not removeFirst(): a body of a million leading zeros must stay linear.
        let leading = digits.prefix { $0 == ASCII.zero }.count
        let trailing = digits.dropFirst(leading).reversed().prefix { $0 == ASCII.zero }.count
        let significand = digits[leading..<(digits.count - trailing)]
        let scale = number.exponent - number.fractionDigits.count + trailing
        if significand.isEmpty { return 0 }
        // A negative scale leaves digits after the decimal point; 19 digits is Int64's width.
        guard scale >= 0, significand.count + scale <= 19 else { return nil }
        var magnitude: UInt64 = 0
        for digit in significand + Array(repeating: ASCII.zero, count: scale) {
            let (shifted, overflowShift) = magnitude.multipliedReportingOverflow(by: 10)
            let (sum, overflowAdd) = shifted.addingReportingOverflow(UInt64(digit &- ASCII.zero))
            guard !overflowShift, !overflowAdd else { return nil }
            magnitude = sum
        }
        if number.isNegative {
            guard magnitude <= UInt64(Int64.max) + 1 else { return nil }
            return magnitude == UInt64(Int64.max) + 1 ? .min : -Int64(magnitude)
        }
        guard magnitude <= UInt64(Int64.max) else { return nil }
        return Int64(magnitude)
    }

    private struct ScannedNumber {
        var isNegative = false
        var integerDigits: Range<Int> = 0..<0
        var fractionDigits: Range<Int> = 0..<0
        var hasFraction = false
        var hasExponent = false
        /// Clamped to ±100,000: enough to tell that a number is out of range, and no overflow.
        var exponent = 0
    }

    /// Scans `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`.
    private mutating func scanNumber() throws(HistoryDecodingError) -> ScannedNumber {
        var number = ScannedNumber()
        if peek() == ASCII.minus {
            number.isNegative = true
            position += 1
        }
        number.integerDigits = try scanDigits()
        // A leading zero may not be followed by more digits.
        guard number.integerDigits.count == 1 || bytes[number.integerDigits.lowerBound] != ASCII.zero else {
            throw .notJSON(offset: number.integerDigits.lowerBound)
        }
        if peek() == ASCII.period {
            position += 1
            number.hasFraction = true
            number.fractionDigits = try scanDigits()
        }
        if let marker = peek(), marker == ASCII.lowercaseE || marker == ASCII.uppercaseE {
            position += 1
            number.hasExponent = true
            var exponentIsNegative = false
            if let sign = peek(), sign == ASCII.plus || sign == ASCII.minus {
                exponentIsNegative = sign == ASCII.minus
                position += 1
            }
            var exponent = 0
            for digit in bytes[try scanDigits()] {
                exponent = min(exponent * 10 + Int(digit &- ASCII.zero), 100_000)
            }
            number.exponent = exponentIsNegative ? -exponent : exponent
        }
        return number
    }

    private mutating func scanDigits() throws(HistoryDecodingError) -> Range<Int> {
        let start = position
        while position < bytes.count, ASCII.isDigit(bytes[position]) { position += 1 }
        guard position > start else { throw .notJSON(offset: position) }
        return start..<position
    }

    /// Reads a string, positioned on its opening quote.
    mutating func readString() throws(HistoryDecodingError) -> String {
        position += 1
        let start = position
        // The fast path: printable ASCII without escapes, as every id is.
        while position < bytes.count {
            let byte = bytes[position]
            if byte == ASCII.quote {
                position += 1
                return String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<(position - 1)]), as: UTF8.self)
            }
            guard byte >= 0x20, byte < 0x80, byte != ASCII.backslash else { break }
            position += 1
        }
        var unescaped = Array(bytes[start..<position])
        while true {
            guard let byte = next() else { throw .notJSON(offset: position) }
            switch byte {
            case ASCII.quote:
                guard let text = String(validating: unescaped, as: UTF8.self) else { throw .notJSON(offset: start) }
                return text
            case ASCII.backslash:
                try readEscape(into: &unescaped)
            case ..<0x20:
                throw .notJSON(offset: position - 1)
            default:
                unescaped.append(byte)
            }
        }
    }

    /// Appends the UTF-8 of one escape sequence (after its backslash).
    private mutating func readEscape(into unescaped: inout [UInt8]) throws(HistoryDecodingError) {
        let escapeOffset = position - 1
        switch next() {
        case ASCII.quote: unescaped.append(ASCII.quote)
        case ASCII.backslash: unescaped.append(ASCII.backslash)
        case ASCII.slash: unescaped.append(ASCII.slash)
        case UInt8(ascii: "b"): unescaped.append(0x08)
        case UInt8(ascii: "f"): unescaped.append(0x0C)
        case UInt8(ascii: "n"): unescaped.append(0x0A)
        case UInt8(ascii: "r"): unescaped.append(0x0D)
        case UInt8(ascii: "t"): unescaped.append(0x09)
        case UInt8(ascii: "u"):
            var scalar = UInt32(try readHexQuad())
            if (0xD800..<0xDC00).contains(scalar) {
                // A high surrogate must be followed by an escaped low one.
                guard next() == ASCII.backslash, next() == UInt8(ascii: "u") else { throw .notJSON(offset: escapeOffset) }
                let low = UInt32(try readHexQuad())
                guard (0xDC00..<0xE000).contains(low) else { throw .notJSON(offset: escapeOffset) }
                scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
            }
            guard let unicode = Unicode.Scalar(scalar) else { throw .notJSON(offset: escapeOffset) }
            unescaped.append(contentsOf: unicode.utf8)
        default:
            throw .notJSON(offset: escapeOffset)
        }
    }

    private mutating func readHexQuad() throws(HistoryDecodingError) -> UInt16 {
        var value: UInt16 = 0
        for _ in 0..<4 {
            guard let byte = next(), let nibble = Hex.digitValue(byte) else { throw .notJSON(offset: position - 1) }
            value = value << 4 | UInt16(nibble)
        }
        return value
    }

    /// Checks and steps over any JSON value: members the history does not use, and values of
    /// the wrong type (so that a syntax error after them is still reported as one).
    mutating func skipValue(depth: Int) throws(HistoryDecodingError) {
        guard let byte = peek() else { throw .notJSON(offset: position) }
        switch byte {
        case ASCII.openBrace:
            try readObject(depth: depth) { (decoder: inout HistoryJSONDecoder, _: String) throws(HistoryDecodingError) in
                try decoder.skipValue(depth: depth + 1)
            }
        case ASCII.openBracket:
            try readArray(depth: depth) { (decoder: inout HistoryJSONDecoder) throws(HistoryDecodingError) in
                try decoder.skipValue(depth: depth + 1)
            }
        case ASCII.quote:
            _ = try readString()
        case ASCII.minus, ASCII.zero...ASCII.nine:
            _ = try scanNumber()
        case UInt8(ascii: "t"):
            try expectLiteral("true")
        case UInt8(ascii: "f"):
            try expectLiteral("false")
        case UInt8(ascii: "n"):
            try expectLiteral("null")
        default:
            throw .notJSON(offset: position)
        }
    }

    private mutating func expectLiteral(_ literal: StaticString) throws(HistoryDecodingError) {
        for index in 0..<literal.utf8CodeUnitCount {
            guard next() == literal.utf8Start[index] else { throw .notJSON(offset: position - 1) }
        }
    }

    // MARK: Bytes

    func peek() -> UInt8? {
        position < bytes.count ? bytes[position] : nil
    }

    mutating func next() -> UInt8? {
        guard position < bytes.count else { return nil }
        defer { position += 1 }
        return bytes[position]
    }

    mutating func skipWhitespace() {
        while position < bytes.count {
            switch bytes[position] {
            case ASCII.space, ASCII.tab, ASCII.lineFeed, ASCII.carriageReturn: position += 1
            default: return
            }
        }
    }

    mutating func expectEnd() throws(HistoryDecodingError) {
        skipWhitespace()
        guard position == bytes.count else { throw .notJSON(offset: position) }
    }
}

package enum ASCII {
    static let openBrace = UInt8(ascii: "{")
    static let closeBrace = UInt8(ascii: "}")
    static let openBracket = UInt8(ascii: "[")
    static let closeBracket = UInt8(ascii: "]")
    package static let quote = UInt8(ascii: "\"")
    package static let backslash = UInt8(ascii: "\\")
    package static let slash = UInt8(ascii: "/")
    static let colon = UInt8(ascii: ":")
    static let comma = UInt8(ascii: ",")
    package static let semicolon = UInt8(ascii: ";")
    package static let equals = UInt8(ascii: "=")
    static let minus = UInt8(ascii: "-")
    static let plus = UInt8(ascii: "+")
    static let period = UInt8(ascii: ".")
    package static let zero = UInt8(ascii: "0")
    package static let nine = UInt8(ascii: "9")
    static let lowercaseE = UInt8(ascii: "e")
    static let uppercaseE = UInt8(ascii: "E")
    package static let space = UInt8(ascii: " ")
    package static let tab = UInt8(ascii: "\t")
    static let lineFeed = UInt8(ascii: "\n")
    static let carriageReturn = UInt8(ascii: "\r")

    static func isDigit(_ byte: UInt8) -> Bool { byte >= zero && byte <= nine }
}
