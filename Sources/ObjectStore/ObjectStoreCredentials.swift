import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// The access key pair sync signs its requests with, and the session token that comes with
/// temporary credentials (an assumed IAM role, an instance profile, web identity federation).
/// Never printed: `description` shows only the key id's first four characters, so a credentials
/// value can be logged by mistake without harm.
public struct ObjectStoreCredentials: Sendable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    public let accessKeyID: String
    let secretAccessKey: String
    /// Sent, and signed, as x-amz-security-token; the service refuses temporary keys without it.
    let sessionToken: String?

    public static let accessKeyVariable = "AWS_ACCESS_KEY_ID"
    public static let secretKeyVariable = "AWS_SECRET_ACCESS_KEY"
    public static let sessionTokenVariable = "AWS_SESSION_TOKEN"

    public init(accessKeyID: String, secretAccessKey: String, sessionToken: String? = nil) {
        self.accessKeyID = accessKeyID
        self.secretAccessKey = secretAccessKey
        self.sessionToken = sessionToken.flatMap { $0.isEmpty ? nil : $0 }
    }

    public var isTemporary: Bool { sessionToken != nil }

    public var description: String { "access key \(accessKeyID.prefix(4))…" + (isTemporary ? " with a session token" : "") }
    public var debugDescription: String { description }
    /// `dump()` and debuggers show the description only, not the stored secret.
    public var customMirror: Mirror { Mirror(self, children: ["description": description]) }

    /// libcurl's CURLOPT_USERPWD value, "key:secret" (libcurl splits at the first colon; access key
    /// ids have none).
    var userPassword: String { accessKeyID + ":" + secretAccessKey }

    /// From a credentials file when one is configured, else from AWS_ACCESS_KEY_ID,
    /// AWS_SECRET_ACCESS_KEY and, for temporary credentials, AWS_SESSION_TOKEN.
    public static func load(file: String?, environment: [String: String]) throws(ObjectStoreError) -> ObjectStoreCredentials {
        if let file { return try load(file: file) }
        guard let id = environment[accessKeyVariable], !id.isEmpty,
              let secret = environment[secretKeyVariable], !secret.isEmpty
        else { throw .missingCredentials }
        return ObjectStoreCredentials(accessKeyID: id, secretAccessKey: secret, sessionToken: environment[sessionTokenVariable])
    }

    /// A file of two lines, `AWS_ACCESS_KEY_ID=...` and `AWS_SECRET_ACCESS_KEY=...`, and a third,
    /// `AWS_SESSION_TOKEN=...`, for temporary credentials (blank lines and `#` comments allowed;
    /// the same form as a systemd EnvironmentFile), mode 0600.
    public static func load(file path: String) throws(ObjectStoreError) -> ObjectStoreCredentials {
        var status = stat()
        guard stat(path, &status) == 0, let data = FileManager.default.contents(atPath: path) else {
            throw .unreadableCredentialsFile(path: path)
        }
        // A secret others can read is a secret others may have copied.
        guard status.st_mode & 0o077 == 0 else {
            throw .credentialsFileTooOpen(path: path, mode: String(status.st_mode & 0o777, radix: 8))
        }
        var values: [String: String] = [:]
        for line in String(decoding: data, as: UTF8.self).split(whereSeparator: \.isNewline) {
            let text = line.trimmingCharacters(in: .whitespaces)
            guard !text.isEmpty, !text.hasPrefix("#"), let equals = text.firstIndex(of: "=") else { continue }
            let name = text[..<equals].trimmingCharacters(in: .whitespaces)
            let value = text[text.index(after: equals)...].trimmingCharacters(in: .whitespaces)
            values[name] = value
        }
        guard let id = values[accessKeyVariable], !id.isEmpty, let secret = values[secretKeyVariable], !secret.isEmpty else {
            throw .malformedCredentialsFile(path: path)
        }
        return ObjectStoreCredentials(accessKeyID: id, secretAccessKey: secret, sessionToken: values[sessionTokenVariable])
    }
}
