/// Collects the header lines libcurl hands over, one per call, for the last response only:
/// with redirects followed, every response's headers pass through, each starting at a status line.
struct HTTPHeaderParser {
    /// Bounds the memory a hostile server can make us hold; libcurl limits single lines itself.
    static let maxTotalBytes = 256 * 1024

    private(set) var fields: [String: String] = [:]
    private var lastName: String?
    private var storedBytes = 0

    mutating func consume(line bytes: UnsafeBufferPointer<UInt8>) {
        var line = Substring(String(decoding: bytes, as: UTF8.self))
        // "\r\n" is one Character, which isNewline covers along with a lone "\r" or "\n".
        while let last = line.last, last.isNewline { line.removeLast() }

        if line.hasPrefix("HTTP/") {
            fields = [:]
            lastName = nil
            storedBytes = 0
            return
        }
        guard !line.isEmpty, storedBytes + line.utf8.count <= Self.maxTotalBytes else { return }

        // Obsolete line folding (RFC 9112 §5.2): a continuation of the previous value.
        if let first = line.first, first == " " || first == "\t" {
            if let name = lastName, let value = fields[name] {
                let continuation = trimmed(line)
                fields[name] = value.isEmpty ? continuation : value + " " + continuation
                storedBytes += line.utf8.count
            }
            return
        }
        guard let colon = line.firstIndex(of: ":") else { return }
        let name = trimmed(line[..<colon]).lowercased()
        guard !name.isEmpty else { return }
        let value = trimmed(line[line.index(after: colon)...])
        if let existing = fields[name] {
            fields[name] = existing + ", " + value
        } else {
            fields[name] = value
        }
        lastName = name
        storedBytes += line.utf8.count
    }

    /// Without the spaces and tabs around it (optional whitespace, RFC 9110 §5.6.3).
    private func trimmed(_ text: Substring) -> String {
        let isBlank = { (character: Character) in character == " " || character == "\t" }
        guard let first = text.firstIndex(where: { !isBlank($0) }), let last = text.lastIndex(where: { !isBlank($0) }) else {
            return ""
        }
        return String(text[first...last])
    }
}
