import Foundation
import Logging
import PositiveListFormat
import PositiveListServer
import SQLiteServerStore
import Synchronization
import TracerCore

/// Issue 13's figure (a): bytes every node downloads per diagnosed person-day, keys against
/// ids, measured on the list log entries (format version 3) the real store and publisher
/// append, each entry's header included; the tiles' hashes and the checkpoint are not counted.
/// (Until issue 39 step 4 this measured the retired batch files and their index listings;
/// BENCHMARKS.md keeps those figures as history.) A simulated day: `uploads` diagnosed people, evenly spread, each uploading 14 days
/// (keys: one per day at 15-minute windows, today's included; ids: the 96 ids of each day),
/// with hourly publication, then publication continues until every key is out (keys wait for
/// their day's ids to expire plus 2 hours). Byte counts do not depend on the build mode.
struct ListBytesBenchmark {
    let directory: String
    let uploadsPerDay: [Int]
    let idUploads: Int
    static let days = 14

    func run() async throws {
        say("# List bytes per diagnosed person-day (\(Date()))")
        say("\(Self.days) days per upload, 15-minute windows, hourly publication; bytes = the log entries of every batch")
        for uploads in uploadsPerDay {
            let (bytes, batches, published) = try await simulate(uploads: uploads, keys: true, padding: 1.0)
            let personDays = uploads * Self.days
            say(String(
                format: "keys, %6d uploads/day: %9d bytes in %3d key batches, %7d keys: %.2f bytes per person-day",
                uploads, bytes, batches, published, Double(bytes) / Double(personDays)))
        }
        let (padded, _, paddedKeys) = try await simulate(uploads: uploadsPerDay.first ?? 1_000, keys: true, padding: 2.0)
        say(String(
            format: "keys, %6d uploads/day, padding 2.0: %9d bytes, %7d keys: %.2f bytes per person-day",
            uploadsPerDay.first ?? 1_000, padded, paddedKeys, Double(padded) / Double((uploadsPerDay.first ?? 1_000) * Self.days)))
        let (idBytes, idBatches, ids) = try await simulate(uploads: idUploads, keys: false, padding: 1.0)
        say(String(
            format: "ids,  %6d uploads/day: %9d bytes in %3d batches, %8d ids: %.2f bytes per person-day",
            idUploads, idBytes, idBatches, ids, Double(idBytes) / Double(idUploads * Self.days)))
    }

    /// Returns the bytes of every batch's log entries, their number, and how
    /// many keys or ids they hold.
    private func simulate(uploads: Int, keys: Bool, padding: Double) async throws -> (Int, Int, Int) {
        let logger = Logger(label: "bench") { _ in SwiftLogNoOpLogHandler() }
        let paths = ServerPaths(dataDirectory: directory + "/list-bytes-\(UUID().uuidString)")
        try FileManager.default.createDirectory(atPath: paths.dataDirectory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: paths.dataDirectory) }
        var configuration = ServerConfiguration(authorities: [AuthorityConfiguration(name: "Bench", token: "benchmark-authority-token-0123456789")])
        configuration.keyPaddingMultiplier = padding
        let store = try ServerStore.open(path: paths.database, publishedDirectory: paths.published)
        let signingKey = try SigningKeyFile.create(at: paths.signingKey)
        // 2027-01-15 00:00 UTC, then an hour at a time.
        let clock = SteppedClock(UTCDay(containing: 1_800_000_000).start)
        let publisher = Publisher(
            store: store, directory: paths.published, signingKey: signingKey,
            retentionSeconds: configuration.retentionSeconds, keySettings: KeyPublicationSettings(configuration),
            // The histories end at the clock's now; this measures bytes, not the wait for them.
            idPublicationDelaySeconds: 0, clock: clock, logger: logger)
        var bytes = 0
        var batches = 0
        var published = 0
        var uploaded = 0
        for hour in 0..<(keys ? 48 : 24) {
            clock.set(UTCDay(containing: 1_800_000_000).start + Int64(hour) * 3_600 + 1_800)
            let now = clock.now()
            let thisHour = hour < 24 ? (uploads * (hour + 1)) / 24 - uploaded : 0
            for _ in 0..<thisHour {
                if keys {
                    let today = UTCDay(containing: now).number
                    let records = (0..<Int64(Self.days)).map {
                        DailyKeyRecord(day: UTCDay(number: today - $0), intervalSeconds: 900, key: DailyKey.random())
                    }
                    _ = try await store.appendKeyHistory(records, credential: .authority(name: "Bench"), idempotencyKey: nil, now: now)
                } else {
                    let entries = (0..<(Self.days * 96)).map { position in
                        let until = now - UnixSeconds(position) * 900
                        return PositiveListEntry(id: UserID.random(), validFrom: until - 900, validUntil: until)
                    }.sorted { $0.id < $1.id }
                    _ = try await store.appendHistory(entries, credential: .authority(name: "Bench"), idempotencyKey: nil, now: now)
                }
            }
            uploaded += thisHour
            clock.set(now + 1_800)
            let report = try await publisher.publish()
            if let batch = report.newKeyBatch, keys {
                let content = try await store.liveBatchContents(idBatchesAfter: UInt64(Int64.max), keyBatchesAfter: batch.number - 1)
                for published in content.keyBatches where published.number == batch.number {
                    bytes += try ListLogEntry.entries(keyBatch: batch.number, records: published.records).reduce(0) { $0 + (try $1.encode()).count }
                }
                batches += 1
                published += batch.keyCount + batch.fakeKeyCount
            }
            if let batch = report.newBatch, !keys {
                let content = try await store.liveBatchContents(idBatchesAfter: batch.number - 1, keyBatchesAfter: UInt64(Int64.max))
                for published in content.idBatches where published.number == batch.number {
                    bytes += try ListLogEntry.entries(idBatch: batch.number, entries: published.entries).reduce(0) { $0 + (try $1.encode()).count }
                }
                batches += 1
                published += batch.idCount
            }
        }
        return (bytes, batches, published)
    }
}

/// A wall clock the simulation sets by hand.
final class SteppedClock: WallClock {
    private let current: Mutex<UnixSeconds>
    init(_ start: UnixSeconds) { current = Mutex(start) }
    func now() -> UnixSeconds { current.withLock { $0 } }
    func set(_ time: UnixSeconds) { current.withLock { $0 = time } }
    func sleep(until time: UnixSeconds) async throws { try await Task.sleep(for: .milliseconds(1)) }
}
