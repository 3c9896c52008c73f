import Foundation
import Testing
import TestTiers
import TracerTestSupport

extension TracerNodeTests {
    /// The read-only tests' loop-mounted ext4 (`FailingDisk`) goes away whole: its image is deleted
    /// only once nothing is mounted at its path, and a mount that stays is said, with the image kept.
    @Suite(.tags(.integration)) struct FailingDiskRemoval {
        /// A tmpfs mounted over the disk: the first `umount` takes the tmpfs and exits 0, the disk
        /// still mounted beneath it.
        @Test func aDiskUnderAnotherMountIsUnmountedBeforeItsImageIsDeleted() throws {
            let scratch = try Scratch()
            defer { scratch.remove() }
            let disk = try FailingDisk(at: scratch.file("disk"), megabytes: 8)
            defer { _ = Unmount.everything(at: disk.path) }
            let over = try Tmpfs(at: disk.path, megabytes: 1)
            defer { over.unmount() }

            let problem = disk.remove()
            #expect(problem == nil)
            #expect(!Unmount.isMountPoint(disk.path), "the ext4 image is still mounted at \(disk.path) after remove()")
            #expect(!FileManager.default.fileExists(atPath: disk.path + ".img"))
        }

        /// An unmount that never works: the image stays, and remove() says so.
        @Test func aDiskThatStaysMountedKeepsItsImageAndSaysSo() throws {
            let scratch = try Scratch()
            defer { scratch.remove() }
            let disk = try FailingDisk(at: scratch.file("disk"), megabytes: 8)
            defer { disk.remove() }

            let refusing: Unmount.Command = { _ in TracerTestSupport.ProcessResult(exitCode: 32, stdout: "", stderr: "umount: target is busy.") }
            let problem = try #require(disk.remove(unmounting: refusing))
            #expect(problem.contains("still mounted") && problem.contains(disk.path + ".img") && problem.contains("target is busy"), "\(problem)")
            #expect(Unmount.isMountPoint(disk.path))
            #expect(FileManager.default.fileExists(atPath: disk.path + ".img"), "the image of a mounted disk was deleted")

            // A busy disk (a file open on it) is taken away lazily once the retries are spent.
            let open = FileHandle(forWritingAtPath: disk.path + "/held") ?? {
                FileManager.default.createFile(atPath: disk.path + "/held", contents: nil)
                return FileHandle(forWritingAtPath: disk.path + "/held")
            }()
            defer { try? open?.close() }
            #expect(disk.remove() == nil)
            #expect(!Unmount.isMountPoint(disk.path))
            #expect(!FileManager.default.fileExists(atPath: disk.path + ".img"))
        }
    }
}
