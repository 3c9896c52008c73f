import Crypto
import Foundation
import PositiveListFormat
#if canImport(Glibc)
import Glibc
#endif

/// Which of the server's two Ed25519 keys a file holds: they are kept alike, and only the
/// messages about them differ.
public enum SigningKeyKind: Sendable, Equatable {
    /// The list's signing key (`signing-key`): batches, indexes and the log's checkpoints.
    case list
    /// The witness's key (`witness-key`): its cosignatures of other logs' checkpoints.
    case witness

    var noun: String { self == .list ? "signing key" : "witness key" }
    var command: String { self == .list ? "tracer-server keygen" : "tracer-server witness-keygen" }
    /// Who would be orphaned by a replaced key.
    var trustedBy: String {
        self == .list ? "nodes trust its public key" : "the logs and nodes that count its cosignatures know its public key"
    }
}

/// The server's Ed25519 signing key (or its witness key) on disk: its 32-byte seed in base64, in a
/// file only the server's user can read.
public enum SigningKeyFile {
    /// Creates a new key at `path`; refuses to replace an existing file, which would orphan
    /// every node configured with the old public key.
    public static func create(at path: String, kind: SigningKeyKind = .list) throws(SigningKeyError) -> Curve25519.Signing.PrivateKey {
        let key = Curve25519.Signing.PrivateKey()
        let descriptor = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else {
            if errno == EEXIST { throw .alreadyExists(path: path, kind: kind) }
            throw .cannotWrite(path: path, reason: String(cString: strerror(errno)), kind: kind)
        }
        defer { close(descriptor) }
        fchmod(descriptor, 0o600)
        let text = Array((key.rawRepresentation.base64EncodedString() + "\n").utf8)
        let written = text.withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
        guard written == text.count, fsync(descriptor) == 0 else {
            let reason = String(cString: strerror(errno))
            unlink(path)
            throw .cannotWrite(path: path, reason: reason, kind: kind)
        }
        return key
    }

    public static func load(from path: String, kind: SigningKeyKind = .list) throws(SigningKeyError) -> Curve25519.Signing.PrivateKey {
        var status = stat()
        guard stat(path, &status) == 0, let data = FileManager.default.contents(atPath: path) else {
            throw .missing(path: path, kind: kind)
        }
        // A key others can read is a key others may have copied.
        guard status.st_mode & 0o077 == 0 else { throw .tooOpen(path: path, mode: status.st_mode & 0o777, kind: kind) }
        guard let raw = Data(base64Encoded: String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)),
              let key = try? Curve25519.Signing.PrivateKey(rawRepresentation: raw)
        else { throw .malformed(path: path, kind: kind) }
        return key
    }
}

public enum SigningKeyError: Error, Sendable, Equatable, CustomStringConvertible {
    case alreadyExists(path: String, kind: SigningKeyKind = .list)
    case missing(path: String, kind: SigningKeyKind = .list)
    case tooOpen(path: String, mode: mode_t, kind: SigningKeyKind = .list)
    case malformed(path: String, kind: SigningKeyKind = .list)
    case cannotWrite(path: String, reason: String, kind: SigningKeyKind = .list)

    public var description: String {
        switch self {
        case .alreadyExists(let path, let kind):
            return "A \(kind.noun) already exists at \(path); \(kind.trustedBy), so it is kept. Move it away first if you really mean to replace it."
        case .missing(let path, let kind):
            return "No \(kind.noun) at \(path); create one with `\(kind.command)`."
        case .tooOpen(let path, let mode, let kind):
            return "The \(kind.noun) \(path) is readable by others (mode \(String(mode, radix: 8))); run `chmod 600 \(path)`, and make a new key if others may have copied it."
        case .malformed(let path, let kind):
            return "The file \(path) is not a tracer-server \(kind.noun); restore it from a backup or create a new one with `\(kind.command)`."
        case .cannotWrite(let path, let reason, let kind):
            return "Cannot write the \(kind.noun) \(path) (\(reason)); check the directory's permissions."
        }
    }
}
