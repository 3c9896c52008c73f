import GRDB

/// What an existing SQLite file holds, read through a read-only connection before a store opens
/// it for writing, so that another program's database, or one from a newer binary, is refused
/// untouched (no WAL switch, no permission change). The node's and the server's stores share it.
public enum SQLiteFileProbe {
    public enum Contents: Sendable, Equatable {
        /// No tables and no application id: a new file a store may take.
        case empty
        /// Another program's database (its `PRAGMA application_id` is not `applicationID`).
        case foreign
        /// The store's own file; `unknownMigrations` are schema steps this binary does not know.
        case own(unknownMigrations: [String])
    }

    /// Errors are SQLite's own (a file that is not a database, one that cannot be read); the
    /// caller maps them to its store's error, with its own advice.
    public static func inspect(path: String, applicationID: Int32, migrator: DatabaseMigrator) throws -> Contents {
        var configuration = Configuration()
        configuration.readonly = true
        configuration.busyMode = .timeout(5)
        let probe = try DatabaseQueue(path: path, configuration: configuration)
        defer { try? probe.close() }
        return try probe.read { db in
            let foundID = try Int32.fetchOne(db, sql: "PRAGMA application_id") ?? 0
            let objectCount = try Int.fetchOne(db, sql: "SELECT count(*) FROM sqlite_master") ?? 0
            if objectCount == 0 && foundID == 0 { return .empty }
            guard foundID == applicationID else { return .foreign }
            let unknown = try migrator.appliedIdentifiers(db).subtracting(migrator.migrations)
            return .own(unknownMigrations: unknown.sorted())
        }
    }
}
