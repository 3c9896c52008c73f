import Foundation
import PositiveListFormat
import Testing
import TestTiers
import ServerTestSupport
import TracerTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// `AtomicFile.writeAll`, the log publication's batch write: every file of a batch appears under
/// its final name whole, or none does when it fails before the renames.
@Suite(.tags(.unit)) struct AtomicFileTests {
    static func scratch() throws -> String {
        let path = (NSTemporaryDirectory() as NSString).appendingPathComponent("tracer-atomic-file-" + UUID().uuidString)
        try FileManager.default.createDirectory(atPath: path + "/a", withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: path + "/b", withIntermediateDirectories: true)
        return path
    }

    static func inode(_ path: String) -> ino_t? {
        var status = stat()
        return stat(path, &status) == 0 ? status.st_ino : nil
    }

    /// The names in `directory` that are temporary files.
    static func temporaries(in directory: String) -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []).filter { $0.hasPrefix(AtomicFile.temporaryPrefix) }
    }

    @Test func writeAllWritesEveryFileAndASecondCallWithTheSameBytesRewritesNothing() throws {
        let root = try Self.scratch()
        defer { try? FileManager.default.removeItem(atPath: root) }
        try AtomicFile.write([9, 9], to: root + "/b/replaced")
        let files: [(bytes: [UInt8], path: String)] = [
            ([1, 2, 3], root + "/a/one"), (Array(repeating: 7, count: 100_000), root + "/a/two"), ([4], root + "/b/replaced"), ([], root + "/b/empty"),
        ]

        let directories = try AtomicFile.writeAll(files)
        #expect(directories == [root + "/a", root + "/b"])
        for file in files {
            #expect(FileManager.default.contents(atPath: file.path).map { [UInt8]($0) } == file.bytes, "\(file.path)")
            let mode = (try FileManager.default.attributesOfItem(atPath: file.path)[.posixPermissions] as? Int) ?? 0
            #expect(mode == 0o644, "\(file.path): \(String(mode, radix: 8))")
        }
        #expect(Self.temporaries(in: root + "/a").isEmpty && Self.temporaries(in: root + "/b").isEmpty)

        // The same bytes again: every file stays the one written (a rewrite renames a new inode
        // over it); one changed file is replaced.
        let inodes = files.map { Self.inode($0.path) }
        #expect(try AtomicFile.writeAll(files) == [root + "/a", root + "/b"])
        #expect(files.map { Self.inode($0.path) } == inodes)
        var changed = files
        changed[0].bytes = [1, 2, 4]
        try AtomicFile.writeAll(changed)
        #expect(Self.inode(files[0].path) != inodes[0])
        #expect(FileManager.default.contents(atPath: files[0].path).map { [UInt8]($0) } == [1, 2, 4])
        #expect(Array(changed.dropFirst().map { Self.inode($0.path) }) == Array(inodes.dropFirst()))
    }

    /// The third file cannot be created (its directory is missing): the first is not there under
    /// its name and the second, which it was to replace, is as it was. One `write` per file would
    /// have left the first two.
    @Test func aFailurePartwayLeavesNoFileOfTheBatchUnderItsFinalName() throws {
        let root = try Self.scratch()
        defer { try? FileManager.default.removeItem(atPath: root) }
        try AtomicFile.write([9, 9], to: root + "/b/old")
        let files: [(bytes: [UInt8], path: String)] = [([1], root + "/a/new"), ([2], root + "/b/old"), ([3], root + "/missing/third")]

        let error = #expect(throws: FileWriteError.self) { try AtomicFile.writeAll(files) }
        guard case .cannotCreate(let path, _)? = error else { Issue.record("not cannotCreate: \(String(describing: error))"); return }
        #expect(path.hasPrefix(root + "/missing/" + AtomicFile.temporaryPrefix), "\(path)")
        #expect(!FileManager.default.fileExists(atPath: root + "/a/new"))
        #expect(FileManager.default.contents(atPath: root + "/b/old").map { [UInt8]($0) } == [9, 9])
        #expect(Self.temporaries(in: root + "/a").isEmpty && Self.temporaries(in: root + "/b").isEmpty)
    }
}

/// A full disk partway through a batch: `.diskFull` (what the server's "is full" message is made
/// from), no file of the batch under its final name, no temporary file left; once space returns
/// the same batch is written. Mounts a tmpfs: needs root.
@Suite(.tags(.integration), .serialized) struct AtomicFileDiskFullTests {
    @Test func aFullDiskPartwayThroughABatchChangesNoFinalName() throws {
        let root = (NSTemporaryDirectory() as NSString).appendingPathComponent("tracer-atomic-full-" + UUID().uuidString)
        defer { try? FileManager.default.removeItem(atPath: root) }
        let disk = try Tmpfs(at: root, megabytes: 1)
        defer { if let problem = disk.unmount() { Issue.record(Comment(rawValue: problem)) } }
        try AtomicFile.write([9, 9], to: root + "/old")
        // Six of 256 kB: the fourth or so does not fit.
        let files = (0..<6).map { index in (bytes: [UInt8](repeating: UInt8(index), count: 256 * 1024), path: root + "/tile-\(index)") }
            + [(bytes: [1], path: root + "/old")]

        let error = #expect(throws: FileWriteError.self) { try AtomicFile.writeAll(files) }
        guard case .diskFull(let path)? = error else { Issue.record("not diskFull: \(String(describing: error))"); return }
        #expect(path.hasPrefix(root + "/"), "\(path)")
        let names = try FileManager.default.contentsOfDirectory(atPath: root)
        #expect(names == ["old"], "\(names)")
        #expect(FileManager.default.contents(atPath: root + "/old").map { [UInt8]($0) } == [9, 9])

        let fitting = Array(files.suffix(3))
        try AtomicFile.writeAll(fitting)
        for file in fitting { #expect(FileManager.default.contents(atPath: file.path).map { [UInt8]($0) } == file.bytes, "\(file.path)") }
    }
}
