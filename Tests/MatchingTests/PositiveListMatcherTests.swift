import Foundation
import IDRotation
import PositiveListFormat
import Testing
import TestTiers
@testable import Matching
import TracerCore

extension MatchingTests {
    @Suite(.tags(.unit)) struct PositiveListMatcherTests {
        let day: UnixSeconds = 1_795_305_600  // 2026-11-22T00:00:00Z

        @Test func findsAnIDMetInsideItsWindowAndNothingElse() {
            let met = encounter(0xA1, from: day + 100, to: day + 400)
            let notListed = encounter(0xB2, from: day + 100, to: day + 400)
            let outcome = PositiveListMatcher(encounters: [met, notListed].map(EncounterTimes.init)).match([
                listed(0xA1, from: day, to: day + 900),
                listed(0xC3, from: day, to: day + 900),
            ])

            #expect(outcome.idsChecked == 2)
            #expect(outcome.matches.map(\.times) == [EncounterTimes(met)])
            #expect(outcome.matches.first?.listed.validUntil == day + 900)
            #expect(outcome.idsSeenOutsideTheirWindow == 0)
        }

        @Test func anIDSeenOutsideItsWindowDoesNotMatch() throws {
            // A replay: the id was published for the morning, someone broadcast it in the evening.
            let window = listed(0xA1, from: day + 3_600, to: day + 4_500)
            let replayed = encounter(0xA1, from: day + 40_000, to: day + 40_100)
            let outcome = PositiveListMatcher(encounters: [EncounterTimes(replayed)], clockSkewTolerance: 300).match([window])
            #expect(outcome.matches.isEmpty)
            #expect(outcome.idsSeenOutsideTheirWindow == 1)
        }

        @Test func theClockSkewToleranceIsInclusiveAndNoWider() {
            let window = listed(0xA1, from: day + 3_600, to: day + 4_500)
            let justAfter = encounter(0xA1, from: day + 4_800, to: day + 4_900)
            let tooLate = encounter(0xA1, from: day + 4_801, to: day + 4_900)
            let justBefore = encounter(0xA1, from: day + 3_000, to: day + 3_300)
            let tooEarly = encounter(0xA1, from: day + 3_000, to: day + 3_299)
            for (encounter, matches) in [(justAfter, true), (tooLate, false), (justBefore, true), (tooEarly, false)] {
                let outcome = PositiveListMatcher(encounters: [EncounterTimes(encounter)], clockSkewTolerance: 300).match([window])
                #expect(outcome.matches.count == (matches ? 1 : 0), "encounter \(encounter.firstSeen - day)…\(encounter.lastSeen - day)")
            }
        }

        @Test func everyEncounterWithAListedIDIsFoundAcrossOurWindows() {
            // One peer id spans two of our windows: two encounter rows, both inside its window.
            let first = encounter(0xA1, from: day + 850, to: day + 899)
            var second = encounter(0xA1, from: day + 900, to: day + 1_000)
            second.ownWindowStart = day + 900
            let outcome = PositiveListMatcher(encounters: [second, first].map(EncounterTimes.init)).match([listed(0xA1, from: day + 800, to: day + 1_700)])
            #expect(Set(outcome.matches.map(\.times)) == [EncounterTimes(first), EncounterTimes(second)])
        }

        @Test func theIDZeroIsMatchedLikeAnyOther() {
            let zero = encounter(0, from: day, to: day + 10)
            let outcome = PositiveListMatcher(encounters: [EncounterTimes(zero)]).match([listed(0, from: day, to: day + 900), listed(1, from: day, to: day + 900)])
            #expect(outcome.matches.map(\.times) == [EncounterTimes(zero)])
        }

        @Test func theTableAgreesWithASetOnRandomIDs() throws {
            var generator = SystemRandomNumberGenerator()
            let metIDs = (0..<5_000).map { _ in UInt64.random(in: .min ... .max, using: &generator) }
            let pairs = Array(Set(metIDs)).enumerated().map { (id: $0.element, value: UInt32($0.offset)) }
            let table = PeerIDTable(pairs)
            let reference = Dictionary(uniqueKeysWithValues: pairs.map { ($0.id, $0.value) })
            let probes = metIDs + (0..<50_000).map { _ in UInt64.random(in: .min ... .max, using: &generator) }
            for probe in probes {
                #expect(table.value(for: probe) == reference[probe])
            }
        }

        @Test func clusteredIDsStillFindTheirSlots() {
            // Ids a hostile peer might pick: consecutive values, all sharing their high bits.
            let pairs = (0..<20_000).map { (id: UInt64(0xFFFF_0000_0000_0000) + UInt64($0), value: UInt32($0)) }
            let table = PeerIDTable(pairs)
            #expect(pairs.allSatisfy { table.value(for: $0.id) == $0.value })
            #expect(table.value(for: 0xFFFF_0000_0000_0000 + 20_000) == nil)
        }
    }
}
