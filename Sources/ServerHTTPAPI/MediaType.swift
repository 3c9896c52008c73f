import PositiveListServer
/// A `Content-Type` value as RFC 9110 (8.3.1, 5.6) defines it:
/// `type "/" subtype *( OWS ";" OWS [ name "=" ( token / quoted-string ) ] )`.
///
/// Parsed rather than matched by prefix, since a prefix lets `application/jsonx` or
/// `application/json-seq` pass for JSON. Type, subtype and parameter names are
/// case-insensitive and kept in lower case; parameter values are kept as sent (unquoted).
struct MediaType: Equatable, Sendable {
    let type: String
    let subtype: String
    let parameters: [String: String]

    /// `application/json`, with no charset or `charset=utf-8` (RFC 8259: JSON between systems is
    /// UTF-8; the parameter has no meaning but some clients send it).
    var isJSON: Bool {
        type == "application" && subtype == "json" && (parameters["charset"].map { $0.lowercased() == "utf-8" } ?? true)
    }

    /// Nil when `field` is not a media type: a missing part, a character outside the grammar,
    /// a parameter named twice (which one would count is ambiguous), or several values joined
    /// by commas (several Content-Type lines).
    init?(_ field: String) {
        var scanner = Scanner(Array(field.utf8))
        scanner.skipWhitespace()
        guard let type = scanner.token(), scanner.skip(ASCII.slash), let subtype = scanner.token() else { return nil }
        var parameters: [String: String] = [:]
        while true {
            scanner.skipWhitespace()
            if scanner.atEnd { break }
            guard scanner.skip(ASCII.semicolon) else { return nil }
            scanner.skipWhitespace()
            // An empty parameter (`application/json;`) is allowed by the grammar.
            if scanner.atEnd || scanner.peek == ASCII.semicolon { continue }
            guard let name = scanner.token(), scanner.skip(ASCII.equals),
                  let value = scanner.peek == ASCII.quote ? scanner.quotedString() : scanner.token(),
                  parameters.updateValue(value, forKey: name.lowercased()) == nil
            else { return nil }
        }
        self.type = type.lowercased()
        self.subtype = subtype.lowercased()
        self.parameters = parameters
    }

    private struct Scanner {
        let bytes: [UInt8]
        var position = 0

        init(_ bytes: [UInt8]) { self.bytes = bytes }

        var atEnd: Bool { position == bytes.count }
        var peek: UInt8? { atEnd ? nil : bytes[position] }

        mutating func skip(_ byte: UInt8) -> Bool {
            guard peek == byte else { return false }
            position += 1
            return true
        }

        mutating func skipWhitespace() {
            while let byte = peek, byte == ASCII.space || byte == ASCII.tab { position += 1 }
        }

        /// `1*tchar`: letters, digits and ``!#$%&'*+-.^_`|~``.
        mutating func token() -> String? {
            let start = position
            while let byte = peek, Self.isTokenCharacter(byte) { position += 1 }
            return position > start ? String(decoding: bytes[start..<position], as: UTF8.self) : nil
        }

        /// `DQUOTE *( qdtext / quoted-pair ) DQUOTE`, returned without quotes and escapes.
        mutating func quotedString() -> String? {
            guard skip(ASCII.quote) else { return nil }
            var value: [UInt8] = []
            while let byte = peek {
                position += 1
                switch byte {
                case ASCII.quote:
                    return String(decoding: value, as: UTF8.self)
                case ASCII.backslash:
                    guard let escaped = peek, Self.isQuotable(escaped) else { return nil }
                    position += 1
                    value.append(escaped)
                default:
                    guard Self.isQuotable(byte) else { return nil }
                    value.append(byte)
                }
            }
            return nil
        }

        private static func isTokenCharacter(_ byte: UInt8) -> Bool {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), ASCII.zero...ASCII.nine: return true
            default: return Array("!#$%&'*+-.^_`|~".utf8).contains(byte)
            }
        }

        /// Tab, space, visible ASCII and obs-text (bytes 0x80 and up).
        private static func isQuotable(_ byte: UInt8) -> Bool {
            byte == ASCII.tab || byte == ASCII.space || (0x21...0x7e).contains(byte) || byte >= 0x80
        }
    }
}
