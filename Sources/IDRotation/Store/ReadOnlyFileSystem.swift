import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Whether the file system holding a file refuses writes, asked the only way that holds for
/// every such case: by creating a file there. Linux turns a file system read-only after a disk
/// error (ext4's `errors=remount-ro`, the usual failure of an SD card); recent kernels do so with
/// a flag of the file system's own, which neither `statvfs` nor `access` report, while every new
/// file is refused with EROFS. A mount that is read-only on purpose answers the same.
public enum ReadOnlyFileSystem {
    /// Linux's O_TMPFILE (`__O_TMPFILE | O_DIRECTORY`, the same value on every architecture's
    /// generic flags), which Glibc's Swift module does not export.
    private static let openUnnamed: Int32 = 0o20000000 | O_DIRECTORY

    /// True only when the creation fails with EROFS: a directory this user may not write to is
    /// a matter of permissions, and says so elsewhere. The directory is the real file's (a
    /// database reached through a link lives where the link points).
    public static func holds(_ path: String) -> Bool {
        let directory = (realFile(path) as NSString).deletingLastPathComponent
        let folder = directory.isEmpty ? "." : directory
        // An unnamed file: nothing is left behind whatever happens to this process.
        let unnamed = open(folder, openUnnamed | O_WRONLY | O_CLOEXEC, 0o600)
        if unnamed >= 0 {
            close(unnamed)
            return false
        }
        if errno == EROFS { return true }
        // A file system without unnamed files: a named one, under a name no other probe takes.
        let probe = folder + "/.tracer-write-probe-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        let named = open(probe, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0o600)
        if named >= 0 {
            close(named)
            unlink(probe)
            return false
        }
        return errno == EROFS
    }

    /// The file `path` names, links resolved: where SQLite keeps the database's -wal and -shm
    /// files; `path` itself when it cannot be resolved (a file not there yet).
    static func realFile(_ path: String) -> String {
        realpath(path, nil).map { pointer in
            defer { free(pointer) }
            return String(cString: pointer)
        } ?? path
    }
}
