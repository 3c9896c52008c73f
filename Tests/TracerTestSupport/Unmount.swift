import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Takes a test's mount away (a tmpfs, a loop-mounted image) for its owner, which may delete what
/// backs it only once nothing is mounted at its path any more: `umount`'s exit status alone does
/// not say so (a mount stacked on the test's own is the one it takes away).
public enum Unmount {
    /// How `everything` runs `umount` with its arguments; nil when it could not be run.
    public typealias Command = @Sendable (_ arguments: [String]) -> ProcessResult?

    public static let umount: Command = { arguments in try? ProcessResult.run("/bin/umount", arguments) }

    /// Unmounts whatever is mounted at `path` until nothing is, retrying for `patience` while it
    /// is busy (a process just stopped may still hold files on it), and as a last resort
    /// detaches it lazily (gone from the tree at once; the kernel lets go of it when the last
    /// file on it closes). Returns nil once nothing is mounted there, else what went wrong, for
    /// the test to record rather than leave a mount unnoticed.
    public static func everything(at path: String, patience: Duration = .seconds(2), command: Command = umount) -> String? {
        let deadline = ContinuousClock.now + patience
        var refusal: String?
        // Bounded: each round takes a mount away, waits a tenth of a second or ends.
        var rounds = 0
        while isMountPoint(path), rounds < 100 {
            rounds += 1
            let plain = command([path])
            if plain?.exitCode == 0 { continue }
            refusal = "umount: " + said(plain)
            if ContinuousClock.now < deadline {
                Thread.sleep(forTimeInterval: 0.1)
                continue
            }
            let lazy = command(["-l", path])
            if lazy?.exitCode != 0 {
                return "\(path) is still mounted (\(refusal ?? ""); umount -l: \(said(lazy)))"
            }
        }
        return isMountPoint(path) ? "\(path) is still mounted (\(refusal ?? "umount said it was unmounted"))" : nil
    }

    /// True while a mount has `path` as its mount point in this process's mount namespace.
    public static func isMountPoint(_ path: String) -> Bool {
        let resolved = realpath(path, nil).map { pointer in
            defer { free(pointer) }
            return String(cString: pointer)
        } ?? path
        guard let table = try? String(contentsOfFile: "/proc/self/mountinfo", encoding: .utf8) else { return false }
        // Field 5 is the mount point, with space, tab, newline and backslash written in octal.
        return table.split(separator: "\n").contains { line in
            let fields = line.split(separator: " ")
            guard fields.count > 4 else { return false }
            return unescaped(String(fields[4])) == resolved
        }
    }

    private static func unescaped(_ field: String) -> String {
        var bytes: [UInt8] = []
        var utf8 = Array(field.utf8)[...]
        while let byte = utf8.popFirst() {
            if byte == UInt8(ascii: "\\"), utf8.count >= 3, let value = UInt8(String(decoding: utf8.prefix(3), as: UTF8.self), radix: 8) {
                bytes.append(value)
                utf8 = utf8.dropFirst(3)
            } else {
                bytes.append(byte)
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    private static func said(_ result: ProcessResult?) -> String {
        guard let result else { return "could not run /bin/umount" }
        let text = result.stderr.trimmingCharacters(in: .whitespacesAndNewlines)
        return "exit \(result.exitCode)" + (text.isEmpty ? "" : ", \(text)")
    }
}
