import CCurl
import Foundation

/// One attempt of a request: a libcurl easy handle performed on a thread of its own.
struct CurlTransfer: Sendable {
    let request: HTTPRequest
    let configuration: HTTPClientConfiguration
    let destination: ResponseBodyDestination
    let progress: (@Sendable (DownloadProgress) -> Void)?

    /// curl_easy_perform blocks for the whole transfer, so it runs on a new thread rather than
    /// holding one of the few threads of Swift's cooperative pool. Cancelling the task aborts it
    /// at libcurl's next progress callback (at least once a second, even when stalled).
    func runOnOwnThread() async -> Result<HTTPResponse, HTTPAttemptFailure> {
        let cancellation = CancellationFlag()
        return await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let thread = Thread { continuation.resume(returning: run(cancellation: cancellation)) }
                thread.name = "tracer-curl"
                thread.start()
            }
        } onCancel: {
            cancellation.cancel()
        }
    }

    /// Blocks until the attempt ends.
    func run(cancellation: CancellationFlag) -> Result<HTTPResponse, HTTPAttemptFailure> {
        if let reason = LibCurl.loadFailure {
            return .failure(HTTPAttemptFailure(
                failure: .libcurlUnavailable(reason: reason),
                reason: "could not load libcurl (\(reason)); install it (Debian and Ubuntu: apt install libcurl4), or set TRACER_LIBCURL to the path of libcurl.so.4"))
        }
        guard let handle = tracer_curl_easy_init() else {
            let reason = "libcurl could not create a transfer handle"
            return .failure(HTTPAttemptFailure(failure: .transfer(reason: reason, isRetryable: false), reason: reason))
        }
        // libcurl may write to the error buffer until cleanup, so it is freed after the handle.
        let errorBuffer = UnsafeMutablePointer<CChar>.allocate(capacity: Int(CURL_ERROR_SIZE))
        errorBuffer.initialize(to: 0)
        defer {
            tracer_curl_easy_cleanup(handle)
            errorBuffer.deallocate()
        }

        let context = CurlTransferContext(handle: handle, destination: destination, cancellation: cancellation, progress: progress)
        let headerList = CurlHeaderList(request.headers, isSigned: request.signature != nil)
        var options = CurlOptionSetter(handle: handle)
        options.set(CURLOPT_ERRORBUFFER, pointer: errorBuffer)
        configure(&options, headerList: headerList)
        let userdata = Unmanaged.passUnretained(context).toOpaque()
        installCallbacks(on: &options, userdata: userdata)

        let code: CURLcode
        if let failure = options.firstFailure {
            code = failure
        } else {
            code = withExtendedLifetime((context, headerList)) { tracer_curl_easy_perform(handle) }
        }
        let message = errorBuffer.pointee != 0 ? String(cString: errorBuffer) : String(cString: tracer_curl_easy_strerror(code))
        let reason = options.firstFailure.map { "libcurl refused an option: " + String(cString: tracer_curl_easy_strerror($0)) } ?? message
        return outcome(code: code, message: message, context: context).mapError { HTTPAttemptFailure(failure: $0, reason: reason) }
    }

    private func configure(_ options: inout CurlOptionSetter, headerList: CurlHeaderList) {
        let overallTimeout = configuration.overallTimeout(expectedByteCount: request.expectedByteCount)
        options.set(CURLOPT_URL, request.url)
        // Signals are process-wide; without this, libcurl's timeouts use SIGALRM across threads.
        options.set(CURLOPT_NOSIGNAL, 1)
        options.set(CURLOPT_PROTOCOLS_STR, "http,https")
        // Redirects only for downloads, whose content is signed: a POST carries an upload code,
        // which libcurl would pass on to whatever host a redirect names. And never from https
        // down to http, which would also escape the pinned key. Never for a signed request.
        if request.method == .get && request.signature == nil {
            let isHTTPS = request.url.lowercased().hasPrefix("https:")
            options.set(CURLOPT_REDIR_PROTOCOLS_STR, isHTTPS ? "https" : "http,https")
            options.set(CURLOPT_FOLLOWLOCATION, 1)
            options.set(CURLOPT_MAXREDIRS, configuration.maxRedirects)
        } else {
            options.set(CURLOPT_FOLLOWLOCATION, 0)
        }
        options.set(CURLOPT_CONNECTTIMEOUT_MS, max(1, Int(configuration.connectTimeout.wholeMilliseconds)))
        options.set(CURLOPT_TIMEOUT_MS, max(1, Int(overallTimeout.wholeMilliseconds)))
        options.set(CURLOPT_LOW_SPEED_LIMIT, configuration.minimumTransferRate)
        options.set(CURLOPT_LOW_SPEED_TIME, Int((configuration.lowSpeedTime.wholeMilliseconds + 999) / 1000))
        options.set(CURLOPT_USERAGENT, configuration.userAgent)
        options.set(CURLOPT_HTTPHEADER, list: headerList.list)
        if let pinnedPublicKey = configuration.pinnedPublicKey { options.set(CURLOPT_PINNEDPUBLICKEY, pinnedPublicKey) }
        if let caBundlePath = configuration.caBundlePath { options.set(CURLOPT_CAINFO, caBundlePath) }
        if case .memory(let limit) = destination {
            // Refuses an announced Content-Length over the limit before any body arrives.
            options.set(CURLOPT_MAXFILESIZE_LARGE, offset: curl_off_t(limit))
        } else if let expected = request.expectedByteCount {
            // A download whose size the signed index gives must not fill the disk beyond it.
            options.set(CURLOPT_MAXFILESIZE_LARGE, offset: curl_off_t(expected))
        }
        switch request.method {
        case .get: options.set(CURLOPT_HTTPGET, 1)
        case .post: options.setPostBody(request.body)
        case .head: options.set(CURLOPT_NOBODY, 1)
        case .put:
            // The body sent as PUT: libcurl copies it, and hashes nothing itself when a signed
            // request gives x-amz-content-sha256.
            options.setPostBody(request.body)
            options.set(CURLOPT_CUSTOMREQUEST, "PUT")
        case .delete: options.set(CURLOPT_CUSTOMREQUEST, "DELETE")
        }
        if let signature = request.signature {
            // libcurl (7.75+) signs with AWS Signature Version 4 itself, every header of the list included.
            options.set(CURLOPT_AWS_SIGV4, signature.provider)
            options.set(CURLOPT_USERPWD, signature.keyPair)
        }
        // Proxies are deliberately not configured: libcurl reads http_proxy, https_proxy and
        // no_proxy from the environment itself.
    }

    private func installCallbacks(on options: inout CurlOptionSetter, userdata: UnsafeMutableRawPointer) {
        options.record(tracer_curl_setopt_write_function(options.handle) { buffer, size, count, userdata in
            let context = Unmanaged<CurlTransferContext>.fromOpaque(userdata!).takeUnretainedValue()
            let byteCount = size * count
            let chunk = UnsafeBufferPointer(start: UnsafeRawPointer(buffer)?.assumingMemoryBound(to: UInt8.self), count: byteCount)
            return context.receive(chunk) ? byteCount : 0
        })
        options.set(CURLOPT_WRITEDATA, pointer: userdata)
        options.record(tracer_curl_setopt_header_function(options.handle) { buffer, size, count, userdata in
            let context = Unmanaged<CurlTransferContext>.fromOpaque(userdata!).takeUnretainedValue()
            let byteCount = size * count
            context.headers.consume(line: UnsafeBufferPointer(start: UnsafeRawPointer(buffer)?.assumingMemoryBound(to: UInt8.self), count: byteCount))
            return byteCount
        })
        options.set(CURLOPT_HEADERDATA, pointer: userdata)
        options.set(CURLOPT_NOPROGRESS, 0)
        options.record(tracer_curl_setopt_xferinfo_function(options.handle) { userdata, downloadTotal, _, _, _ in
            let context = Unmanaged<CurlTransferContext>.fromOpaque(userdata!).takeUnretainedValue()
            return context.progressed(downloadTotal: Int64(downloadTotal)) ? 0 : 1
        })
        options.set(CURLOPT_XFERINFODATA, pointer: userdata)
    }

    private func outcome(code: CURLcode, message: String, context: CurlTransferContext) -> Result<HTTPResponse, TransferFailure> {
        let completed = code == CURLE_OK || (code == CURLE_WRITE_ERROR && context.stopReason == .errorBodyComplete)
        guard completed, !context.cancellation.isCancelled else {
            if case .file(let path, _, _) = destination {
                context.abandonFile()
                removeDownloadFile(atPath: path)
            }
            return .failure(failure(code: code, message: message, context: context))
        }
        let response = HTTPResponse(status: context.responseStatus(), headers: context.headers.fields, body: context.body)
        if case .file(let path, _, _) = destination {
            guard response.isSuccess else {
                removeDownloadFile(atPath: path)
                return .success(response)
            }
            do throws(BodyStopReason) {
                try context.finishFile(at: path)
            } catch {
                removeDownloadFile(atPath: path)
                if case .cannotWrite(let reason) = error { return .failure(.cannotWriteFile(path: path, reason: reason)) }
            }
            context.reportCompletion()
        }
        return .success(response)
    }

    private func failure(code: CURLcode, message: String, context: CurlTransferContext) -> TransferFailure {
        if context.cancellation.isCancelled { return .cancelled }
        switch context.stopReason {
        case .tooLarge(let limit): return .tooLarge(limit: limit)
        case .cannotWrite(let reason):
            if case .file(let path, _, _) = destination { return .cannotWriteFile(path: path, reason: reason) }
        case .cancelled: return .cancelled
        case .errorBodyComplete, nil: break
        }
        if code == CURLE_FILESIZE_EXCEEDED, case .memory(let limit) = destination { return .tooLarge(limit: limit) }
        if code == CURLE_FILESIZE_EXCEEDED, case .file(_, let limit?, _) = destination { return .tooLarge(limit: limit) }
        var redirects = 0
        _ = tracer_curl_getinfo_long(context.handle, CURLINFO_REDIRECT_COUNT, &redirects)
        if code == CURLE_COULDNT_CONNECT {
            // The system's reason ("connection refused") says more than libcurl's "Couldn't connect to server".
            var systemError = 0
            if tracer_curl_getinfo_long(context.handle, CURLINFO_OS_ERRNO, &systemError) == CURLE_OK, systemError != 0 {
                return .cannotConnect(reason: String(cString: strerror(Int32(truncatingIfNeeded: systemError))).lowercased())
            }
        }
        if code == CURLE_OPERATION_TIMEDOUT {
            // libcurl gives one code for the connect limit, the low-speed limit and the overall
            // limit; the time the attempt took tells the last apart (it fires at the limit).
            let overall = configuration.overallTimeout(expectedByteCount: request.expectedByteCount)
            var microseconds: curl_off_t = 0
            if tracer_curl_getinfo_off_t(context.handle, CURLINFO_TOTAL_TIME_T, &microseconds) == CURLE_OK,
                .microseconds(Int64(microseconds)) + .milliseconds(100) >= overall {
                return .ranOutOfTime(reason: message)
            }
        }
        return TransferFailure(code: code, message: message, wasRedirected: redirects > 0)
    }
}

/// Why one attempt failed: classified for the retrying client (`failure`), and in libcurl's own
/// words for a client that reports them as they are (`reason`, the object store's).
public struct HTTPAttemptFailure: Error, Sendable {
    let failure: TransferFailure
    public let reason: String

    /// Network trouble that another attempt may not meet (a refused or cut connection, the
    /// connect limit, a stall past the low-speed limit); not a bad URL, certificate or pin, and not
    /// an attempt that ran out its whole overall timeout: that request trickled for all of it, and
    /// a repeat would likely hold its caller as long again.
    public var mayPass: Bool {
        if case .ranOutOfTime = failure { return false }
        return failure.isRetryable
    }
}
