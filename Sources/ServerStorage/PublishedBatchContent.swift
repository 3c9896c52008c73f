import Foundation
import Logging
import PositiveListFormat
import TracerCore

/// What a live id batch published: its entries, sorted by id, as recorded with the batch.
public struct PublishedIDBatch: Sendable, Equatable {
    public let number: UInt64
    public let entries: [PositiveListEntry]

    public init(number: UInt64, entries: [PositiveListEntry]) {
        self.number = number
        self.entries = entries
    }

    /// From a batch row's `entries` (``PendingEntriesBlob``) and `id_count`, on either back end.
    package init(number: UInt64, idCount: Int, content: Data?) throws(ServerStoreError) {
        guard let content, let entries = PendingEntriesBlob.decode(content, idCount: idCount) else {
            throw .batchContentMissing(batch: "batch \(number)")
        }
        self.init(number: number, entries: entries)
    }
}

/// What a live key batch published: its keys, real and fake alike, sorted by key, as recorded
/// with the batch.
public struct PublishedKeyBatch: Sendable, Equatable {
    public let number: UInt64
    public let records: [DailyKeyRecord]

    public init(number: UInt64, records: [DailyKeyRecord]) {
        self.number = number
        self.records = records
    }

    /// From a key batch row's `records` (``PublishedKeysBlob``) and its key count, fake ones
    /// included, on either back end.
    package init(number: UInt64, keyCount: Int, content: Data?) throws(ServerStoreError) {
        guard let content, let records = PublishedKeysBlob.decode(content, keyCount: keyCount) else {
            throw .batchContentMissing(batch: "key batch \(number)")
        }
        self.init(number: number, records: records)
    }
}

/// The live batches' published content that ``SubmissionStore/liveBatchContents(idBatchesAfter:keyBatchesAfter:)``
/// read, each kind in number order.
public struct LiveBatchContents: Sendable, Equatable {
    public var idBatches: [PublishedIDBatch] = []
    public var keyBatches: [PublishedKeyBatch] = []

    package init(idBatches: [PublishedIDBatch] = [], keyBatches: [PublishedKeyBatch] = []) {
        self.idBatches = idBatches
        self.keyBatches = keyBatches
    }
}

/// How `key_batches.records` keeps what a key batch published: one blob of 24-byte records (the
/// 16-byte key, its UTC day and rotation interval as little-endian 32-bit integers, the ranges a
/// key batch can hold), sorted by key, so that the blob's order says nothing of which keys are
/// fake.
package enum PublishedKeysBlob {
    package static let recordByteCount = DailyKey.byteCount + 8

    package static func encode(_ records: [DailyKeyRecord]) -> Data {
        let sorted = records.sorted { $0.key.bytes.lexicographicallyPrecedes($1.key.bytes) }
        var data = Data(capacity: sorted.count * recordByteCount)
        for record in sorted {
            data.append(contentsOf: record.key.bytes)
            withUnsafeBytes(of: UInt32(truncatingIfNeeded: record.day.number).littleEndian) { data.append(contentsOf: $0) }
            withUnsafeBytes(of: UInt32(truncatingIfNeeded: record.intervalSeconds).littleEndian) { data.append(contentsOf: $0) }
        }
        return data
    }

    /// The records of a blob recorded with `keyCount` keys, or nil when it is damaged: another
    /// size, keys out of order, or an interval of zero.
    package static func decode(_ data: Data, keyCount: Int) -> [DailyKeyRecord]? {
        // A damaged count must not trap: it is then no blob's size.
        let (byteCount, overflow) = keyCount.multipliedReportingOverflow(by: recordByteCount)
        guard keyCount >= 0, !overflow, data.count == byteCount else { return nil }
        let bytes = [UInt8](data)
        var records: [DailyKeyRecord] = []
        records.reserveCapacity(keyCount)
        for offset in stride(from: 0, to: bytes.count, by: recordByteCount) {
            let keyBytes = bytes[offset..<offset + DailyKey.byteCount]
            let numbers = bytes.withUnsafeBytes { raw in
                (raw.loadUnaligned(fromByteOffset: offset + DailyKey.byteCount, as: UInt32.self),
                 raw.loadUnaligned(fromByteOffset: offset + DailyKey.byteCount + 4, as: UInt32.self))
            }
            let interval = Int64(UInt32(littleEndian: numbers.1))
            guard interval > 0, let key = try? DailyKey(bytes: keyBytes),
                  records.last.map({ $0.key.bytes.lexicographicallyPrecedes(key.bytes) }) ?? true
            else { return nil }
            records.append(DailyKeyRecord(day: UTCDay(number: Int64(UInt32(littleEndian: numbers.0))), intervalSeconds: interval, key: key))
        }
        return records
    }
}

