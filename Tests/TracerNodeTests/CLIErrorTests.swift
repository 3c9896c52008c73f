import Foundation
import IDRotation
import Testing
import TestTiers
import TracerTestSupport

extension TracerNodeTests {
    /// One usage mistake: the arguments, a word the error must name, and the usage line expected.
    struct UsageCase: Sendable, CustomTestStringConvertible {
        var arguments: [String]
        var names: String
        var usage: String
        var testDescription: String { "tracer " + arguments.joined(separator: " ") }
    }

    /// Usage mistakes: exit code 2, the usage on stderr, nothing on stdout.
    @Suite(.tags(.endToEnd)) struct ArgumentErrors {
        @Test(arguments: [
            UsageCase(arguments: ["frobnicate"], names: "frobnicate", usage: "Usage: tracer <subcommand>"),
            UsageCase(arguments: ["ids", "--no-such-option"], names: "--no-such-option", usage: "Usage: tracer ids"),
            UsageCase(arguments: ["purge", "--retention-days", "40"], names: "--retention-days", usage: "Usage: tracer purge"),
            UsageCase(arguments: ["purge", "--retention-days", "0"], names: "--retention-days", usage: "Usage: tracer purge"),
            UsageCase(arguments: ["purge", "--own-id-retention-days", "20", "--retention-days", "10"],
                      names: "--own-id-retention-days", usage: "Usage: tracer purge"),
            UsageCase(arguments: ["encounters", "--json", "extra-arg"], names: "extra-arg", usage: "Usage: tracer encounters"),
        ])
        func usageErrorExitsWith2(_ usage: UsageCase) throws {
            let scratch = try Scratch()
            defer { scratch.remove() }
            let result = try Products.tracer(usage.arguments, home: scratch.path)
            #expect(result.exitCode == 2 && !result.signaled, "\(result)")
            #expect(result.stdout.isEmpty, "\(result)")
            #expect(result.stderr.contains(usage.usage), "\(result)")
            #expect(result.stderr.contains(usage.names), "\(result)")
            #expect(!result.stderr.contains("Fatal error"), "\(result)")
            // A usage mistake must not create a database at the default location either.
            #expect(!Check.exists(scratch.path + "/xdg-data/tracer/tracer.db"))
        }
    }

