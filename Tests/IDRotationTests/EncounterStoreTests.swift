import Foundation
import GRDB
@testable import IDRotation
import Testing
import TestTiers
import TracerCore

@Suite(.tags(.unit)) struct EncounterStoreTests {
    @Test func sightingsInAWindowUpdateOneRow() throws {
        let temporary = TemporaryDirectory()
        defer { temporary.remove() }
        let store = try NodeStore.open(temporary.location())
        let peers = (0..<3).map { _ in UserID.random() }
        var batch = SightingBatch()
        for index in 0..<1_000 {
            let peer = peers[index % 3]
            let window: UnixSeconds = index < 500 ? 900 : 1_800
            batch.add(Sighting(peer: peer, ownWindowStart: window, time: window + Int64(index % 400),
                               rssi: Int8(-40 - index % 31)))
        }
        #expect(batch.sightingCount == 1_000)
        #expect(batch.rowCount == 6)
        try store.write(batch)
        let encounters = try store.encounters()
        #expect(encounters.count == 6)
        #expect(encounters.reduce(0) { $0 + $1.sightings } == 1_000)
        for encounter in encounters {
            // 31 and 3 are coprime, so every peer sees every RSSI from -40 to -70.
            #expect(encounter.rssiMin == -70)
            #expect(encounter.rssiMax == -40)
            #expect(encounter.firstSeen >= encounter.ownWindowStart)
        }
    }

    @Test func laterBatchesMergeIntoTheSameRow() throws {
        let temporary = TemporaryDirectory()
        defer { temporary.remove() }
        let store = try NodeStore.open(temporary.location())
        let peer = UserID.random()

        var first = SightingBatch()
        first.add(Sighting(peer: peer, ownWindowStart: 900, time: 1_000, rssi: -60, learnedBy: .read))
        first.add(Sighting(peer: peer, ownWindowStart: 900, time: 1_010, rssi: -50))
        try store.write(first)

        var second = SightingBatch()
        // Written to us, with no RSSI of ours but the peer's own report and TX power.
        second.add(Sighting(peer: peer, ownWindowStart: 900, time: 1_020, txPower: 4, reportedRSSI: -55, learnedBy: .written))
        second.add(Sighting(peer: peer, ownWindowStart: 900, time: 995, rssi: -70))
        try store.write(second)

        let encounter = try #require(try store.encounters().first)
        #expect(try store.counts().encounters == 1)
        #expect(encounter.firstSeen == 995)
        #expect(encounter.lastSeen == 1_020)
        #expect(encounter.duration == 25)
        #expect(encounter.sightings == 4)
        #expect(encounter.rssiMin == -70)
        #expect(encounter.rssiMax == -50)
        #expect(encounter.rssiCount == 3)
        #expect(encounter.rssiMean == -60)
        #expect(encounter.txPower == 4)
        #expect(encounter.reportedRSSI == -55)
        #expect(encounter.learnedBy == [.read, .written])
    }

    @Test func rowsWithoutAnyRSSIKeepNullBounds() throws {
        let temporary = TemporaryDirectory()
        defer { temporary.remove() }
        let store = try NodeStore.open(temporary.location())
        var batch = SightingBatch()
        batch.add(Sighting(peer: .random(), ownWindowStart: 0, time: 5, learnedBy: .written))
        try store.write(batch)
        try store.write(batch)
        let encounter = try #require(try store.encounters().first)
        #expect(encounter.rssiMin == nil && encounter.rssiMax == nil && encounter.rssiMean == nil)
        #expect(encounter.sightings == 2)
    }

    @Test func encounterLogFlushesPendingSightings() async throws {
        let temporary = TemporaryDirectory()
        defer { temporary.remove() }
        let store = try NodeStore.open(temporary.location())
        let log = EncounterLog(store: store, maxPendingRows: 50)
        let peer = UserID.random()
        for second in 0..<10 { await log.record(Sighting(peer: peer, ownWindowStart: 0, time: Int64(second), rssi: -60)) }
        #expect(try store.counts().encounters == 0)
        #expect(await log.pendingSightings == 10)
        try await log.flush()
        #expect(await log.pendingSightings == 0)
        #expect(try store.encounters().first?.sightings == 10)

        // A crowd larger than the pending-row limit is written early, without waiting for the timer.
        for _ in 0..<50 { await log.record(Sighting(peer: .random(), ownWindowStart: 0, time: 1, rssi: -70)) }
        #expect(try store.counts().encounters == 51)
    }

    @Test func summaryGroupsByDayWithLongestContact() throws {
        let day: UnixSeconds = 1_795_305_600  // 2026-11-22T00:00:00Z
        let peerA = UserID.random()
        let peerB = UserID.random()
        var a1 = Encounter(Sighting(peer: peerA, ownWindowStart: day, time: day + 10, rssi: -70))
        a1.add(Sighting(peer: peerA, ownWindowStart: day, time: day + 610, rssi: -48))
        var a2 = Encounter(Sighting(peer: peerA, ownWindowStart: day + 900, time: day + 900, rssi: -60))
        a2.add(Sighting(peer: peerA, ownWindowStart: day + 900, time: day + 1_000, rssi: -60))
        let b = Encounter(Sighting(peer: peerB, ownWindowStart: day + 86_400, time: day + 86_400 + 5))

        let summary = EncounterDaySummary.summarize([a1, a2, b], timeZone: TimeZone(identifier: "UTC")!)
        #expect(summary.map(\.day) == ["2026-11-22", "2026-11-23"])
        #expect(summary[0].distinctPeerIDs == 1)
        #expect(summary[0].encounters == 2)
        #expect(summary[0].sightings == 4)
        #expect(summary[0].longestContactSeconds == 600)
        #expect(summary[0].strongestRSSI == -48)
        #expect(summary[1].strongestRSSI == nil)

        // The same instant is still 2026-11-21 in New York.
        let local = EncounterDaySummary.summarize([a1], timeZone: TimeZone(identifier: "America/New_York")!)
        #expect(local.map(\.day) == ["2026-11-21"])
    }

    @Test func theRSSIHistogramMergesAcrossBatches() throws {
        let temporary = TemporaryDirectory()
        defer { temporary.remove() }
        let store = try NodeStore.open(temporary.location())
        let peer = UserID.random()
        var first = SightingBatch()
        for rssi: Int8 in [-60, -60, -75] { first.add(Sighting(peer: peer, ownWindowStart: 900, time: 1_000, rssi: rssi)) }
        try store.write(first)
        var second = SightingBatch()
        second.add(Sighting(peer: peer, ownWindowStart: 900, time: 1_100, rssi: -60))
        second.add(Sighting(peer: peer, ownWindowStart: 900, time: 1_110, reportedRSSI: -50))  // no RSSI of ours
        second.add(Sighting(peer: peer, ownWindowStart: 900, time: 1_120, rssi: -128))
        try store.write(second)
        let encounter = try #require(try store.encounters().first)
        #expect(encounter.rssiHistogram.counts == [-60: 3, -75: 1, -128: 1])
        #expect(encounter.rssiHistogram.total == encounter.rssiCount)
    }

    @Test func histogramEncodingsMergeInOrderAndBadOnesAreRefused() throws {
        let left = RSSIHistogram([-70: 2, -50: 1]).encoded, right = RSSIHistogram([-90: 1, -50: 4, 3: 1]).encoded
        let merged = try #require(RSSIHistogram.mergeEncoded(left, right))
        #expect(RSSIHistogram(encoded: merged)?.counts == [-90: 1, -70: 2, -50: 5, 3: 1])
        #expect(merged == RSSIHistogram([-90: 1, -70: 2, -50: 5, 3: 1]).encoded)
        #expect(RSSIHistogram.mergeEncoded(left, Array(right.dropLast())) == nil)
        let unordered = RSSIHistogram([-50: 1]).encoded + RSSIHistogram([-70: 1]).encoded
        #expect(RSSIHistogram(encoded: unordered) == nil)
        #expect(RSSIHistogram.mergeEncoded(unordered, left) == nil)
    }

    /// The upsert merges blobs (`mergeEncoded` on `Data`), the tests above mostly arrays: both
    /// must give what counting by hand gives, saturating counts included, and refuse the same inputs.
    @Test func histogramMergesOfBlobsAndArraysAgreeWithCountingByHand() throws {
        var random = SplitMix64(seed: 27)
        func someCounts() -> [Int8: Int] {
            var counts: [Int8: Int] = [:]
            for _ in 0..<Int.random(in: 0...12, using: &random) {
                let huge = Int.random(in: 0..<8, using: &random) == 0
                counts[Int8.random(in: -100 ... -30, using: &random)] =
                    huge ? Int(UInt32.max) - Int.random(in: 0...3, using: &random) : Int.random(in: 1...50, using: &random)
            }
            return counts
        }
        for _ in 0..<300 {
            let (a, b) = (someCounts(), someCounts())
            let expected = a.merging(b) { min($0 + $1, Int(UInt32.max)) }
            let (left, right) = (RSSIHistogram(a).encoded, RSSIHistogram(b).encoded)
            let merged = try #require(RSSIHistogram.mergeEncoded(left, right))
            #expect(RSSIHistogram(encoded: merged)?.counts == expected)
            #expect(RSSIHistogram.mergeEncoded(Data(left), Data(right)) == Data(merged))
        }
        let valid = RSSIHistogram([-60: 2]).encoded
        let unordered = RSSIHistogram([-50: 1]).encoded + RSSIHistogram([-70: 1]).encoded
        let repeated = RSSIHistogram([-60: 1]).encoded + RSSIHistogram([-60: 1]).encoded
        for bad in [unordered, repeated, Array(valid.dropLast())] {
            #expect(RSSIHistogram.mergeEncoded(bad, valid) == nil)
            #expect(RSSIHistogram.mergeEncoded(Data(valid), Data(bad)) == nil)
        }
    }

    /// A row whose stored histogram is not a valid encoding makes the write fail, all of it, rather
    /// than being overwritten with a guess.
    @Test func aWriteOverAMalformedStoredHistogramFailsWholly() throws {
        let temporary = TemporaryDirectory()
        defer { temporary.remove() }
        let location = temporary.location()
        let peer = UserID.random(), other = UserID.random()
        let store = try NodeStore.open(location)
        var first = SightingBatch()
        first.add(Sighting(peer: peer, ownWindowStart: 900, time: 1_000, rssi: -60))
        try store.write(first)
        let queue = try DatabaseQueue(path: location.path)
        try queue.write { db in
            try db.execute(sql: "UPDATE encounters SET rssi_histogram = ? WHERE peer_id = ?",
                           arguments: [Data([0xC4, 0, 0, 1]), peer.databaseValue])
        }
        try queue.close()
        var second = SightingBatch()
        second.add(Sighting(peer: peer, ownWindowStart: 900, time: 1_100, rssi: -55))
        second.add(Sighting(peer: other, ownWindowStart: 900, time: 1_100, rssi: -70))
        #expect(throws: StoreError.self) { try store.write(second) }
        let rows = try store.encounters()
        #expect(rows.map(\.peer) == [peer])
        #expect(rows.first?.sightings == 1)
    }

    /// A database logged by a node before schema v3 (no histogram column) keeps every row and
    /// value; its rows start with an empty histogram, and new sightings add to them.
    @Test func aVersion2DatabaseMigratesWithItsEncounters() throws {
        let temporary = TemporaryDirectory()
        defer { temporary.remove() }
        let location = temporary.location()
        let peer = UserID.random()
        do {
            try FileManager.default.createDirectory(
                atPath: (location.path as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
            let queue = try DatabaseQueue(path: location.path)
            try Schema.migrator.migrate(queue, upTo: "v2: daily keys")
            try queue.write { db in
                try db.execute(
                    sql: """
                        INSERT INTO encounters (own_window_start, peer_id, first_seen, last_seen, sightings,
                            rssi_min, rssi_max, rssi_sum, rssi_count, tx_power, reported_rssi, learned_by)
                        VALUES (900, ?, 1000, 1200, 4, -70, -50, -240, 4, -20, -55, 1)
                        """,
                    arguments: [peer.databaseValue])
            }
            let columns = try queue.read { db in try db.columns(in: "encounters").map(\.name) }
            try #require(!columns.contains("rssi_histogram"), "not a v2 database: \(columns)")
            try queue.close()
        }
        let store = try NodeStore.open(location)
        #expect(try store.appliedSchemaVersions() == NodeStore.schemaVersions)
        let old = try #require(try store.encounters().first)
        #expect((old.firstSeen, old.lastSeen, old.sightings, old.rssiMin, old.rssiMax) == (1_000, 1_200, 4, -70, -50))
        #expect((old.rssiSum, old.rssiCount, old.txPower, old.reportedRSSI, old.learnedBy) == (-240, 4, -20, -55, .read))
        #expect(old.rssiHistogram.isEmpty)

        var batch = SightingBatch()
        batch.add(Sighting(peer: peer, ownWindowStart: 900, time: 1_300, rssi: -45))
        try store.write(batch)
        let merged = try #require(try store.encounters().first)
        #expect((merged.sightings, merged.rssiCount, merged.rssiMax, merged.lastSeen) == (5, 5, -45, 1_300))
        #expect(merged.rssiHistogram.counts == [-45: 1])
        #expect(try store.integrityCheck() == ["ok"])
    }
}
