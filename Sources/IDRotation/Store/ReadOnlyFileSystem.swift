import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Whether the file system holding a file refuses writes, asked the only way that holds for
/// every such case: by creating (and at once deleting) a small file beside it. Linux turns a file
/// system read-only after a disk error (ext4's `errors=remount-ro`, the usual failure of an SD
/// card); recent kernels do so with a flag of the file system's own, which neither `statvfs` nor
/// `access` report, while every new file is refused with EROFS.
public enum ReadOnlyFileSystem {
    /// True only when the creation fails with EROFS: a directory this user may not write to is
    /// a matter of permissions, and says so elsewhere.
    public static func holds(_ path: String) -> Bool {
        let directory = (path as NSString).deletingLastPathComponent
        let probe = (directory.isEmpty ? "." : directory) + "/.tracer-write-probe-\(getpid())"
        let descriptor = open(probe, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0o600)
        if descriptor >= 0 {
            close(descriptor)
            unlink(probe)
            return false
        }
        return errno == EROFS
    }
}
