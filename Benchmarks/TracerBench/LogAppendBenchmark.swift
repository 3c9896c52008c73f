import Foundation
import PositiveListFormat
import TracerCore
import TransparencyLog

/// Issue 39's publication target: appending `batch` entries to logs of growing size costs the
/// same, since the appender reads only the log's right edge. A log of size n is stood for by a
/// right edge of that size (the partial tile of each level and the partial bundle; the hashes of
/// the levels above 0 are random, which changes no work), so a log of 10 million entries needs no
/// 10 million appends first. Each size is timed `rounds` times; the best and the median are
/// printed with their ratio to the empty log's, in the same run; then the files of one append are
/// written as publication writes them (`AtomicFile.writeAll`: every temporary file, then an fsync
/// of each, then the renames, then an fsync of each directory) into `directory`, timed once.
struct LogAppendBenchmark {
    let directory: String
    let batch: Int
    let sizes: [UInt64]
    let rounds: Int

    func run() throws {
        say("# Log append: \(batch) entries of 40 bytes onto logs of each size (\(Date()))")
        var generator = SplitMix64(seed: 39)
        let entries = (0..<batch).map { index in Data((0..<40).map { _ in UInt8.random(in: 0...255, using: &generator) }) + Data("\(index)".utf8) }
        var baseline: Double?
        say("| log size | append: best | median | median / empty log's | files | bytes | writing them (AtomicFile) |")
        say("|---|---|---|---|---|---|---|")
        for size in sizes {
            let edge = try Self.rightEdge(size: size, generator: &generator)
            var times: [Double] = []
            var writes: [TileWrite] = []
            for _ in 0..<rounds {
                let started = ContinuousClock.now
                writes = try LogAppender.append(entries, to: edge).writes
                times.append(seconds(ContinuousClock.now - started))
            }
            let root = directory + "/log-append-\(size)"
            let writing = ContinuousClock.now
            let files = writes.map { (bytes: [UInt8]($0.bytes), path: root + "/" + $0.path) }
            for parent in Set(files.map { ($0.path as NSString).deletingLastPathComponent }) {
                try FileManager.default.createDirectory(atPath: parent, withIntermediateDirectories: true)
            }
            try AtomicFile.writeAll(files)
            let written = seconds(ContinuousClock.now - writing)
            try? FileManager.default.removeItem(atPath: root)
            times.sort()
            let median = times[times.count / 2]
            if baseline == nil { baseline = median }
            say("| \(grouped(Int(size))) | \(format(times[0], 3)) s | \(format(median, 3)) s | \(format(median / baseline!, 2))× | \(writes.count) | "
                + "\(grouped(writes.reduce(0) { $0 + $1.bytes.count })) | \(format(written, 2)) s |")
        }
        say("")
    }

    /// A right edge of a log of `size` entries: random entries in the partial bundle (their leaf
    /// hashes make the partial level-0 tile) and random hashes in the partial tiles above.
    static func rightEdge(size: UInt64, generator: inout SplitMix64) throws -> LogRightEdge {
        let levels = TileLayout.levelCount(treeSize: size)
        let bundle = (0..<TileLayout.partialWidth(level: 0, treeSize: size)).map { index in
            Data((0..<40).map { _ in UInt8.random(in: 0...255, using: &generator) }) + Data("edge \(index)".utf8)
        }
        var hashes: [[MerkleHash]] = [bundle.map { MerkleTree.leafHash($0) }]
        for level in 1..<max(levels, 1) {
            hashes.append((0..<TileLayout.partialWidth(level: level, treeSize: size)).map { _ in
                MerkleHash(bytes: (0..<32).map { _ in UInt8.random(in: 0...255, using: &generator) })!
            })
        }
        return try LogRightEdge(treeSize: size, partialTileHashes: size == 0 ? [] : hashes, partialBundleEntries: bundle)
    }
}
