import Foundation
import IDRotation
import Testing
import TestTiers
import TracerTestSupport

extension TracerNodeTests {
    /// A node stopped cleanly (SQLite removed the store's -wal and -shm files) whose disk then
    /// turned read-only (an SD card that failed while the node was off): what the store holds can
    /// still be read, and a command that must write says so before it asks anything.
    @Suite(.tags(.endToEnd)) struct NodeReadOnlyDiskStopped {
        /// A store of three seeded days on a fresh ext4 disk, closed cleanly, then the disk failed
        /// into read-only; `body` gets the disk, the database's path and the scratch home.
        static func withStoppedStoreOnAFailedDisk(_ body: (FailingDisk, String, Scratch) throws -> Void) throws {
            let scratch = try Scratch()
            defer { scratch.remove() }
            let disk = try FailingDisk(at: scratch.file("disk"), megabytes: 16)
            defer { if let problem = disk.remove() { Issue.record(Comment(rawValue: problem)) } }
            let db = disk.path + "/node.db"
            // TracerSimulator writes through the real store and ends, closing it as a stopped node does.
            try Products.seed(db, home: scratch.path)
            try #require(!Check.exists(db + "-wal") && !Check.exists(db + "-shm"),
                         "the seeded store was not closed cleanly: \((try? FileManager.default.contentsOfDirectory(atPath: disk.path)) ?? [])")
            try body(disk, db, scratch)
        }

        @Test(.timeLimit(.minutes(2)))
        func aCleanlyStoppedStoreOnADiskTurnedReadOnlyCanStillBeRead() throws {
            // Read there only as a URI with immutable=1, which GRDB's open leaves to SQLITE_USE_URI.
            try #require(NodeStore.understandsURIs,
                         "this SQLite is built without SQLITE_USE_URI, so a cleanly stopped store on a read-only file system cannot be read (NodeStore.readOnlyName)")
            try Self.withStoppedStoreOnAFailedDisk { disk, db, scratch in
                let home = scratch.path
                let ids = try Products.tracer(["ids", "--json", "--reveal", "--db", db], home: home)
                let encounters = try Products.tracer(["encounters", "--json", "--reveal", "--db", db], home: home)
                try #require(ids.exitCode == 0 && encounters.exitCode == 0, "\(ids)\n\(encounters)")
                try disk.fail()

                // Read as before, without the -shm SQLite cannot create there.
                let idsAfter = try Products.tracer(["ids", "--json", "--reveal", "--db", db], home: home)
                #expect(idsAfter.exitCode == 0 && idsAfter.stdout == ids.stdout, "\(idsAfter)")
                let encountersAfter = try Products.tracer(["encounters", "--json", "--reveal", "--db", db], home: home)
                #expect(encountersAfter.exitCode == 0 && encountersAfter.stdout == encounters.stdout, "\(encountersAfter)")
                let export = try Products.tracer(["export", "--db", db], home: home)
                #expect(export.exitCode == 0 && Check.fullHexIDs(in: export.stdout).isSuperset(of: Check.fullHexIDs(in: ids.stdout)), "\(export)")
                #expect(!Check.fullHexIDs(in: ids.stdout).isEmpty, "the seeded store holds no id: \(ids)")
                // Status leads with the read-only disk (exit 1) and still shows what the store holds.
                let status = try Products.tracer(["status", "--db", db], home: home)
                #expect(status.exitCode == 1 && status.stdout.hasPrefix("Node:           not recording: the file system holding \(db) is read-only"),
                        "\(status)")
                #expect(status.stdout.contains("Latest own id:"), "status shows nothing the store holds: \(status)")
                #expect(!Check.exists(db + "-shm") && !Check.exists(db + "-wal"))
            }
        }

        /// `tracer report` must keep its upload in the store (the idempotency key before it sends,
        /// the receipt after): on a read-only disk it fails with the store's message before it
        /// asks which kind, shows what it would upload or asks to upload, at a terminal or not.
        @Test(.timeLimit(.minutes(2)))
        func reportOnADiskTurnedReadOnlySaysSoBeforeAskingAnything() throws {
            try Self.withStoppedStoreOnAFailedDisk { disk, db, scratch in
                try disk.fail()
                let readOnly = StoreError.readOnlyFileSystem(path: db).description
                // Never contacted: the command must end before any request.
                let report = ["report", "--db", db, "--server", "http://127.0.0.1:9", "--code", "CODE-1234"]

                let typed = try KeyReportCycleTests.tracerAtATerminal(scratch, report, typing: "ids\nyes\n")
                #expect(typed.exitCode == 1, "\(typed)")
                #expect(typed.stdout.contains("error: " + readOnly), "\(typed)")
                for question in ["Upload ids or daily keys?", "Upload now?", "This uploads", "You can upload one of two things"] {
                    #expect(!typed.stdout.contains(question), "asked or showed \"\(question)\" before failing: \(typed)")
                }

                let withoutTerminal = try Products.tracer(report, home: scratch.path)
                #expect(withoutTerminal.exitCode == 1 && withoutTerminal.stdout.isEmpty && withoutTerminal.stderrLines == ["error: " + readOnly],
                        "\(withoutTerminal)")
                let withYes = try Products.tracer(report + ["--yes"], home: scratch.path)
                #expect(withYes.exitCode == 1 && withYes.stdout.isEmpty && withYes.stderrLines == ["error: " + readOnly], "\(withYes)")
            }
        }

        /// `tracer forget` on a read-only disk can neither erase nor remove anything: it says so
        /// (nothing deleted, how to mend the disk) before it asks, at a terminal or not, and the
        /// store stays whole and readable.
        @Test(.timeLimit(.minutes(2)))
        func forgetOnADiskTurnedReadOnlySaysNothingWasDeletedBeforeAsking() throws {
            try Self.withStoppedStoreOnAFailedDisk { disk, db, scratch in
                let before = try Products.tracer(["ids", "--json", "--reveal", "--db", db], home: scratch.path)
                try #require(before.exitCode == 0, "\(before)")
                try disk.fail()
                let refusal = "error: Nothing was deleted: the file system holding \(db) is read-only"
                let forget = ["forget", "--db", db]

                let typed = try KeyReportCycleTests.tracerAtATerminal(scratch, forget, typing: "yes\n")
                #expect(typed.exitCode == 1 && typed.stdout.contains(refusal) && !typed.stdout.contains("Type 'yes'"), "\(typed)")
                for run in [try Products.tracer(forget, home: scratch.path), try Products.tracer(forget + ["--yes"], home: scratch.path)] {
                    #expect(run.exitCode == 1 && run.stdout.isEmpty && run.stderrLines.count == 1, "\(run)")
                    #expect(run.stderrLines.first?.hasPrefix(refusal) == true && run.stderr.contains("fsck"), "\(run)")
                }
                #expect(Check.exists(db))
                let after = try Products.tracer(["ids", "--json", "--reveal", "--db", db], home: scratch.path)
                #expect(after.exitCode == 0 && after.stdout == before.stdout, "\(after)")
            }
        }
    }
}
