import CCurl
import Crypto
import Foundation
import TracerCore

/// One signed request to the object store, performed by libcurl.
///
/// libcurl (7.75+) signs with AWS Signature Version 4 itself (CURLOPT_AWS_SIGV4, the key pair as
/// CURLOPT_USERPWD), so the object store needs no SDK and no new Swift package: the project already
/// links libcurl for the node's downloads. The payload hash is always ours (x-amz-content-sha256,
/// a real SHA-256 of the body, also for PUT), which real S3 checks against the body; libcurl then
/// signs that header's value instead of computing or skipping one.
struct S3Request: Sendable {
    enum Method: String, Sendable {
        case get = "GET", head = "HEAD", put = "PUT", delete = "DELETE"
    }

    var method: Method
    var url: String
    var headers: [(name: String, value: String)] = []
    var body: [UInt8] = []
}

struct S3Response: Sendable {
    var status: Int
    /// Lowercased names.
    var headers: [String: String]
    var body: [UInt8]

    /// The `<Code>` of an S3 XML error body, or "" (HEAD answers have no body).
    var errorCode: String {
        let text = String(decoding: body.prefix(4_096), as: UTF8.self)
        guard let start = text.range(of: "<Code>"), let end = text.range(of: "</Code>", range: start.upperBound..<text.endIndex) else { return "" }
        return String(text[start.upperBound..<end.lowerBound])
    }
}

/// Whether libcurl delivered an answer (of any status), or why not.
enum S3TransferOutcome: Sendable {
    case answered(S3Response)
    case failed(reason: String)
}

struct S3Transfer: Sendable {
    let request: S3Request
    let region: String
    let credentials: ObjectStoreCredentials
    let timeout: Duration

    static let emptyPayloadHash = SHA256.hash(data: [UInt8]()).hex

    /// curl_easy_perform blocks, so it runs on a thread of its own rather than one of Swift's
    /// cooperative pool (as the node's CurlTransfer does).
    func perform() async -> S3TransferOutcome {
        await withCheckedContinuation { continuation in
            let thread = Thread { continuation.resume(returning: run()) }
            thread.name = "tracer-s3"
            thread.start()
        }
    }

