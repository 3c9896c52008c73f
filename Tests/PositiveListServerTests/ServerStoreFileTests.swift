import Foundation
import GRDB
import IDRotation
import PositiveListServer
import ServerStorage
import SQLiteServerStore
import Testing
import TestTiers

/// The server's SQLite file: another program's database, or one from a newer server, is refused
/// before anything writes to it. (SQLite's read-only probe of a WAL-mode file may still create its
/// empty -wal and -shm companions; the database file itself is not changed.)
@Suite(.tags(.unit)) struct ServerStoreFileTests {
    let root = NSTemporaryDirectory() + "/tracer-server-store-file-" + UUID().uuidString

    func paths() throws -> ServerPaths {
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        return ServerPaths(dataDirectory: root)
    }

    func bytes(_ path: String) -> Data? { FileManager.default.contents(atPath: path) }

    @Test func anotherProgramsDatabaseIsRefusedUntouched() throws {
        let paths = try paths()
        defer { try? FileManager.default.removeItem(atPath: root) }
        // A node's database is the likeliest mix-up: an SQLite file with its own application id.
        _ = try NodeStore.open(StoreLocation(path: paths.database, source: .flag, ownsDirectory: false))
        let before = bytes(paths.database)
        #expect {
            try ServerStore.open(path: paths.database, publishedDirectory: paths.published)
        } throws: { error in
            guard case .notAServerDatabase = error as? ServerStoreError else { return false }
            return true
        }
        #expect(bytes(paths.database) == before)
    }

    @Test func aDatabaseFromANewerServerIsRefusedWithItsUnknownSteps() throws {
        let paths = try paths()
        defer { try? FileManager.default.removeItem(atPath: root) }
        _ = try ServerStore.open(path: paths.database, publishedDirectory: paths.published)
        try DatabaseQueue(path: paths.database).write { db in
            try db.execute(sql: "INSERT INTO grdb_migrations (identifier) VALUES ('v99: from a later release')")
        }
        #expect {
            try ServerStore.open(path: paths.database, publishedDirectory: paths.published)
        } throws: { error in
            guard case .newerSchema(_, let unknown) = error as? ServerStoreError else { return false }
            return unknown == ["v99: from a later release"]
        }
    }
}
