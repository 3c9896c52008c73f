import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A small ext4 file system in an image file, loop-mounted at `path` with `errors=remount-ro`, for
/// the read-only tests: `fail()` makes the kernel record a file-system error through ext4's own
/// test knob (`/sys/fs/ext4/DEVICE/trigger_fs_error`), and the kernel then turns the mount
/// read-only at once, open files included, as it does when an SD card or a disk starts failing
/// under a running program. A tmpfs cannot stand in: Linux refuses to remount it read-only while a
/// file on it is open for writing. Such a mount cannot be made writable in place (the kernel
/// wants a file-system check first), so `repair()` unmounts, runs `e2fsck` and mounts again, as
/// an administrator would.
public struct FailingDisk: Sendable {
    public let path: String
    private let image: String

    /// Needs root and loop devices (CI runs the tests as root). Anything else fails the test,
    /// saying so: a read-only test that skipped would pass without having tried anything.
    public init(at path: String, megabytes: Int) throws {
        guard getuid() == 0 else {
            throw HarnessFailure(description: "this test loop-mounts an ext4 image, which needs root, and runs as uid \(getuid()): run it as root (CI does)")
        }
        let mkfs = ["/sbin/mkfs.ext4", "/usr/sbin/mkfs.ext4"].first { FileManager.default.isExecutableFile(atPath: $0) }
        guard let mkfs else {
            throw HarnessFailure(description: "mkfs.ext4 is missing: install e2fsprogs (apt-get install e2fsprogs)")
        }
        image = path + ".img"
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        guard FileManager.default.createFile(atPath: image, contents: nil), truncate(image, off_t(megabytes) << 20) == 0 else {
            throw HarnessFailure(description: "cannot create the image file \(image)")
        }
        let made = try ProcessResult.run(mkfs, ["-q", "-F", image])
        guard made.exitCode == 0 else { throw HarnessFailure(description: "mkfs.ext4 \(image) failed: \(made.stderr)") }
        self.path = path
        try mount()
    }

    private func mount() throws {
        let mounted = try ProcessResult.run("/bin/mount", ["-o", "loop,errors=remount-ro", image, path])
        guard mounted.exitCode == 0 else {
            throw HarnessFailure(description: "cannot loop-mount \(image) at \(path) (\(mounted.stderr)): run the test as root where loop devices exist")
        }
    }

    /// The loop device's name (`loop3`), as /sys/fs/ext4 names the mounted file system.
    private func device() throws -> String {
        let listed = try ProcessResult.run("/sbin/losetup", ["-j", image])
        guard let line = listed.stdout.split(separator: "\n").first, let device = line.split(separator: ":").first else {
            throw HarnessFailure(description: "no loop device holds \(image): \(listed.stdout)\(listed.stderr)")
        }
        return (String(device) as NSString).lastPathComponent
    }

    /// Makes the kernel record an error on the file system; with `errors=remount-ro` every write
    /// on it fails with EROFS from then on. Returns once the mount says so.
    public func fail() throws {
        let knob = "/sys/fs/ext4/\(try device())/trigger_fs_error"
        guard let handle = FileHandle(forWritingAtPath: knob) else {
            throw HarnessFailure(description: "cannot open \(knob): this kernel's ext4 has no error trigger")
        }
        try handle.write(contentsOf: Data("1".utf8))
        try handle.close()
        guard isReadOnly else { throw HarnessFailure(description: "the file system at \(path) stayed writable after the error") }
    }

    /// True while a new file on it is refused with EROFS. Recent kernels mark such a mount with
    /// a flag of ext4's own (`mount` shows `emergency_ro`), which statvfs does not report.
    public var isReadOnly: Bool {
        let probe = path + "/.probe"
        let descriptor = open(probe, O_CREAT | O_WRONLY | O_CLOEXEC, 0o600)
        if descriptor >= 0 {
            close(descriptor)
            unlink(probe)
            return false
        }
        return errno == EROFS
    }

    /// Unmounts, checks the file system with `e2fsck -fy` (which clears the error), and mounts it
    /// again writable. Every process must have closed its files on it first.
    public func repair() throws {
        let unmounted = try ProcessResult.run("/bin/umount", [path])
        guard unmounted.exitCode == 0 else { throw HarnessFailure(description: "cannot unmount \(path) to repair it: \(unmounted.stderr)") }
        let fsck = ["/sbin/e2fsck", "/usr/sbin/e2fsck"].first { FileManager.default.isExecutableFile(atPath: $0) } ?? "e2fsck"
        // 0: no errors; 1: errors corrected. More is a file system this test cannot go on with.
        let checked = try ProcessResult.run(fsck, ["-fy", image])
        guard checked.exitCode <= 1 else { throw HarnessFailure(description: "e2fsck \(image) exited \(checked.exitCode): \(checked.stdout)\(checked.stderr)") }
        try mount()
    }

    /// Unmounts (`Unmount.everything`: retried while busy, lazily as a last resort) and only
    /// then deletes the image; returns what went wrong when it stays mounted, for the test to
    /// record rather than leave a mount unnoticed. The image is kept then: deleting the file
    /// under a mounted file system would only hide the mount (the loop device keeps using it).
    @discardableResult
    public func remove(unmounting command: Unmount.Command = Unmount.umount) -> String? {
        if let problem = Unmount.everything(at: path, command: command) {
            return "the ext4 image \(image) is kept: \(problem); unmount it (umount -l \(path)), then delete the image"
        }
        unlink(image)
        return nil
    }
}
