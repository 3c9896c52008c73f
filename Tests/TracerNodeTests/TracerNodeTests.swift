import Foundation
import IDRotation
import Synchronization
import Testing
import TestTiers
import TracerTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// Every suite of this target runs inside this one, serialized: the crash-safety test measures
/// how much a killed writer loses per second, and CLI processes competing for the 2 cores would
/// only add noise to that.
@Suite(.serialized) enum TracerNodeTests {}

/// The node tests' own helpers, beside the shared ones in TracerTestSupport.
extension Check {
    /// Every run of exactly 16 hex digits in `text` (a full userId as `--reveal` and export print it).
    static func fullHexIDs(in text: String) -> Set<String> {
        var found: Set<String> = []
        var run: [Character] = []
        func flush() {
            if run.count == 16 { found.insert(String(run).lowercased()) }
            run.removeAll()
        }
        for character in text {
            if character.isHexDigit { run.append(character) } else { flush() }
        }
        flush()
        return found
    }

    /// Runs a short python3 program with sqlite3 (for databases made by "another program").
    static func python(_ program: String, _ arguments: [String], home: String) throws -> ProcessResult {
        let python = try #require(
            ["/usr/bin/python3", "/usr/local/bin/python3"].first { FileManager.default.isExecutableFile(atPath: $0) }
                ?? RequiredTool.executableInPath("python3"),
            "python3 is needed to make SQLite files that tracer did not write")
        let result = try Products.run(python, ["-c", program] + arguments, home: home)
        try #require(result.exitCode == 0 && !result.signaled, "python3 failed: \(result)")
        return result
    }

    static func bytes(_ path: String) throws -> Data {
        try Data(contentsOf: URL(fileURLWithPath: path))
    }

    static func exists(_ path: String) -> Bool { FileManager.default.fileExists(atPath: path) }

    static func openStore(_ path: String) throws -> NodeStore {
        try NodeStore.open(StoreLocation(path: path, source: .flag, ownsDirectory: false))
    }
}
