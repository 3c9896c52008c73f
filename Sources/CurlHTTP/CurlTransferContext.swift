import CCurl

/// What libcurl's callbacks share during one attempt, reached through their userdata pointer.
/// Confined to the transfer's thread (curl_easy_perform calls back on the thread that called it),
/// except `cancellation`, which is Sendable.
final class CurlTransferContext {
    let handle: UnsafeMutableRawPointer
    let destination: ResponseBodyDestination
    let cancellation: CancellationFlag
    let progress: (@Sendable (DownloadProgress) -> Void)?

    var headers = HTTPHeaderParser()
    /// The in-memory body, or the kept part of a non-2xx body when downloading.
    private(set) var body: [UInt8] = []
    private(set) var stopReason: BodyStopReason?
    /// Set by the first body bytes of a download: whether they go to the file or to `body`.
    private(set) var file: DownloadFile?
    private var isStoringErrorBody = false
    private(set) var bytesWrittenToFile: Int64 = 0
    private var lastReportedProgress: DownloadProgress?

    init(
        handle: UnsafeMutableRawPointer, destination: ResponseBodyDestination, cancellation: CancellationFlag,
        progress: (@Sendable (DownloadProgress) -> Void)?
    ) {
        self.handle = handle
        self.destination = destination
        self.cancellation = cancellation
        self.progress = progress
    }

    /// Takes a chunk of body; false stops the transfer (with CURLE_WRITE_ERROR).
    func receive(_ chunk: UnsafeBufferPointer<UInt8>) -> Bool {
        if cancellation.isCancelled { return stop(.cancelled) }
        switch destination {
        case .memory(let limit):
            guard chunk.count <= limit - body.count else { return stop(.tooLarge(limit: limit)) }
            body.append(contentsOf: chunk)
        case .file(let path, let limit, let errorBodyLimit):
            if file == nil && !isStoringErrorBody {
                if (200..<300).contains(responseStatus()) {
                    do throws(BodyStopReason) { file = try DownloadFile(creatingOrTruncating: path) } catch { return stop(error) }
                } else {
                    isStoringErrorBody = true
                }
            }
            if let file {
                // Without a Content-Length, libcurl cannot refuse an oversized body up front.
                if let limit, bytesWrittenToFile + Int64(chunk.count) > Int64(limit) { return stop(.tooLarge(limit: limit)) }
                do throws(BodyStopReason) { try file.append(chunk) } catch { return stop(error) }
                bytesWrittenToFile += Int64(chunk.count)
            } else {
                let room = max(0, errorBodyLimit - body.count)
                body.append(contentsOf: chunk.prefix(room))
                if chunk.count > room { return stop(.errorBodyComplete) }
            }
        }
        return true
    }

    /// From libcurl's progress callback; false aborts the transfer.
    func progressed(downloadTotal: Int64) -> Bool {
        if cancellation.isCancelled { return false }
        if file != nil {
            report(DownloadProgress(receivedBytes: bytesWrittenToFile, totalBytes: downloadTotal > 0 ? downloadTotal : nil))
        }
        return true
    }

    /// After a complete 2xx download: the size is now known, whatever the server announced.
    func reportCompletion() {
        report(DownloadProgress(receivedBytes: bytesWrittenToFile, totalBytes: bytesWrittenToFile))
    }

    /// Makes sure a 2xx download left a (possibly empty) file behind, and closes it.
    func finishFile(at path: String) throws(BodyStopReason) {
        let finished: DownloadFile
        if let file { finished = file } else { finished = try DownloadFile(creatingOrTruncating: path) }
        file = nil
        try finished.finish()
    }

    /// Closes a download that failed; the caller removes it.
    func abandonFile() {
        try? file?.finish()
        file = nil
    }

    func responseStatus() -> Int {
        var status = 0
        _ = tracer_curl_getinfo_long(handle, CURLINFO_RESPONSE_CODE, &status)
        return status
    }

    private func report(_ update: DownloadProgress) {
        guard update != lastReportedProgress else { return }
        lastReportedProgress = update
        progress?(update)
    }

    private func stop(_ reason: BodyStopReason) -> Bool {
        stopReason = reason
        return false
    }
}
