import CCurl

/// Sets options on an easy handle and remembers the first one libcurl refused (an option this
/// libcurl was built without, such as key pinning, must fail the request, not be skipped).
struct CurlOptionSetter {
    let handle: UnsafeMutableRawPointer
    private(set) var firstFailure: CURLcode?

    init(handle: UnsafeMutableRawPointer) { self.handle = handle }

    mutating func record(_ result: CURLcode) {
        if result != CURLE_OK && firstFailure == nil { firstFailure = result }
    }

    mutating func set(_ option: CURLoption, _ value: Int) {
        record(tracer_curl_setopt_long(handle, option, value))
    }

    mutating func set(_ option: CURLoption, offset value: curl_off_t) {
        record(tracer_curl_setopt_off_t(handle, option, value))
    }

    /// libcurl copies string options, so the C string need only live for the call.
    mutating func set(_ option: CURLoption, _ value: String) {
        record(tracer_curl_setopt_string(handle, option, value))
    }

    mutating func set(_ option: CURLoption, pointer: UnsafeMutableRawPointer) {
        record(tracer_curl_setopt_pointer(handle, option, pointer))
    }

    mutating func set(_ option: CURLoption, pointer: UnsafeMutablePointer<CChar>) {
        record(tracer_curl_setopt_pointer(handle, option, UnsafeMutableRawPointer(pointer)))
    }

    /// The list is not copied: it must outlive the transfer.
    mutating func set(_ option: CURLoption, list: UnsafeMutablePointer<curl_slist>?) {
        record(tracer_curl_setopt_slist(handle, option, list))
    }

    mutating func setPostBody(_ body: [UInt8]) {
        let result = body.withUnsafeBytes { bytes in
            tracer_curl_setopt_post_body(handle, bytes.baseAddress, curl_off_t(bytes.count))
        }
        record(result)
    }
}
