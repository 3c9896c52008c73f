import ArgumentParser
import Foundation
import IDRotation
import PositiveListServer

/// `tracer-server doctor`: checks what the server needs before `serve`, one line each.
struct Doctor: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Checks the configuration and the database (connection and schema version), one line each.",
        discussion: "Exits with 1 when a check failed. Changes nothing: a PostgreSQL database is not migrated.")

    @OptionGroup var location: LocationOptions

    func run() async throws {
        var failed = false
        func report(_ ok: Bool, _ line: String) {
            print((ok ? "ok    " : "FAIL  ") + line)
            if !ok { failed = true }
        }
        let configuration: ServerConfiguration
        do {
            configuration = try location.loadConfiguration()
            report(true, "configuration \(location.resolvedConfigurationPath)")
        } catch {
            report(false, "\(error)")
            throw ExitCode(1)
        }
        if let database = configuration.database {
            do {
                let settings = try database.settings()
                let version = try await PostgresServerStore.schemaVersion(settings: settings)
                let known = PostgresServerStore.knownSchemaVersion
                if version > known {
                    report(false, "PostgreSQL \(settings): schema version \(version) is newer than this tracer-server's (\(known)); upgrade tracer-server")
                } else if version < known {
                    report(true, "PostgreSQL \(settings): connected; schema version \(version), the next `serve` brings it to \(known)")
                } else {
                    report(true, "PostgreSQL \(settings): connected; schema version \(version) (current)")
                }
            } catch {
                report(false, "\(error)")
            }
        } else {
            do {
                _ = try await location.openStore(configuration: configuration).summary(now: SystemWallClock().now())
                report(true, "SQLite database \(location.paths.database)")
            } catch {
                report(false, "\(error)")
            }
        }
        if failed { throw ExitCode(1) }
    }
}
