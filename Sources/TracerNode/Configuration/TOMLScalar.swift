/// Unquoted TOML values: booleans, decimal integers and floats.
enum TOMLScalar {
    static func parse(_ token: String, line: Int) throws(TOMLSyntaxError) -> TOMLValue {
        func failure(_ problem: String) -> TOMLSyntaxError { TOMLSyntaxError(line: line, problem: problem) }
        let shown = token.count > 24 ? String(token.prefix(24)) + "…" : token

        if token == "true" { return .boolean(true) }
        if token == "false" { return .boolean(false) }
        let unsigned = token.first == "+" || token.first == "-" ? token.dropFirst() : Substring(token)
        if unsigned == "inf" || unsigned == "nan" { throw failure("inf and nan are not supported") }
        if unsigned.hasPrefix("0x") || unsigned.hasPrefix("0o") || unsigned.hasPrefix("0b") {
            throw failure("hexadecimal, octal and binary numbers are not supported; write \(shown) in decimal")
        }
        if looksLikeDateOrTime(unsigned) { throw failure("dates and times are not supported") }

        guard let number = DecimalNumber(unsigned) else {
            throw failure("\(shown) is not a value; strings need quotes, as in key = \"text\"")
        }
        if number.integerDigits.count > 1, number.integerDigits.first == "0" {
            throw failure("\(shown) has a leading zero, which TOML does not allow")
        }
        let sign = token.first == "-" ? "-" : ""
        if number.isInteger {
            guard let value = Int64(sign + number.integerDigits) else {
                throw failure("\(shown) is too large for an integer")
            }
            return .integer(value)
        }
        guard let value = Double(sign + number.plainText), value.isFinite else {
            throw failure("\(shown) is too large for a float")
        }
        return .float(value)
    }

    private static func looksLikeDateOrTime(_ text: Substring) -> Bool {
        let bytes = Array(text.utf8)
        let isDigit = { (byte: UInt8) in (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) }
        // 1979-05-27 (a date) or 07:32:00 (a time).
        if bytes.count >= 5, bytes[0..<4].allSatisfy(isDigit), bytes[4] == UInt8(ascii: "-") { return true }
        if bytes.count >= 3, bytes[0..<2].allSatisfy(isDigit), bytes[2] == UInt8(ascii: ":") { return true }
        return false
    }
}

/// The digits of an unsigned decimal number as TOML writes them: underscores only between
/// digits, an optional fraction and an optional exponent.
private struct DecimalNumber {
    var integerDigits = ""
    var fractionDigits: String?
    var exponent: String?

    var isInteger: Bool { fractionDigits == nil && exponent == nil }

    /// The number without underscores, in a form `Double.init` reads.
    var plainText: String {
        integerDigits + (fractionDigits.map { "." + $0 } ?? "") + (exponent.map { "e" + $0 } ?? "")
    }

    init?(_ text: Substring) {
        var rest = text[...]
        guard let integer = Self.digits(&rest) else { return nil }
        integerDigits = integer
        if rest.first == "." {
            rest = rest.dropFirst()
            guard let fraction = Self.digits(&rest) else { return nil }
            fractionDigits = fraction
        }
        if rest.first == "e" || rest.first == "E" {
            rest = rest.dropFirst()
            var sign = ""
            if let first = rest.first, first == "+" || first == "-" {
                sign = String(first)
                rest = rest.dropFirst()
            }
            guard let digits = Self.digits(&rest) else { return nil }
            exponent = sign + digits
        }
        guard rest.isEmpty else { return nil }
    }

    /// Takes one or more digits, with single underscores between them, from the front of `text`.
    private static func digits(_ text: inout Substring) -> String? {
        var digits = ""
        var lastWasDigit = false
        while let character = text.first {
            if character.isASCII, character.isNumber {
                digits.append(character)
                lastWasDigit = true
            } else if character == "_", lastWasDigit, text.dropFirst().first?.isASCII == true,
                text.dropFirst().first?.isNumber == true
            {
                lastWasDigit = false
            } else {
                break
            }
            text = text.dropFirst()
        }
        return digits.isEmpty ? nil : digits
    }
}
