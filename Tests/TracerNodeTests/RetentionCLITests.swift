import Foundation
import IDRotation
import Testing
import TestTiers
import TracerCore
import TracerTestSupport

extension TracerNodeTests {
    /// `tracer purge` keeps 28 days: rows last seen 28.1 days ago go, rows from 27.9 days ago stay.
    @Suite(.tags(.endToEnd)) struct RetentionThroughCLI {
        @Test func purgeDeletesExactlyWhatIsOlderThan28Days() throws {
            let scratch = try Scratch()
            defer { scratch.remove() }
            let path = scratch.file("node.db")
            let now = SystemWallClock().now()
            let day = Double(UnixSeconds.secondsPerDay)
            let expired = now - UnixSeconds(28.1 * day)
            let fresh = now - UnixSeconds(27.9 * day)

            var generator = SystemRandomNumberGenerator()
            func ownID(endingAt end: UnixSeconds) -> OwnID {
                OwnID(id: .random(using: &generator), window: IDWindow(start: end - 900, end: end))
            }
            let expiredOwn = [ownID(endingAt: expired), ownID(endingAt: expired - 900)]
            let freshOwn = [
                ownID(endingAt: fresh), ownID(endingAt: now - UnixSeconds(26.9 * day)), ownID(endingAt: now + 600),
            ]
            let expiredPeers = (0..<3).map { _ in UserID.random(using: &generator) }
            let freshPeers = (0..<4).map { _ in UserID.random(using: &generator) }
            do {
                let store = try Check.openStore(path)
                for own in expiredOwn + freshOwn { try store.recordOwnID(own) }
                var batch = SightingBatch()
                for peer in expiredPeers {
                    // First seen earlier, last seen 28.1 days ago: expired by its last sighting.
                    batch.add(Sighting(peer: peer, ownWindowStart: expired - 900, time: expired - 600, rssi: -60))
                    batch.add(Sighting(peer: peer, ownWindowStart: expired - 900, time: expired, rssi: -70))
                }
                for peer in freshPeers {
                    // First seen before the cutoff, last seen 27.9 days ago: kept.
                    batch.add(Sighting(peer: peer, ownWindowStart: fresh - 900, time: expired, rssi: -60))
                    batch.add(Sighting(peer: peer, ownWindowStart: fresh - 900, time: fresh, rssi: -65))
                }
                try store.write(batch)
                // A key goes once its day has ended before the cutoff; the day of the cutoff keeps its key.
                for time in [now - UnixSeconds(29.5 * day), now - UnixSeconds(28 * day), now] {
                    _ = try store.dailyKey(for: UTCDay(containing: time), intervalSeconds: 900, recordingIfAbsent: .random())
                }
                let counts = try store.counts()
                try #require(counts.ownIDs == 5 && counts.encounters == 7 && counts.dailyKeys == 3, "\(counts)")
            }

            let result = try Products.tracer(["purge", "--json", "--db", path], home: scratch.path)
            try #require(result.exitCode == 0 && !result.signaled, "\(result)")
            let report = try Check.json(result.stdout)
            #expect((report["encountersDeleted"] as? NSNumber)?.intValue == expiredPeers.count, "\(result)")
            #expect((report["ownIDsDeleted"] as? NSNumber)?.intValue == expiredOwn.count, "\(result)")
            #expect((report["dailyKeysDeleted"] as? NSNumber)?.intValue == 1, "\(result)")

            do {
                let store = try Check.openStore(path)
                #expect(Set(try store.encounters().map(\.peer)) == Set(freshPeers))
                #expect(Set(try store.ownIDs()) == Set(freshOwn))
                #expect(try store.dailyKeys().map(\.day) == [now - UnixSeconds(28 * day), now].map(UTCDay.init(containing:)))
                let lastPurge = try #require(try store.lastPurge())
                #expect(abs(lastPurge - now) < 300)
            }

            // Own ids may be kept for less time: with 27 days, the 27.9-day-old own id goes too,
            // and the encounters stay.
            let shorter = try Products.tracer(
                ["purge", "--json", "--retention-days", "28", "--own-id-retention-days", "27", "--db", path],
                home: scratch.path)
            try #require(shorter.exitCode == 0, "\(shorter)")
            let shorterReport = try Check.json(shorter.stdout)
            #expect((shorterReport["encountersDeleted"] as? NSNumber)?.intValue == 0, "\(shorter)")
            #expect((shorterReport["ownIDsDeleted"] as? NSNumber)?.intValue == 1, "\(shorter)")
            let store = try Check.openStore(path)
            #expect(Set(try store.ownIDs()) == Set(freshOwn.dropFirst()))
            #expect(try store.counts().encounters == freshPeers.count)
        }
    }
}
