/// A URL as it may appear in errors and logs: without user info (passwords), query (tokens) or
/// fragment. Plain string slicing, so any input works.
public func redactedURL(_ url: String) -> String {
    var rest = Substring(url)
    var scheme: Substring = ""
    if let separator = rest.range(of: "://") {
        scheme = rest[..<separator.upperBound]
        rest = rest[separator.upperBound...]
    }
    if let end = rest.firstIndex(where: { $0 == "?" || $0 == "#" }) {
        rest = rest[..<end]
    }
    let authorityEnd = rest.firstIndex(of: "/") ?? rest.endIndex
    if let at = rest[..<authorityEnd].lastIndex(of: "@") {
        rest = rest[rest.index(after: at)...]
    }
    return String(scheme + rest)
}
