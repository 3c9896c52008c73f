import Foundation
import GRDB
import PositiveListFormat
import TracerCore

/// The parts of the batch lifecycle the SQLite store keeps alike for ids and daily keys: batch
/// numbers, the batch rows and their expiry. What a batch publishes is
/// tracked differently by kind (ids by a submission watermark over `pending_histories`, keys by
/// marking `submitted_keys`), so recording stays with each kind.
struct SQLiteBatchLedger: Sendable {
    /// `batches` or `key_batches`.
    let batchTable: String
    /// The batch row's columns after `number, range_start, range_end`.
    let recordColumns: [String]
    /// The column keeping what the batch published (``PublishedBatchContent.swift``), and the
    /// one counting its records.
    let contentColumn: String
    let countColumn: String

    static let ids = SQLiteBatchLedger(
        batchTable: "batches", recordColumns: ["id_count", "last_submission", "published_at"], contentColumn: "entries",
        countColumn: "id_count")
    static let keys = SQLiteBatchLedger(
        batchTable: "key_batches", recordColumns: ["key_count", "fake_key_count", "published_at"], contentColumn: "records",
        countColumn: "key_count + fake_key_count")

    private var columns: [String] { ["number", "range_start", "range_end"] + recordColumns }

    func nextNumber(_ db: Database) throws -> UInt64 {
        UInt64(try Int64.fetchOne(db, sql: "SELECT max(number) FROM \(batchTable)") ?? 0) + 1
    }

    /// Whether `number` or a later one was recorded: then a batch numbered `number` was cut
    /// before another publisher's, and must not be recorded.
    func isTaken(_ number: UInt64, _ db: Database) throws -> Bool {
        try Int64.fetchOne(db, sql: "SELECT count(*) FROM \(batchTable) WHERE number >= ?", arguments: [Int64(number)]) != 0
    }

    /// Inserts a batch row; `values` in ``columns`` order, then its content. `byte_count` 0 and an
    /// empty `sha256`: the batch has no file (those columns describe only the files of batches
    /// recorded before schema v6, which the upgrade reads).
    func insert(_ values: StatementArguments, content: Data, _ db: Database) throws {
        let names = columns + [contentColumn]
        let placeholders = names.map { _ in "?" }.joined(separator: ", ")
        try db.execute(
            sql: "INSERT INTO \(batchTable) (\(names.joined(separator: ", ")), byte_count, sha256) VALUES (\(placeholders), 0, X'')",
            arguments: values + [content])
    }

    /// The live batches numbered after `number`: each one's number, record count and content
    /// (NULL when recorded without it), by number.
    func liveContents(after number: UInt64, _ db: Database) throws -> [Row] {
        try Row.fetchAll(
            db, sql: "SELECT number, \(countColumn), \(contentColumn) FROM \(batchTable) WHERE expired_at IS NULL AND number > ? ORDER BY number",
            arguments: [Int64(clamping: number)])
    }

    /// The live batches recorded without their content (by a tracer-server from before schema
    /// v6), by number: a read, so an open with none to fill takes no write lock.
    func listingsWithoutContent(kind: PositiveListIndex.BatchKind, _ db: Database) throws -> [PositiveListIndex.BatchListing] {
        try Row.fetchAll(
            db, sql: "SELECT number, range_start, range_end, byte_count, sha256 FROM \(batchTable) WHERE expired_at IS NULL AND \(contentColumn) IS NULL ORDER BY number"
        ).map { row in
            let digest: Data = row[4]
            return PositiveListIndex.BatchListing(
                number: UInt64(row[0] as Int64), timeRange: PublishedTimeRange(start: row[1], end: row[2]), byteCount: row[3],
                sha256: Array(digest), kind: kind)
        }
    }

    /// Gives the batches of `contents` (number to content, read from their files) their
    /// content, unless another process did meanwhile or the batch expired (whose content must
    /// stay forgotten).
    func fill(_ contents: [UInt64: Data], _ db: Database) throws {
        for (number, content) in contents {
            try db.execute(
                sql: "UPDATE \(batchTable) SET \(contentColumn) = ? WHERE number = ? AND \(contentColumn) IS NULL AND expired_at IS NULL",
                arguments: [content, Int64(number)])
        }
    }

    /// Marks live batches whose every window ended by `cutoff` as expired and forgets what they
    /// published (retention); returns their numbers.
    func expire(endingBy cutoff: UnixSeconds, now: UnixSeconds, _ db: Database) throws -> [Int64] {
        let numbers = try Int64.fetchAll(
            db, sql: "SELECT number FROM \(batchTable) WHERE expired_at IS NULL AND range_end <= ? ORDER BY number", arguments: [cutoff])
        try db.execute(
            sql: "UPDATE \(batchTable) SET expired_at = ?, \(contentColumn) = NULL WHERE expired_at IS NULL AND range_end <= ?",
            arguments: [now, cutoff])
        return numbers
    }

    /// The live batches' rows, in ``columns`` order, by number.
    func live(_ db: Database) throws -> [Row] {
        try Row.fetchAll(db, sql: "SELECT \(columns.joined(separator: ", ")) FROM \(batchTable) WHERE expired_at IS NULL ORDER BY number")
    }
}