/// The content of a batch recorded by a tracer-server from before the database kept what each
/// batch published, read from its file, which must be the one recorded (its size and SHA-256,
/// checked by ``PositiveListBatch/init(recorded:listedAs:)``). Each open of the store copies in
/// what the files present allow, best effort (``fill(_:in:logger:)``); from then on the database
/// alone says what such a batch published.
package enum RecordedBatchFile {
    /// The live batches still without content, each kind by number, as one open found them.
    package struct Unfilled: Sendable {
        package var ids: [PositiveListIndex.BatchListing]
        package var keys: [PositiveListIndex.BatchListing]
        package var isEmpty: Bool { ids.isEmpty && keys.isEmpty }
        /// As ``ServerStoreError/batchContentMissing(batch:)`` names them.
        package var names: [String] { ids.map { "batch \($0.number)" } + keys.map { "key batch \($0.number)" } }

        package init(ids: [PositiveListIndex.BatchListing], keys: [PositiveListIndex.BatchListing]) {
            self.ids = ids
            self.keys = keys
        }
    }

    /// After an open's fill: deletes the retired files of formats 1 and 2 (`index.tpli`,
    /// `batches/`, `keys/`) once no live batch is without its content (`stillUnfilled` empty,
    /// read after the fill committed), since the database then holds everything they held; while
    /// one is, keeps them all and says so, since its file is the only copy of what it published.
    ///
    /// Also kept, and said, when a batch file is numbered beyond the last batch of its kind this
    /// database recorded (`lastIDBatch`, `lastKeyBatch`): the files are another database's (a
    /// `status` run without the configuration that names the PostgreSQL database opens an empty
    /// SQLite one in the data directory), which this one cannot vouch for.
    package static func retireFiles(
        in directory: PublishedDirectory, stillUnfilled: Unfilled, lastIDBatch: UInt64, lastKeyBatch: UInt64, logger: Logger
    ) {
        let present = directory.retiredFilesPresent()
        guard !present.isEmpty else { return }
        let names = present.map { $0 == PositiveListIndex.relativePath ? $0 : $0 + "/" }.joined(separator: ", ")
        let files = directory.retiredBatchFileNumbers()
        let foreign = files.ids.filter { $0 > lastIDBatch }.map { "batches/\($0).tplb" } + files.keys.filter { $0 > lastKeyBatch }.map { "keys/\($0).tpkb" }
        func keep(because reason: String, next: String) {
            logger.warning("retired published files kept", metadata: [
                "files": "\(names)", "directory": "\(directory.path)", "reason": "\(reason)", "next": "\(next)",
            ])
        }
        guard foreign.isEmpty else {
            keep(
                because: "\(foreign.sorted().joined(separator: ", ")) beyond the last batch this database recorded: they were published from another database",
                next: "start tracer-server with the configuration that names its database (config.json's database section); that database's open deletes them once it holds what they published")
            return
        }
        guard stillUnfilled.isEmpty else {
            keep(
                because: "\(stillUnfilled.names.joined(separator: ", ")) live without its content in the database; its file is the only copy of what it published",
                next: "restore the file named in the warning before and restart; these files are deleted at the first open that finds every live batch copied in")
            return
        }
        let (removed, failures) = directory.removeRetiredFiles()
        if !removed.isEmpty {
            logger.notice("retired published files deleted: the database holds what they published and the list log replaces them", metadata: [
                "files": "\(removed.joined(separator: ", "))", "directory": "\(directory.path)",
            ])
        }
        for (name, reason) in failures.sorted(by: { $0.key < $1.key }) {
            logger.warning("retired published file not deleted", metadata: [
                "file": "\(directory.path)/\(name)", "reason": "\(reason)",
                "next": "nothing reads it any more: delete it by hand, or let the next start try again",
            ])
        }
    }

    /// What the files of `unfilled` hold, batch number to content, each kind apart; a missing or
    /// damaged file is left out and logged as a warning that names it and says what to do: the
    /// row stays without content, so the log waits at it (and, on SQLite, uploads are refused,
    /// since their ids cannot be checked against it), and the next open tries again.
    package static func fill(_ unfilled: Unfilled, in directory: PublishedDirectory, logger: Logger) -> (ids: [UInt64: Data], keys: [UInt64: Data]) {
        var filled: (ids: [UInt64: Data], keys: [UInt64: Data]) = ([:], [:])
        for listing in unfilled.ids {
            do { filled.ids[listing.number] = try idEntries(of: listing, in: directory) } catch { warn(error, logger) }
        }
        for listing in unfilled.keys {
            do { filled.keys[listing.number] = try keyRecords(of: listing, in: directory) } catch { warn(error, logger) }
        }
        return filled
    }

    private static func warn(_ error: ServerStoreError, _ logger: Logger) {
        logger.warning("published batch not copied into the database", metadata: ["reason": "\(error)"])
    }

    package static func idEntries(of listing: PositiveListIndex.BatchListing, in directory: PublishedDirectory) throws(ServerStoreError) -> Data {
        let path = directory.retiredBatchPath(number: listing.number)
        let file = try read(path)
        do {
            return PendingEntriesBlob.encode(try PositiveListBatch(recorded: file, listedAs: listing).entries)
        } catch {
            throw .publishedBatchUnreadable(path: path, reason: error.description)
        }
    }

    package static func keyRecords(of listing: PositiveListIndex.BatchListing, in directory: PublishedDirectory) throws(ServerStoreError) -> Data {
        let path = directory.retiredKeyBatchPath(number: listing.number)
        let file = try read(path)
        do {
            return PublishedKeysBlob.encode(try PositiveListKeyBatch(recorded: file, listedAs: listing).records)
        } catch {
            throw .publishedBatchUnreadable(path: path, reason: error.description)
        }
    }

    private static func read(_ path: String) throws(ServerStoreError) -> [UInt8] {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw .publishedBatchUnreadable(path: path, reason: FileManager.default.fileExists(atPath: path) ? "it cannot be read" : "it is missing")
        }
        return [UInt8](data)
    }
}