    /// Failures the user can act on: exit code 1 and exactly one plain line on stderr.
    @Suite(.tags(.endToEnd)) struct UserFacingFailures {
        /// The shape every user-facing failure must have.
        static func expectOneErrorLine(_ result: ProcessResult, mentioning phrases: [String],
                                       sourceLocation: SourceLocation = #_sourceLocation) {
            #expect(result.exitCode == 1 && !result.signaled, "\(result)", sourceLocation: sourceLocation)
            #expect(result.stderrLines.count == 1, "\(result)", sourceLocation: sourceLocation)
            #expect(result.stderr.hasPrefix("error: "), "\(result)", sourceLocation: sourceLocation)
            for phrase in phrases {
                #expect(result.stderr.contains(phrase), "missing \"\(phrase)\": \(result)", sourceLocation: sourceLocation)
            }
            for crash in ["Fatal error", "Stack dump", "Current stack trace", "#0 ", "Swift runtime failure"] {
                #expect(!result.stderr.contains(crash), "\(result)", sourceLocation: sourceLocation)
                #expect(!result.stdout.contains(crash), "\(result)", sourceLocation: sourceLocation)
            }
        }

        @Test func randomBytesAreNotATracerDatabase() throws {
            let scratch = try Scratch()
            defer { scratch.remove() }
            let path = scratch.file("noise.db")
            var generator = SystemRandomNumberGenerator()
            var noise = (0..<8192).map { _ in UInt8.random(in: .min ... .max, using: &generator) }
            // Never start with SQLite's magic header, however unlikely.
            noise[0] = 0x00
            try #require(FileManager.default.createFile(atPath: path, contents: Data(noise)))
            for arguments in [["ids"], ["encounters"], ["export"], ["purge"]] {
                let result = try Products.tracer(arguments + ["--db", path], home: scratch.path)
                Self.expectOneErrorLine(result, mentioning: ["not a Tracer database"])
            }
            #expect(try Check.bytes(path) == Data(noise), "tracer changed a file that is not its own")
        }

        @Test func otherProgramsSQLiteDatabaseIsRefused() throws {
            let scratch = try Scratch()
            defer { scratch.remove() }
            let path = scratch.file("other.sqlite")
            _ = try Check.python("""
                import sqlite3, sys
                c = sqlite3.connect(sys.argv[1])
                c.execute("CREATE TABLE recipes (name TEXT, minutes INTEGER)")
                c.execute("INSERT INTO recipes VALUES ('soup', 30)")
                c.commit()
                c.close()
                """, [path], home: scratch.path)
            let before = try Check.bytes(path)
            for arguments in [["ids"], ["encounters", "--json"], ["purge"], ["export"]] {
                let result = try Products.tracer(arguments + ["--db", path], home: scratch.path)
                Self.expectOneErrorLine(result, mentioning: ["not a Tracer database"])
            }
            #expect(try Check.bytes(path) == before, "tracer changed another program's database")
        }

        @Test func newerSchemaIsRefusedAndLeftUnchanged() throws {
            let scratch = try Scratch()
            defer { scratch.remove() }
            let path = scratch.file("future.db")
            try Products.seed(path, home: scratch.path)
            _ = try Check.python("""
                import sqlite3, sys
                c = sqlite3.connect(sys.argv[1])
                c.execute("INSERT INTO grdb_migrations (identifier) VALUES ('v99: from the future')")
                c.commit()
                c.close()
                """, [path], home: scratch.path)
            let rowsProgram = """
                import sqlite3, sys
                c = sqlite3.connect(sys.argv[1])
                for table in ["grdb_migrations", "own_ids", "encounters", "node_state"]:
                    print(table, repr(c.execute("SELECT * FROM " + table + " ORDER BY 1").fetchall()))
                c.close()
                """
            let rowsBefore = try Check.python(rowsProgram, [path], home: scratch.path).stdout
            let bytesBefore = try Check.bytes(path)
            #expect(rowsBefore.contains("v99: from the future"))

            for arguments in [["ids"], ["encounters"], ["purge"], ["export"]] {
                let bytesBeforeCommand = try Check.bytes(path)
                let result = try Products.tracer(arguments + ["--db", path], home: scratch.path)
                Self.expectOneErrorLine(result, mentioning: ["newer version"])
                #expect(try Check.bytes(path) == bytesBeforeCommand, "`tracer \(arguments.joined(separator: " "))` changed the file")
            }
            let rowsAfter = try Check.python(rowsProgram, [path], home: scratch.path).stdout
            #expect(rowsAfter == rowsBefore)
            #expect(try Check.bytes(path) == bytesBefore)
        }

        /// `forget --yes` pointed at a file that is not a Tracer database (a mistyped --db) must
        /// refuse, not delete someone else's file.
        @Test func forgetRefusesAFileThatIsNotATracerDatabase() throws {
            let scratch = try Scratch()
            defer { scratch.remove() }
            let noise = scratch.file("noise.bin")
            var generator = SystemRandomNumberGenerator()
            let noiseBytes = Data((0..<4096).map { index in index == 0 ? 0 : UInt8.random(in: .min ... .max, using: &generator) })
            try #require(FileManager.default.createFile(atPath: noise, contents: noiseBytes))
            let other = scratch.file("other.sqlite")
            _ = try Check.python("""
                import sqlite3, sys
                c = sqlite3.connect(sys.argv[1])
                c.execute("CREATE TABLE notes (body TEXT)")
                c.execute("INSERT INTO notes VALUES ('keep me')")
                c.commit()
                c.close()
                """, [other], home: scratch.path)
            for path in [noise, other] {
                let result = try Products.tracer(["forget", "--yes", "--db", path], home: scratch.path)
                Self.expectOneErrorLine(result, mentioning: ["not a Tracer database"])
                #expect(Check.exists(path), "`tracer forget --yes` deleted \(path), which is not a Tracer database")
            }
        }

        @Test func forgetWithoutTerminalNeedsYes() throws {
            let scratch = try Scratch()
            defer { scratch.remove() }
            let path = scratch.file("node.db")
            try Products.seed(path, home: scratch.path)
            let before = try Check.openStore(path).counts()
            #expect(before.ownIDs > 0 && before.encounters > 0)

            // The runner gives every child /dev/null as stdin: not a terminal.
            let result = try Products.tracer(["forget", "--db", path], home: scratch.path)
            Self.expectOneErrorLine(result, mentioning: ["--yes"])
            #expect(Check.exists(path))
            #expect(try Check.openStore(path).counts() == before)
        }
    }
}
