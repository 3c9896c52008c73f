/// The ETag rule of the list cache: the node keeps a server's ETag, to send it back as
/// `If-None-Match`, only if it is an entity tag as RFC 9110 writes it (`"…"` or `W/"…"`) of
/// visible ASCII and at most ``maximumByteCount`` bytes. Anything else is dropped, which costs
/// one full checkpoint download: a hostile answer must not make every later request fail (a line
/// break cannot be sent back, a 90 KB value is refused by servers).
enum EntityTag {
    /// 256 bytes: real ETags are far shorter (nginx's `"mtime-size"` about 20 bytes, an S3 MD5
    /// 34, a quoted SHA-256 66), and 256 keeps the request within the 1 KB header buffer nginx
    /// reads a request into by default.
    static let maximumByteCount = 256

    /// `value` if it is an ETag the node may keep and send back, else nil.
    static func kept(_ value: String?) -> String? {
        guard let value else { return nil }
        let bytes = Array(value.utf8)
        guard bytes.count <= maximumByteCount else { return nil }
        let opaque = bytes.starts(with: Array("W/".utf8)) ? bytes.dropFirst(2) : bytes[...]
        guard opaque.count >= 2, opaque.first == UInt8(ascii: "\""), opaque.last == UInt8(ascii: "\"") else { return nil }
        // etagc without obs-text: "!" and "#" to "~", so no quote, space or control byte inside.
        let isTagCharacter = { (byte: UInt8) in byte == 0x21 || (0x23...0x7E).contains(byte) }
        guard opaque.dropFirst().dropLast().allSatisfy(isTagCharacter) else { return nil }
        return value
    }
}
