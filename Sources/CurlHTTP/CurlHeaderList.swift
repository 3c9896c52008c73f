import CCurl

/// The request's headers as the curl_slist libcurl reads during the transfer; freed with this
/// object, which the transfer keeps alive until curl_easy_perform returns.
final class CurlHeaderList {
    private(set) var list: UnsafeMutablePointer<curl_slist>?

    init(_ fields: [HTTPHeaderField], isSigned: Bool) {
        // An empty "Expect:" stops libcurl from waiting for "100 Continue" before a large POST body;
        // not in a signed request (HTTPRequest.signature), whose signature it would break.
        for line in fields.map(Self.line(for:)) + (isSigned ? [] : ["Expect:"]) {
            guard let extended = tracer_curl_slist_append(list, line) else { continue }
            list = extended
        }
    }

    deinit { tracer_curl_slist_free_all(list) }

    /// "Name: value"; "Name;" sends an empty value ("Name:" would remove the header instead).
    private static func line(for field: HTTPHeaderField) -> String {
        field.value.isEmpty ? "\(field.name);" : "\(field.name): \(field.value)"
    }
}
