import Foundation
import PositiveListFormat
import ServerStorage
import TracerCore

/// The batch lifecycle on PostgreSQL, written once for ids and daily keys: a pending member (an
/// id or a key) is a row whose `batch` is NULL; recording a batch inserts its row and marks
/// exactly the members it publishes, in one transaction; expiring a batch forgets its members,
/// and the pending ones that left the retention period unpublished.
struct PostgresBatchLedger: Sendable {
    /// `batches` or `key_batches`.
    let batchTable: String
    /// `submitted_ids` or `submitted_keys`.
    let memberTable: String
    /// The member's primary key: `id` (bigint) or `key` (bytea).
    let memberColumn: String
    let memberArrayType: String
    /// The batch row's columns after `number, range_start, range_end`.
    let recordColumns: [String]
    /// The column keeping what the batch published (``PublishedBatchContent.swift``), and what
    /// counts its records.
    let contentColumn: String
    let countColumn: String
    /// When a pending member left the retention period, `$1` being the cutoff.
    let pendingExpiredCondition: String

    static let ids = PostgresBatchLedger(
        batchTable: "batches", memberTable: "submitted_ids", memberColumn: "id", memberArrayType: "bigint[]",
        recordColumns: ["id_count", "last_submission", "published_at"], contentColumn: "entries", countColumn: "id_count",
        pendingExpiredCondition: "valid_until <= $1")

    static let keys = PostgresBatchLedger(
        batchTable: "key_batches", memberTable: "submitted_keys", memberColumn: "key", memberArrayType: "bytea[]",
        recordColumns: ["key_count", "fake_key_count", "published_at"], contentColumn: "records",
        countColumn: "key_count + fake_key_count",
        // Day d ends at (d + 1) × 86400.
        pendingExpiredCondition: "(day + 1) * 86400 <= $1")

    private var columns: [String] { ["number", "range_start", "range_end"] + recordColumns }

    func nextNumber(_ connection: PostgresConnection) throws -> UInt64 {
        UInt64(try connection.exec("SELECT coalesce(max(number), 0) + 1 FROM \(batchTable)").first!.int(0))
    }

    /// Records a batch with its `content` (`byte_count` 0 and an empty `sha256`: it has no
    /// file; those columns describe only the files of batches recorded before version 4), and
    /// marks exactly `members` published, in one transaction; refuses (false, nothing changed)
    /// when its number or one of its members was taken by another publisher meanwhile. `values`
    /// are the batch row's, in ``columns`` order.
    func record(
        _ values: [PostgresValue], content: [UInt8], members: PostgresValue, memberCount: Int, _ connection: PostgresConnection
    ) throws -> Bool {
        try connection.exec("BEGIN ISOLATION LEVEL READ COMMITTED")
        do {
            var recorded = try connection.exec("SELECT 1 FROM \(batchTable) WHERE number >= $1", [values[0]]).rows.isEmpty
            if recorded {
                let row = values + [.bytes(content)]
                let placeholders = row.indices.map { "$\($0 + 1)" }.joined(separator: ", ")
                try connection.exec(
                    "INSERT INTO \(batchTable) (\((columns + [contentColumn, "byte_count", "sha256"]).joined(separator: ", "))) VALUES (\(placeholders), 0, ''::bytea)",
                    row)
                let marked = try connection.exec(
                    "UPDATE \(memberTable) SET batch = $1 WHERE batch IS NULL AND \(memberColumn) = ANY($2::\(memberArrayType))",
                    [values[0], members]).affectedRowCount
                recorded = marked == memberCount
            }
            try connection.exec(recorded ? "COMMIT" : "ROLLBACK")
            return recorded
        } catch let error as PostgresError where error.isUniqueViolation {
            // Another publisher inserted the same number first.
            _ = try? connection.exec("ROLLBACK")
            return false
        } catch {
            _ = try? connection.exec("ROLLBACK")
            throw error
        }
    }

    /// Marks live batches whose every member's window ended by `cutoff` as expired and forgets
    /// their members and what they published, and the pending members that left the retention
    /// period; returns the batches' numbers, in order. Runs inside the caller's transaction.
    func expire(endingBy cutoff: UnixSeconds, now: UnixSeconds, _ connection: PostgresConnection) throws -> [UInt64] {
        let numbers = try connection.exec(
            "UPDATE \(batchTable) SET expired_at = $2, \(contentColumn) = NULL WHERE expired_at IS NULL AND range_end <= $1 RETURNING number",
            [.int(cutoff), .int(now)]).all.map { try $0.int(0) }.sorted()
        if !numbers.isEmpty {
            try connection.exec("DELETE FROM \(memberTable) WHERE batch = ANY($1::bigint[])", [.intArray(numbers)])
        }
        try connection.exec("DELETE FROM \(memberTable) WHERE batch IS NULL AND \(pendingExpiredCondition)", [.int(cutoff)])
        return numbers.map { UInt64($0) }
    }

    /// The live batches' rows, in ``columns`` order, by number.
    func live(_ connection: PostgresConnection) throws -> [PostgresRow] {
        try connection.exec("SELECT \(columns.joined(separator: ", ")) FROM \(batchTable) WHERE expired_at IS NULL ORDER BY number").all
    }

    /// The live batches numbered after `number`: each one's number, record count and content
    /// (NULL when recorded without it), by number.
    func liveContents(after number: UInt64, _ connection: PostgresConnection) throws -> [PostgresRow] {
        try connection.exec(
            "SELECT number, \(countColumn), \(contentColumn) FROM \(batchTable) WHERE expired_at IS NULL AND number > $1 ORDER BY number",
            [.int(Int64(clamping: number))]).all
    }

    /// The live batches recorded without their content (by a tracer-server from before schema
    /// version 4), by number.
    func listingsWithoutContent(kind: PositiveListIndex.BatchKind, _ connection: PostgresConnection) throws -> [PositiveListIndex.BatchListing] {
        try connection.exec(
            "SELECT number, range_start, range_end, byte_count, sha256 FROM \(batchTable) WHERE expired_at IS NULL AND \(contentColumn) IS NULL ORDER BY number"
        ).all.map { row in
            PositiveListIndex.BatchListing(
                number: UInt64(try row.int(0)), timeRange: PublishedTimeRange(start: try row.int(1), end: try row.int(2)),
                byteCount: Int(try row.int(3)), sha256: try row.bytes(4), kind: kind)
        }
    }

    /// Gives the batches of `contents` (number to content, read from their files) their
    /// content, unless another instance did meanwhile or the batch expired (whose content must
    /// stay forgotten): each instance fills what its own files allow.
    func fill(_ contents: [UInt64: Data], _ connection: PostgresConnection) throws {
        for (number, content) in contents {
            try connection.exec(
                "UPDATE \(batchTable) SET \(contentColumn) = $1 WHERE number = $2 AND \(contentColumn) IS NULL AND expired_at IS NULL",
                [.bytes([UInt8](content)), .int(Int64(number))])
        }
    }
}
