import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Writes files that only the user can read, without ever leaving a half-written file behind.
enum PrivateFile {
    /// Writes to a temporary file in the same directory (mode 0600), syncs it, then renames it
    /// over `path`: readers see the old file or the new one, never a part.
    static func writeAtomically(_ data: Data, to path: String) throws {
        let directory = (path as NSString).deletingLastPathComponent.isEmpty ? "." : (path as NSString).deletingLastPathComponent
        var template = Array((directory + "/.tracer-XXXXXX").utf8CString)
        let descriptor = mkstemp(&template)
        guard descriptor >= 0 else {
            throw CommandFailure.cannotWriteOutput(path: path, reason: String(cString: strerror(errno)))
        }
        let temporary = String(decoding: template.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        var failure: String?
        fchmod(descriptor, 0o600)
        data.withUnsafeBytes { buffer in
            var offset = 0
            while offset < buffer.count {
                let written = Glibc.write(descriptor, buffer.baseAddress! + offset, buffer.count - offset)
                if written < 0 {
                    if errno == EINTR { continue }
                    failure = String(cString: strerror(errno))
                    return
                }
                offset += written
            }
        }
        if failure == nil && fsync(descriptor) != 0 { failure = String(cString: strerror(errno)) }
        close(descriptor)
        if failure == nil && rename(temporary, path) != 0 { failure = String(cString: strerror(errno)) }
        if let failure {
            unlink(temporary)
            throw CommandFailure.cannotWriteOutput(path: path, reason: failure)
        }
    }
}
