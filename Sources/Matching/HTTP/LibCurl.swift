import CCurl

enum LibCurl {
    /// curl_global_init must run once before the first easy handle and is not thread-safe in
    /// every libcurl build; a static let is initialized exactly once, under a lock.
    static let isInitialized: Bool = tracer_curl_global_init() == CURLE_OK
}
