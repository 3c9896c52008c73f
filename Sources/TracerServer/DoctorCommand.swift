import ArgumentParser
import Foundation
import PositiveListFormat
import PositiveListServer
import PostgresServerStore
import TracerCore

/// `tracer-server doctor`: checks what the server needs before `serve` and `sync`, one line each.
struct Doctor: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Checks the configuration, the signing key, the database (connection and schema version) and, when configured, the object store bucket; one line each.",
        discussion: "Exits with 1 when a check failed. Changes nothing: a PostgreSQL database is not migrated, nothing is uploaded.")

    @OptionGroup var location: LocationOptions
    @OptionGroup var objectStore: ObjectStoreOptions

    func run() async throws {
        var failed = false
        func report(_ ok: Bool, _ what: String, _ detail: String) {
            print("\(ok ? "ok  " : "FAIL") \(what): \(detail)")
            if !ok { failed = true }
        }
        let configuration: ServerConfiguration
        do {
            configuration = try location.loadConfiguration()
            report(true, "configuration", "\(location.resolvedConfigurationPath), \(configuration.authorities.count) authorities")
        } catch {
            report(false, "configuration", "\(error)")
            throw ExitCode(1)
        }
        do {
            let key = try SigningKeyFile.load(from: location.resolvedKeyPath)
            report(true, "signing key", "public key \(PositiveListPublicKey(key.publicKey).base64)")
        } catch {
            report(false, "signing key", "\(error)")
        }
        if !configuration.witnessedLogs.isEmpty {
            do {
                let key = try SigningKeyFile.load(from: location.paths.witnessKey, kind: .witness)
                let identity = try WitnessIdentity(name: configuration.witnessName, publicKey: key.publicKey)
                report(true, "witness key", "\(identity.verifierKey.text), witnessing \(configuration.witnessedLogs.map(\.origin).joined(separator: ", "))")
            } catch {
                report(false, "witness key", "\(error)")
            }
        }
        await checkDatabase(configuration, report: report)
        // The last publication, as `serve` or `publish` recorded it: a full disk under the
        // published directory shows here, not in a check of the database.
        if let record = OutcomeRecord.read(from: location.paths.publicationRecord) {
            report(record.succeeded, "publication", record.succeeded ? "last at \(record.at.utcText): \(record.detail)" : "failing (last tried \(record.at.utcText)): \(record.detail)")
            if let warning = record.warning { report(false, "list log", "not appended by the last publication (\(record.at.utcText)): \(warning)") }
        }
        do {
            if let settings = try objectStore.settings(configured: configuration.objectStore) {
                let client = try settings.makeClient()
                // A listing proves the endpoint answers, the signature and key are accepted and
                // s3:ListBucket is granted; uploads are proven by the first sync.
                let objects = try await client.list(prefix: settings.location.keyPrefix)
                report(true, "object store", "bucket \(settings.location.bucket) at \(settings.location.endpoint) is reachable, the credentials are accepted, \(objects.count) objects under \"\(settings.location.keyPrefix)\"")
            } else {
                print("--   object store: not configured (no objectStore section); files are served from this host only")
            }
        } catch {
            report(false, "object store", "\(error)")
        }
        if failed { throw ExitCode(1) }
    }

    private func checkDatabase(_ configuration: ServerConfiguration, report: (Bool, String, String) -> Void) async {
        guard let database = configuration.database else {
            do {
                _ = try await location.openStore(configuration: configuration).summary(now: SystemWallClock().now())
                report(true, "database", "SQLite \(location.paths.database)")
            } catch {
                report(false, "database", "\(error)")
            }
            return
        }
        do {
            let settings = try database.settings()
            let version = try await PostgresServerStore.schemaVersion(settings: settings)
            let known = PostgresServerStore.knownSchemaVersion
            if version > known {
                report(false, "database", "PostgreSQL \(settings): schema version \(version) is newer than this tracer-server's (\(known)); upgrade tracer-server")
            } else if version < known {
                report(true, "database", "PostgreSQL \(settings): connected; schema version \(version), the next `serve` brings it to \(known)")
            } else {
                report(true, "database", "PostgreSQL \(settings): connected; schema version \(version) (current)")
            }
        } catch {
            report(false, "database", "\(error)")
        }
    }
}
