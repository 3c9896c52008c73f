import CCurl

enum LibCurl {
    /// Nil once libcurl is loaded and initialized; else why not (the library is missing, or is not
    /// libcurl). The shim loads it once per process, under pthread_once, on the first transfer.
    static var loadFailure: String? {
        tracer_curl_global_init() == CURLE_OK ? nil : String(cString: tracer_curl_load_error())
    }
}