    private func run() -> S3TransferOutcome {
        guard tracer_curl_global_init() == CURLE_OK else {
            let reason = String(cString: tracer_curl_load_error())
            return .failed(reason: "could not load libcurl (\(reason)); install it (Debian and Ubuntu: apt install libcurl4), or set TRACER_LIBCURL to the path of libcurl.so.4")
        }
        guard let handle = tracer_curl_easy_init() else { return .failed(reason: "libcurl could not create a transfer handle") }
        let errorBuffer = UnsafeMutablePointer<CChar>.allocate(capacity: Int(CURL_ERROR_SIZE))
        errorBuffer.initialize(to: 0)
        let sink = S3ResponseSink()
        var headerList: UnsafeMutablePointer<curl_slist>?
        defer {
            tracer_curl_easy_cleanup(handle)
            tracer_curl_slist_free_all(headerList)
            errorBuffer.deallocate()
        }
        let payloadHash = request.body.isEmpty ? Self.emptyPayloadHash : SHA256.hash(data: request.body).hex
        // No "Expect:" line to suppress 100-continue: libcurl 7.88 would sign that empty header
        // without sending it, and the service then refuses the signature.
        // libcurl signs every header of this list, so the session token is signed as the service asks.
        let tokenHeader = credentials.sessionToken.map { ["x-amz-security-token: \($0)"] } ?? []
        for line in request.headers.map({ "\($0.name): \($0.value)" }) + ["x-amz-content-sha256: \(payloadHash)"] + tokenHeader {
            headerList = tracer_curl_slist_append(headerList, line) ?? headerList
        }
        var results: [CURLcode] = []
        func set(_ option: CURLoption, _ value: Int) { results.append(tracer_curl_setopt_long(handle, option, value)) }
        func set(_ option: CURLoption, _ value: String) { results.append(tracer_curl_setopt_string(handle, option, value)) }
        set(CURLOPT_URL, request.url)
        set(CURLOPT_NOSIGNAL, 1)
        set(CURLOPT_PROTOCOLS_STR, "http,https")
        // A redirect would carry the signed request elsewhere; S3 answers a wrong region with 301.
        set(CURLOPT_FOLLOWLOCATION, 0)
        set(CURLOPT_CONNECTTIMEOUT_MS, 10_000)
        set(CURLOPT_TIMEOUT_MS, max(1, Int(timeout.components.seconds * 1_000)))
        set(CURLOPT_AWS_SIGV4, "aws:amz:\(region):s3")
        set(CURLOPT_USERPWD, credentials.userPassword)
        set(CURLOPT_USERAGENT, "tracer-server/0.1")
        results.append(tracer_curl_setopt_pointer(handle, CURLOPT_ERRORBUFFER, UnsafeMutableRawPointer(errorBuffer)))
        results.append(tracer_curl_setopt_slist(handle, CURLOPT_HTTPHEADER, headerList))
        switch request.method {
        case .get: set(CURLOPT_HTTPGET, 1)
        case .head: set(CURLOPT_NOBODY, 1)
        case .delete: set(CURLOPT_CUSTOMREQUEST, "DELETE")
        case .put:
            // An in-memory body sent as PUT: libcurl copies it, and hashes nothing itself because
            // x-amz-content-sha256 is given.
            results.append(request.body.withUnsafeBytes { tracer_curl_setopt_post_body(handle, $0.baseAddress, curl_off_t($0.count)) })
            set(CURLOPT_CUSTOMREQUEST, "PUT")
        }
        let userdata = Unmanaged.passUnretained(sink).toOpaque()
        results.append(tracer_curl_setopt_write_function(handle) { buffer, size, count, userdata in
            let sink = Unmanaged<S3ResponseSink>.fromOpaque(userdata!).takeUnretainedValue()
            sink.body.append(contentsOf: UnsafeRawBufferPointer(start: buffer, count: size * count))
            return size * count
        })
        results.append(tracer_curl_setopt_pointer(handle, CURLOPT_WRITEDATA, userdata))
        results.append(tracer_curl_setopt_header_function(handle) { buffer, size, count, userdata in
            let sink = Unmanaged<S3ResponseSink>.fromOpaque(userdata!).takeUnretainedValue()
            sink.headerLine(Array(UnsafeRawBufferPointer(start: buffer, count: size * count)))
            return size * count
        })
        results.append(tracer_curl_setopt_pointer(handle, CURLOPT_HEADERDATA, userdata))
        if let refused = results.first(where: { $0 != CURLE_OK }) {
            return .failed(reason: "libcurl refused an option: " + String(cString: tracer_curl_easy_strerror(refused)))
        }
        let code = withExtendedLifetime(sink) { tracer_curl_easy_perform(handle) }
        guard code == CURLE_OK else {
            let detail = String(cString: errorBuffer)
            return .failed(reason: detail.isEmpty ? String(cString: tracer_curl_easy_strerror(code)) : detail)
        }
        var status = 0
        _ = tracer_curl_getinfo_long(handle, CURLINFO_RESPONSE_CODE, &status)
        return .answered(S3Response(status: status, headers: sink.headers, body: sink.body))
    }
}

/// What libcurl's callbacks collect, on the transfer's thread only (created, filled and read by
/// `S3Transfer.run` on one thread), so it needs no lock and is not Sendable.
private final class S3ResponseSink {
    var body: [UInt8] = []
    var headers: [String: String] = [:]

    func headerLine(_ bytes: [UInt8]) {
        let line = String(decoding: bytes, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        // A new status line (after 100 Continue) starts a new set of headers.
        if line.hasPrefix("HTTP/") { headers = [:]; return }
        guard let colon = line.firstIndex(of: ":") else { return }
        headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
    }
}

extension Digest {
    var hex: String { Hex.encode(self) }
}
