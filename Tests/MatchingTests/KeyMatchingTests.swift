import Foundation
import IDRotation
import PositiveListFormat
import Testing
import TestTiers
@testable import Matching
import TracerCore

extension MatchingTests {
    @Suite(.tags(.unit)) struct KeyMatchingTests {
        let day = UTCDay(containing: 1_795_305_600)  // 2026-11-22
        let derivation = try! IDDerivation(intervalSeconds: 900)

        func key(_ byte: UInt8) -> DailyKey { try! DailyKey(bytes: [UInt8](repeating: byte, count: 16)) }

        /// The id `key` derives for window `index`, seen from `from` to `to` (seconds after the
        /// window's nominal start).
        func sighting(_ key: DailyKey, index: UInt32, from: Int64, to: Int64) -> EncounterTimes {
            let start = derivation.nominalStart(ofWindowIndex: index)
            return EncounterTimes(
                peer: derivation.id(key: key, windowIndex: index), ownWindowStart: start, firstSeen: start + from, lastSeen: start + to)
        }

        @Test func anEncounterInsideItsIDsWindowMatches() {
            let index = derivation.windowIndices(of: day).lowerBound + 40
            let met = sighting(key(1), index: index, from: 100, to: 400)
            let outcome = PositiveListMatcher(encounters: [met]).match(keys: [DailyKeyRecord(day: day, intervalSeconds: 900, key: key(1))])
            #expect(outcome.idsChecked == 96)
            #expect(outcome.matches.map(\.times) == [met])
            #expect(outcome.matches.first?.listed.validFrom == derivation.nominalStart(ofWindowIndex: index))
            #expect(outcome.matches.first?.listed.validUntil == derivation.nominalStart(ofWindowIndex: index) + 900)
            #expect(outcome.idsSeenOutsideTheirWindow == 0)
        }

        @Test func aReplayedKeysIDOutsideItsWindowDoesNotMatch() {
            // The id of 10:00 broadcast again at 20:00 by someone who captured it.
            let index = derivation.windowIndices(of: day).lowerBound + 40
            let replayed = sighting(key(1), index: index, from: 36_000, to: 36_100)
            let outcome = PositiveListMatcher(encounters: [replayed], clockSkewTolerance: 300)
                .match(keys: [DailyKeyRecord(day: day, intervalSeconds: 900, key: key(1))])
            #expect(outcome.matches.isEmpty)
            #expect(outcome.idsSeenOutsideTheirWindow == 1)
        }

        @Test func theToleranceIsTheSameAsForIDBatches() {
            let index = derivation.windowIndices(of: day).lowerBound + 40
            let record = DailyKeyRecord(day: day, intervalSeconds: 900, key: key(1))
            // Window [0, 900) widened by 300 s each side, inclusive, as `record` does for ids.
            for (from, to, matches) in [(Int64(1_200), Int64(1_300), true), (1_201, 1_300, false), (-400, -300, true), (-400, -301, false)] {
                let outcome = PositiveListMatcher(encounters: [sighting(key(1), index: index, from: from, to: to)], clockSkewTolerance: 300)
                    .match(keys: [record])
                #expect(outcome.matches.count == (matches ? 1 : 0), "seen \(from)…\(to)")
            }
        }

        @Test func jitterWidensTheWindowAsTheScheduleDoes() {
            // With jitter j, window n may last until (n + 2) × I + j (docs/daily-keys.md).
            let index = derivation.windowIndices(of: day).lowerBound + 40
            let late = sighting(key(1), index: index, from: 1_700, to: 1_750)
            let record = DailyKeyRecord(day: day, intervalSeconds: 900, key: key(1))
            #expect(PositiveListMatcher(encounters: [late], clockSkewTolerance: 0).match(keys: [record]).matches.isEmpty)
            let widened = PositiveListMatcher(encounters: [late], clockSkewTolerance: 0)
                .match(keys: [record], windowRule: DerivedWindowRule(maximumJitterSeconds: 60))
            #expect(widened.matches.map(\.times) == [late])
        }

        @Test func aKeyForAnotherIntervalDoesNotMatchThisIntervalsWindows() throws {
            // The same key published for 10-minute windows derives other ids: the interval is in
            // every AES block.
            let index = derivation.windowIndices(of: day).lowerBound + 40
            let met = sighting(key(1), index: index, from: 100, to: 400)
            let outcome = PositiveListMatcher(encounters: [met]).match(keys: [DailyKeyRecord(day: day, intervalSeconds: 600, key: key(1))])
            #expect(outcome.idsChecked == 144)
            #expect(outcome.matches.isEmpty)
            #expect(outcome.idsSeenOutsideTheirWindow == 0)
        }

        @Test func aKeyOfAnotherDayDoesNotMatch() {
            let index = derivation.windowIndices(of: day).lowerBound + 40
            let met = sighting(key(1), index: index, from: 100, to: 400)
            let yesterday = UTCDay(number: day.number - 1)
            let outcome = PositiveListMatcher(encounters: [met]).match(keys: [DailyKeyRecord(day: yesterday, intervalSeconds: 900, key: key(1))])
            #expect(outcome.matches.isEmpty)
        }

        @Test func manyKeysAcrossChunksAreAllMatchedOnce() {
            // Three chunks' worth of keys; the matched ones sit in different chunks, and one
            // unrelated encounter must match nothing.
            var generator = SystemRandomNumberGenerator()
            let count = PositiveListMatcher.keysPerChunk * 2 + 17
            var records = (0..<count).map { _ in DailyKeyRecord(day: day, intervalSeconds: 900, key: DailyKey.random(using: &generator)) }
            let positions = [0, PositiveListMatcher.keysPerChunk + 3, count - 1]
            let first = derivation.windowIndices(of: day).lowerBound
            let met = positions.enumerated().map { offset, position in
                sighting(records[position].key, index: first + UInt32(offset * 30), from: 10, to: 20)
            }
            let stranger = EncounterTimes(peer: UserID(rawValue: 42), ownWindowStart: day.start, firstSeen: day.start, lastSeen: day.start + 10)
            records.shuffle()
            let outcome = PositiveListMatcher(encounters: met + [stranger]).match(keys: records)
            #expect(outcome.idsChecked == count * 96)
            #expect(Set(outcome.matches.map(\.times)) == Set(met))
            #expect(outcome.matches.count == met.count)
        }

        @Test func keysOfSeveralDaysAndIntervalsAreMatchedEachWithItsOwn() throws {
            // Groups (day, interval) of different sizes, with chunk boundaries inside groups: each
            // key must be derived with its own day and interval.
            var generator = SystemRandomNumberGenerator()
            let yesterday = UTCDay(number: day.number - 1)
            let groups: [(UTCDay, Int64, Int)] = [(yesterday, 900, 3), (yesterday, 600, PositiveListMatcher.keysPerChunk + 5), (day, 900, 7)]
            var records: [DailyKeyRecord] = []
            for (groupDay, interval, count) in groups {
                records += (0..<count).map { _ in DailyKeyRecord(day: groupDay, intervalSeconds: interval, key: DailyKey.random(using: &generator)) }
            }
            // One met key per group, seen in its 5th window of its day.
            let met = [records[1], records[3 + PositiveListMatcher.keysPerChunk], records.last!].map { record in
                let derivation = try! IDDerivation(intervalSeconds: record.intervalSeconds)
                let index = derivation.windowIndices(of: record.day).lowerBound + 5
                let start = derivation.nominalStart(ofWindowIndex: index)
                return EncounterTimes(
                    peer: derivation.id(key: record.key, windowIndex: index), ownWindowStart: start, firstSeen: start + 1, lastSeen: start + 2)
            }
            let outcome = PositiveListMatcher(encounters: met).match(keys: records)
            #expect(outcome.keysChecked == records.count)
            #expect(outcome.idsChecked == 3 * 96 + (PositiveListMatcher.keysPerChunk + 5) * 144 + 7 * 96)
            #expect(Set(outcome.matches.map(\.times)) == Set(met))
            #expect(outcome.idsSeenOutsideTheirWindow == 0)
        }

        @Test func noKeysCheckNothing() {
            let outcome = PositiveListMatcher(encounters: []).match(keys: [])
            #expect(outcome.idsChecked == 0 && outcome.matches.isEmpty)
        }
    }
}
