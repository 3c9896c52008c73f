/// Zero-padded hexadecimal for descriptions of opcodes, error codes, handles and UUIDs.
package enum HexFormat {
    package static func format<Value: BinaryInteger>(_ value: Value, digits: Int, uppercase: Bool = true) -> String {
        let text = String(value, radix: 16, uppercase: uppercase)
        return text.count >= digits ? text : String(repeating: "0", count: digits - text.count) + text
    }
}
