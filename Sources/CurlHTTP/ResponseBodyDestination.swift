#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Where one attempt puts the body it receives.
enum ResponseBodyDestination: Sendable {
    /// The whole body in memory, at most `limit` bytes.
    case memory(limit: Int)
    /// A 2xx body into the file at `path`, at most `limit` bytes when given; the first
    /// `errorBodyLimit` bytes of any other body in memory.
    case file(path: String, limit: Int?, errorBodyLimit: Int)
}

/// Why the write callback stopped a transfer early.
enum BodyStopReason: Error, Equatable {
    case tooLarge(limit: Int)
    /// Enough of a non-2xx body was kept; the rest is not wanted.
    case errorBodyComplete
    case cannotWrite(reason: String)
    case cancelled
}

/// An open, truncated file that a download streams into. Used only on the transfer's thread.
final class DownloadFile {
    let path: String
    private var descriptor: Int32

    init(creatingOrTruncating path: String) throws(BodyStopReason) {
        let descriptor = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard descriptor >= 0 else { throw .cannotWrite(reason: currentErrnoDescription()) }
        self.path = path
        self.descriptor = descriptor
    }

    func append(_ bytes: UnsafeBufferPointer<UInt8>) throws(BodyStopReason) {
        guard let base = bytes.baseAddress else { return }
        var offset = 0
        while offset < bytes.count {
            let written = write(descriptor, base + offset, bytes.count - offset)
            if written < 0 {
                if errno == EINTR { continue }
                throw .cannotWrite(reason: currentErrnoDescription())
            }
            offset += written
        }
    }

    /// A failed close can mean the data did not reach the disk (NFS, quotas), so it is reported.
    func finish() throws(BodyStopReason) {
        guard descriptor >= 0 else { return }
        let result = close(descriptor)
        descriptor = -1
        if result != 0 { throw .cannotWrite(reason: currentErrnoDescription()) }
    }

    deinit {
        if descriptor >= 0 { _ = close(descriptor) }
    }
}

func currentErrnoDescription() -> String { String(cString: strerror(errno)) }

/// Removes what a failed or non-2xx download left at `path`.
func removeDownloadFile(atPath path: String) { _ = unlink(path) }
