import Foundation
import GRDB
import IDRotation
import Testing
import TestTiers
import TracerCore

@Suite(.tags(.unit)) struct NodeStoreTests {
    @Test func createsAPrivateFileInAPrivateDirectoryInWALMode() throws {
        let temporary = TemporaryDirectory()
        defer { temporary.remove() }
        let location = try StoreLocation.resolve(flag: nil, environment: ["XDG_DATA_HOME": temporary.path + "/data"])
        #expect(location.path == temporary.path + "/data/tracer/tracer.db")
        let store = try NodeStore.open(location)

        #expect(try permissions(location.directory) == 0o700)
        #expect(try permissions(location.path) == 0o600)
        let journalMode = try DatabaseQueue(path: location.path).read { db in
            try String.fetchOne(db, sql: "PRAGMA journal_mode")
        }
        #expect(journalMode == "wal")
        #expect(try store.integrityCheck() == ["ok"])
        #expect(try store.appliedSchemaVersions() == NodeStore.schemaVersions)
    }

    @Test func tightensTheModeOfAnExistingFile() throws {
        let temporary = TemporaryDirectory()
        defer { temporary.remove() }
        let location = temporary.location()
        _ = FileManager.default.createFile(atPath: location.path, contents: nil, attributes: [.posixPermissions: 0o644])
        _ = try NodeStore.open(location)
        #expect(try permissions(location.path) == 0o600)
    }

    @Test func reopeningKeepsDataAndSchema() throws {
        let temporary = TemporaryDirectory()
        defer { temporary.remove() }
        let own = OwnID(id: .random(), window: IDWindow(start: 900, end: 1_800))
        try NodeStore.open(temporary.location()).recordOwnID(own)
        let reopened = try NodeStore.open(temporary.location())
        #expect(try reopened.ownIDs() == [own])
        #expect(try reopened.appliedSchemaVersions() == NodeStore.schemaVersions)
    }

    @Test func refusesASchemaFromANewerVersionWithoutTouchingIt() throws {
        let temporary = TemporaryDirectory()
        defer { temporary.remove() }
        let location = temporary.location()
        let own = OwnID(id: .random(), window: IDWindow(start: 900, end: 1_800))
        try NodeStore.open(location).recordOwnID(own)
        try DatabaseQueue(path: location.path).write { db in
            try db.execute(sql: "INSERT INTO grdb_migrations (identifier) VALUES ('v2: from a later release')")
        }
        let before = try snapshot(location)

        #expect {
            try NodeStore.open(location)
        } throws: { error in
            guard case .newerSchema(_, let unknown) = error as? StoreError else { return false }
            return unknown == ["v2: from a later release"]
        }
        #expect(try snapshot(location) == before)
        let description = "\(StoreError.newerSchema(path: "/x", unknownMigrations: ["v2"]))"
        #expect(description.contains("newer version of tracer"))
    }

    @Test func refusesFilesThatAreNotTracerDatabases() throws {
        let temporary = TemporaryDirectory()
        defer { temporary.remove() }
        let garbage = temporary.location("garbage.db")
        _ = FileManager.default.createFile(atPath: garbage.path, contents: Data((0..<4096).map { UInt8($0 % 251) }))
        #expect {
            try NodeStore.open(garbage)
        } throws: { error in
            if case .notATracerDatabase = error as? StoreError { return true }
            return false
        }

        let foreign = temporary.location("other-app.db")
        try DatabaseQueue(path: foreign.path).write { db in try db.execute(sql: "CREATE TABLE notes (text TEXT)") }
        #expect {
            try NodeStore.open(foreign)
        } throws: { error in
            if case .notATracerDatabase = error as? StoreError { return true }
            return false
        }
    }

    @Test func locationPrecedence() throws {
        let environment = ["TRACER_DB": "/env/t.db", "XDG_DATA_HOME": "/xdg", "HOME": "/home/u"]
        #expect(try StoreLocation.resolve(flag: "/flag/t.db", environment: environment).path == "/flag/t.db")
        #expect(try StoreLocation.resolve(flag: nil, environment: environment).path == "/env/t.db")
        #expect(try StoreLocation.resolve(flag: nil, environment: ["XDG_DATA_HOME": "/xdg", "HOME": "/home/u"]).path
            == "/xdg/tracer/tracer.db")
        // A relative XDG_DATA_HOME is invalid per the XDG spec and is ignored.
        #expect(try StoreLocation.resolve(flag: nil, environment: ["XDG_DATA_HOME": "rel", "HOME": "/home/u"]).path
            == "/home/u/.local/share/tracer/tracer.db")
        #expect(throws: StoreError.self) { try StoreLocation.resolve(flag: nil, environment: [:]) }
    }

    @Test func deleteAllDataRemovesEveryFile() throws {
        let temporary = TemporaryDirectory()
        defer { temporary.remove() }
        let location = temporary.location()
        let store = try NodeStore.open(location)
        try store.recordOwnID(OwnID(id: .random(), window: IDWindow(start: 0, end: 900)))
        try NodeStore.deleteAllData(at: location)
        for file in location.allFiles { #expect(!FileManager.default.fileExists(atPath: file)) }
    }
}

/// Every row of the tables a refused open must leave alone.
func snapshot(_ location: StoreLocation) throws -> [String] {
    try DatabaseQueue(path: location.path).read { db in
        try String.fetchAll(db, sql: "SELECT identifier FROM grdb_migrations ORDER BY identifier")
            + String.fetchAll(db, sql: "SELECT printf('%d %d %d', id, valid_from, valid_until) FROM own_ids")
            + String.fetchAll(db, sql: "SELECT name FROM sqlite_master ORDER BY name")
    }
}

func permissions(_ path: String) throws -> Int {
    let attributes = try FileManager.default.attributesOfItem(atPath: path)
    return (attributes[.posixPermissions] as? NSNumber)?.intValue ?? -1
}

/// The probe `tracer status`, `tracer doctor` and the store's errors use to tell a file system the
/// kernel turned read-only (tested for real, on ext4 failed into read-only, by NodeReadOnlyDisk).
@Suite(.tags(.unit)) struct ReadOnlyFileSystemTests {
    @Test func aWritableDirectoryIsNotReadOnlyAndKeepsNoProbe() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("probe-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        #expect(!ReadOnlyFileSystem.holds(directory + "/tracer.db"))
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory).isEmpty)
    }

    @Test func aMissingDirectoryIsNotTakenForAReadOnlyOne() {
        #expect(!ReadOnlyFileSystem.holds("/nonexistent-\(UUID().uuidString)/tracer.db"))
    }
}
