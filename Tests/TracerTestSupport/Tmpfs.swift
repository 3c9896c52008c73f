import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A small tmpfs mounted at `path` until `unmount()`, for the full-disk tests (the node's
/// database, the server's published directory): filled with `fill(_:)`, freed with `remove(_:)`.
public struct Tmpfs: Sendable {
    public let path: String

    /// Mounting needs root (CI runs the tests as root). Anything else fails the test, saying so:
    /// a full-disk test that skipped would pass without having tried anything.
    public init(at path: String, megabytes: Int) throws {
        guard getuid() == 0 else {
            throw HarnessFailure(description: "this test mounts a tmpfs, which needs root, and runs as uid \(getuid()): run it as root (CI does), or in a container that allows mount")
        }
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        let mount = try ProcessResult.run("/bin/mount", ["-t", "tmpfs", "-o", "size=\(megabytes)m", "tmpfs", path])
        guard mount.exitCode == 0 else {
            throw HarnessFailure(description: "cannot mount a tmpfs at \(path) (\(mount.stderr)): run the test as root in a container that allows mount")
        }
        self.path = path
    }

    /// Unmounts (`Unmount.everything`: retried while busy, lazily as a last resort); returns
    /// what went wrong when it stays mounted, for the test to record rather than leave a mount
    /// unnoticed.
    @discardableResult
    public func unmount() -> String? {
        Unmount.everything(at: path).map { "the tmpfs at \(path) stays mounted: \($0)" }
    }

    /// Writes zeros to `name` until the file system refuses, in ever smaller pieces.
    public func fill(_ name: String) throws -> Int {
        let descriptor = open(path + "/" + name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { throw HarnessFailure(description: "cannot create \(name) on the tmpfs") }
        defer { close(descriptor) }
        var total = 0
        for size in [65_536, 4096, 512, 1] {
            let zeros = [UInt8](repeating: 0, count: size)
            while zeros.withUnsafeBytes({ write(descriptor, $0.baseAddress, size) }) == size { total += size }
        }
        return total
    }

    public func remove(_ name: String) { unlink(path + "/" + name) }
}
