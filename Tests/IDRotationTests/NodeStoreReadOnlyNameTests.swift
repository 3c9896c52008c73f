import Foundation
@testable import IDRotation
import Testing
import TestTiers
import TracerCore

/// What `NodeStore.openReadOnly` gives SQLite on a read-only file system (tested for real, on ext4
/// failed into read-only, by NodeReadOnlyDiskStopped): the immutable URI only when neither -wal
/// nor -shm is left where SQLite keeps them, which for a store reached through a link is beside
/// the file the link names. The file system's answer is given (`readOnly`), so no disk is needed.
@Suite(.tags(.unit)) struct NodeStoreReadOnlyNameTests {
    static func readOnly(_: String) -> Bool { true }

    /// A store's file in `data/` and a link to it from `link/`; neither is created.
    static func linkedStorePaths(in temporary: TemporaryDirectory) throws -> (target: String, link: StoreLocation) {
        for folder in ["/data", "/link"] {
            try FileManager.default.createDirectory(atPath: temporary.path + folder, withIntermediateDirectories: true)
        }
        return (temporary.path + "/data/node.db", StoreLocation(path: temporary.path + "/link/node.db", source: .flag, ownsDirectory: false))
    }

    static func requireURIs() throws {
        try #require(NodeStore.understandsURIs,
                     "this SQLite is built without SQLITE_USE_URI: a store on a read-only file system is always opened by its path")
    }

    /// A node killed with a store reached through a link leaves its -wal beside the link's target:
    /// the plain open (which reads the WAL's commits) is kept, not `immutable=1` (which skips them).
    @Test func aLinkedStoresWALIsLookedForBesideTheFileTheLinkNames() throws {
        try Self.requireURIs()
        let temporary = TemporaryDirectory()
        defer { temporary.remove() }
        let manager = FileManager.default
        let (target, link) = try Self.linkedStorePaths(in: temporary)
        try manager.createSymbolicLink(atPath: link.path, withDestinationPath: target)

        // A running node, as one killed leaves it: SQLite writes its -wal and -shm beside the target.
        let store = try NodeStore.open(link)
        try store.recordOwnID(OwnID(id: .random(), window: IDWindow(start: 0, end: 900)))
        #expect(manager.fileExists(atPath: target + "-wal") && manager.fileExists(atPath: target + "-shm"))
        #expect(!manager.fileExists(atPath: link.path + "-wal") && !manager.fileExists(atPath: link.path + "-shm"))
        #expect(NodeStore.readOnlyName(link, readOnly: Self.readOnly) == link.path)
        withExtendedLifetime(store) {}
    }

    /// Either file beside the target keeps the plain open; neither gives the immutable URI, and
    /// stray files beside the link (which SQLite never reads) do not count.
    @Test func eitherFileBesideTheTargetKeepsThePlainOpen() throws {
        try Self.requireURIs()
        let temporary = TemporaryDirectory()
        defer { temporary.remove() }
        let manager = FileManager.default
        let (target, link) = try Self.linkedStorePaths(in: temporary)
        #expect(manager.createFile(atPath: target, contents: Data()))
        try manager.createSymbolicLink(atPath: link.path, withDestinationPath: target)
        let immutable = "file:" + link.path + "?immutable=1"

        #expect(NodeStore.readOnlyName(link, readOnly: Self.readOnly) == immutable)
        #expect(NodeStore.readOnlyName(link, readOnly: { _ in false }) == link.path)
        for name in ["-wal", "-shm"] {
            #expect(manager.createFile(atPath: target + name, contents: Data()))
            #expect(NodeStore.readOnlyName(link, readOnly: Self.readOnly) == link.path, "\(name) beside the target")
            try manager.removeItem(atPath: target + name)
            #expect(manager.createFile(atPath: link.path + name, contents: Data()))
            #expect(NodeStore.readOnlyName(link, readOnly: Self.readOnly) == immutable, "\(name) beside the link only")
            try manager.removeItem(atPath: link.path + name)
        }
    }
}
