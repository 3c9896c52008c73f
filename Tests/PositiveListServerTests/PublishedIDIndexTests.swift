import IDRotation
@testable import PositiveListServer
@testable import SQLiteServerStore
import Testing
import TestTiers
import TracerCore

/// The in-memory index of published ids against a plain set doing the same operations.
@Suite(.tags(.unit)) struct PublishedIDIndexTests {
    @Test func anEmptyIndexHoldsNothing() {
        let index = PublishedIDIndex()
        for id: UInt64 in [0, 1, .max, 1 << 63] { #expect(!index.contains(id)) }
        #expect(index.count == 0)
    }

    @Test func insertsAndExpiriesMatchASet() {
        var generator = SplitMix64(seed: 42)
        var index = PublishedIDIndex()
        var reference: [UInt64: Set<UInt64>] = [:]
        var nextBatch: UInt64 = 1
        for round in 0..<60 {
            // One to three batches at once, like a server starting or catching up, some sorted
            // (as files are) and some not; sizes from empty to a few thousand.
            var added: [(number: UInt64, ids: [UInt64])] = []
            for _ in 0..<(1 + round % 3) {
                var ids = (0..<Int.random(in: 0...3_000, using: &generator)).map { _ in UInt64.random(in: .min ... .max, using: &generator) }
                if round % 2 == 0 { ids.sort() }
                reference[nextBatch] = Set(ids)
                added.append((nextBatch, ids))
                nextBatch += 1
            }
            index.insert(added)
            if round % 4 == 3 {
                let gone = Set(reference.keys.shuffled(using: &generator).prefix(2))
                index.remove(batches: gone)
                for number in gone { reference[number] = nil }
            }
            let all = reference.values.reduce(into: Set<UInt64>()) { $0.formUnion($1) }
            #expect(index.batches == Set(reference.keys))
            #expect(index.count == reference.values.reduce(0) { $0 + $1.count })
            #expect(all.allSatisfy(index.contains))
            let strangers = (0..<2_000).map { _ in UInt64.random(in: .min ... .max, using: &generator) }.filter { !all.contains($0) }
            #expect(!strangers.contains(where: index.contains))
        }
    }

    @Test func hundredsOfBatchesAtOnceAreMergedInOrder() {
        // A server starting with four weeks of hourly batches.
        var generator = SplitMix64(seed: 7)
        let batches = (1...700).map { number in
            (number: UInt64(number), ids: (0..<Int.random(in: 0...60, using: &generator)).map { _ in UInt64.random(in: .min ... .max, using: &generator) }.sorted())
        }
        var index = PublishedIDIndex()
        index.insert(batches)
        #expect(index.count == batches.reduce(0) { $0 + $1.ids.count })
        #expect(batches.allSatisfy { $0.ids.allSatisfy(index.contains) })
        index.remove(batches: Set(batches.prefix(350).map(\.number)))
        #expect(!batches.prefix(350).contains { $0.ids.contains(where: index.contains) })
        #expect(batches.suffix(350).allSatisfy { $0.ids.allSatisfy(index.contains) })
        #expect(index.memoryBytes >= index.count * 12)
    }

    @Test func clusteredAndExtremeIdsAreFound() {
        // A crafted history: ids one apart, all in one directory bucket, plus the ends of the range.
        let clustered = (0..<10_000).map { UInt64(0x1234_5678_0000_0000) + UInt64($0) }
        let extremes: [UInt64] = [0, 1, .max - 1, .max]
        var index = PublishedIDIndex()
        index.insert([(number: 7, ids: clustered), (number: 8, ids: extremes)])
        #expect(clustered.allSatisfy(index.contains))
        #expect(extremes.allSatisfy(index.contains))
        #expect(!index.contains(0x1234_5678_0000_0000 + 10_000))
        #expect(!index.contains(0x1234_5677_FFFF_FFFF))
        #expect(!index.contains(2))
        index.remove(batches: [7])
        #expect(!clustered.contains(where: index.contains))
        #expect(extremes.allSatisfy(index.contains))
        // Inserting a batch already held changes nothing.
        index.insert([(number: 8, ids: [5])])
        #expect(!index.contains(5))
        #expect(index.count == 4)
    }
}
