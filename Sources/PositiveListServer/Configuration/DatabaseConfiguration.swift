import Foundation
import PostgresServerStore
import Settings
#if canImport(Glibc)
import Glibc
#endif

/// The `database` setting: absent, the server keeps its data in DATA_DIR/server.db (SQLite);
/// present, in PostgreSQL, so that several `serve` instances can share it.
///
/// ```json
/// "database": {"url": "postgresql://tracer@db.internal:5432/tracer",
///              "passwordFile": "/etc/tracer-server/database-password"}
/// ```
/// The password never sits in the configuration file: it comes from the environment variable
/// `passwordEnvironment` names (default `TRACER_SERVER_DATABASE_PASSWORD`) or from a file only
/// its owner can read (mode 0600 or stricter). Without either, libpq's own means apply
/// (`~/.pgpass`, peer or certificate authentication).
public struct DatabaseConfiguration: Sendable, Equatable {
    public static let defaultPasswordEnvironment = "TRACER_SERVER_DATABASE_PASSWORD"

    /// A `postgresql://` URL (or a libpq conninfo string) without a password.
    public var url: String
    public var passwordFile: String?
    public var passwordEnvironment: String = Self.defaultPasswordEnvironment
    /// Connections per instance; each upload holds one for its transaction.
    public var poolSize: Int = 4

    public init(url: String) {
        self.url = url
    }

    /// The section's fields, each checked as it is read; `url` is required (``finish()``).
    static let section = SettingSection<DatabaseConfiguration>([
        .field("url", .textOrEmpty(describe: "a postgresql:// URL such as postgresql://tracer@127.0.0.1:5432/tracer", problem: urlProblem)) { database, value in
            if case .text(let url) = value { database.url = url.trimmingCharacters(in: .whitespaces) }
        },
        .text("passwordFile", \.passwordFile, .text(describe: "the path of a 0600 file", problem: { _ in nil }), env: nil, flag: nil, help: "", convert: { $0 }),
        .text(
            "passwordEnvironment", \.passwordEnvironment, .text(describe: "an environment variable's name", problem: { _ in nil }), env: nil, flag: nil,
            help: "", convert: { $0 }),
        .integer("poolSize", \.poolSize, .integer(minimum: 1, maximum: 64), env: nil, flag: nil, help: ""),
    ])

    /// Refuses a section without its URL.
    func finish() throws(SettingProblem) {
        if url.isEmpty { throw SettingProblem("is missing; give a postgresql:// URL such as postgresql://tracer@127.0.0.1:5432/tracer", field: "url") }
    }

    private static func urlProblem(_ text: String) -> String? {
        let url = text.trimmingCharacters(in: .whitespaces)
        guard url.hasPrefix("postgresql://") || url.hasPrefix("postgres://") || url.contains("=") else {
            return "must be a postgresql:// URL such as postgresql://tracer@127.0.0.1:5432/tracer"
        }
        if holdsPassword(url) {
            return "must not hold the password; put it in the environment variable \(defaultPasswordEnvironment) or in a 0600 file named by database.passwordFile"
        }
        return nil
    }

    /// Whether `url` carries a password anywhere libpq would take one from: the URL's user
    /// information, a `password` query parameter, or a `password=` keyword of a key=value string.
    /// Such a value would end up in `tracer-server config`'s output and in backups of the file.
    static func holdsPassword(_ url: String) -> Bool {
        if let scheme = url.range(of: "://") {
            // By hand rather than with URLComponents, which gives up on forms libpq takes (several
            // hosts, a password with a space), so that nothing unparsed passes as password-free.
            let rest = url[scheme.upperBound...]
            let authority = rest.prefix { $0 != "/" && $0 != "?" }
            let userInformation = authority.range(of: "@", options: .backwards).map { authority[..<$0.lowerBound] } ?? ""
            let query = rest.drop { $0 != "?" }.dropFirst()
            return userInformation.contains(":")
                || query.split(separator: "&").contains { $0.split(separator: "=", maxSplits: 1).first?.lowercased() == "password" }
        }
        return url.split(whereSeparator: \.isWhitespace).contains { word in
            word.split(separator: "=", maxSplits: 1).first.map { $0.trimmingCharacters(in: .whitespaces).lowercased() == "password" } ?? false
        }
    }

    /// The connection settings with the password, read now (never logged: see
    /// ``PostgresSettings/description``).
    public func settings(environment: [String: String] = ProcessInfo.processInfo.environment) throws(DatabasePasswordError) -> PostgresSettings {
        if let value = environment[passwordEnvironment], !value.isEmpty {
            return PostgresSettings(connection: url, password: value)
        }
        guard let passwordFile else { return PostgresSettings(connection: url, password: nil) }
        var status = stat()
        guard stat(passwordFile, &status) == 0, let data = FileManager.default.contents(atPath: passwordFile) else {
            throw .unreadableFile(path: passwordFile)
        }
        guard status.st_mode & 0o077 == 0 else { throw .fileReadableByOthers(path: passwordFile) }
        let password = String(decoding: data, as: UTF8.self).trimmingCharacters(in: .newlines)
        return PostgresSettings(connection: url, password: password)
    }
}

public enum DatabasePasswordError: Error, Sendable, CustomStringConvertible {
    case unreadableFile(path: String)
    case fileReadableByOthers(path: String)

    public var description: String {
        switch self {
        case .unreadableFile(let path):
            return "Cannot read the database password file \(path); check database.passwordFile and the file's owner."
        case .fileReadableByOthers(let path):
            return "The database password file \(path) can be read by other users; run `chmod 600 \(path)`."
        }
    }
}
