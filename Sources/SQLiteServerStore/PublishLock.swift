import Foundation
import PositiveListFormat
#if canImport(Glibc)
import Glibc
#endif

/// An exclusive lock on the data directory's `publish.lock`, held while publishing, so the
/// schedule inside `serve` and a `tracer-server publish` run never interleave.
final class PublishLock {
    private let descriptor: Int32

    init(path: String) throws(FileWriteError) {
        descriptor = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { throw .cannotCreate(path: path, reason: AtomicFile.lastError()) }
        while flock(descriptor, LOCK_EX) != 0 {
            guard errno == EINTR else {
                let reason = AtomicFile.lastError()
                close(descriptor)
                throw .cannotWrite(path: path, reason: "cannot lock it: " + reason)
            }
        }
    }

    deinit {
        flock(descriptor, LOCK_UN)
        close(descriptor)
    }
}
