import Crypto
import Foundation
import PositiveListFormat
#if canImport(Glibc)
import Glibc
#endif

/// The server's Ed25519 signing key on disk: its 32-byte seed in base64, in a file only the
/// server's user can read.
public enum SigningKeyFile {
    /// Creates a new key at `path`; refuses to replace an existing file, which would orphan
    /// every node configured with the old public key.
    public static func create(at path: String) throws(SigningKeyError) -> Curve25519.Signing.PrivateKey {
        let key = Curve25519.Signing.PrivateKey()
        let descriptor = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else {
            if errno == EEXIST { throw .alreadyExists(path: path) }
            throw .cannotWrite(path: path, reason: String(cString: strerror(errno)))
        }
        defer { close(descriptor) }
        fchmod(descriptor, 0o600)
        let text = Array((key.rawRepresentation.base64EncodedString() + "\n").utf8)
        let written = text.withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
        guard written == text.count, fsync(descriptor) == 0 else {
            let reason = String(cString: strerror(errno))
            unlink(path)
            throw .cannotWrite(path: path, reason: reason)
        }
        return key
    }

    public static func load(from path: String) throws(SigningKeyError) -> Curve25519.Signing.PrivateKey {
        var status = stat()
        guard stat(path, &status) == 0, let data = FileManager.default.contents(atPath: path) else {
            throw .missing(path: path)
        }
        // A key others can read is a key others may have copied.
        guard status.st_mode & 0o077 == 0 else { throw .tooOpen(path: path, mode: status.st_mode & 0o777) }
        guard let raw = Data(base64Encoded: String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)),
              let key = try? Curve25519.Signing.PrivateKey(rawRepresentation: raw)
        else { throw .malformed(path: path) }
        return key
    }
}

public enum SigningKeyError: Error, Sendable, Equatable, CustomStringConvertible {
    case alreadyExists(path: String)
    case missing(path: String)
    case tooOpen(path: String, mode: mode_t)
    case malformed(path: String)
    case cannotWrite(path: String, reason: String)

    public var description: String {
        switch self {
        case .alreadyExists(let path):
            return "A signing key already exists at \(path); nodes trust its public key, so it is kept. Move it away first if you really mean to replace it."
        case .missing(let path):
            return "No signing key at \(path); create one with `tracer-server keygen`."
        case .tooOpen(let path, let mode):
            return "The signing key \(path) is readable by others (mode \(String(mode, radix: 8))); run `chmod 600 \(path)`, and make a new key if others may have copied it."
        case .malformed(let path):
            return "The file \(path) is not a tracer-server signing key; restore it from a backup or create a new one with `tracer-server keygen`."
        case .cannotWrite(let path, let reason):
            return "Cannot write the signing key \(path) (\(reason)); check the directory's permissions."
        }
    }
}
