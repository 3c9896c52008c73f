import Crypto
import Foundation
import IDRotation
import PositiveListFormat
import RetiredFormatWriters
import Testing
import TestTiers
import TracerCore

/// The key batch and key index of format version 2 (docs/positive-list-format.md).
@Suite(.tags(.unit)) struct KeyBatchFormatTests {
    let signingKey = Curve25519.Signing.PrivateKey()
    var publicKey: PositiveListPublicKey { PositiveListPublicKey(signingKey.publicKey) }

    func key(_ fill: UInt8) -> DailyKey { try! DailyKey(bytes: Array(repeating: fill, count: 16)) }

    func randomRecords(_ count: Int, days: ClosedRange<Int64> = 20_400...20_427, seed: UInt64 = 11) -> [DailyKeyRecord] {
        var generator = SplitMix64(seed: seed)
        return (0..<count).map { _ in
            DailyKeyRecord(
                day: UTCDay(number: Int64.random(in: days, using: &generator)),
                intervalSeconds: [600, 900].randomElement(using: &generator)!, key: DailyKey.random(using: &generator))
        }
    }

    func hex(_ text: String) -> [UInt8] {
        let digits = Array(text.filter { !$0.isWhitespace })
        return stride(from: 0, to: digits.count, by: 2).map { UInt8(String(digits[$0...$0 + 1]), radix: 16)! }
    }

    // MARK: Known bytes

    /// Three keys of two (day, interval) groups, given out of order: the body below is the
    /// layout of docs/positive-list-format.md written out by hand.
    @Test func encodesTheDocumentedBytes() throws {
        let records = [
            DailyKeyRecord(day: UTCDay(number: 20_411), intervalSeconds: 900, key: key(0xBB)),
            DailyKeyRecord(day: UTCDay(number: 20_410), intervalSeconds: 900, key: key(0xCC)),
            DailyKeyRecord(day: UTCDay(number: 20_411), intervalSeconds: 900, key: key(0xAA)),
        ]
        let file = try PositiveListKeyBatch.encode(number: 7, records: records, signingKey: signingKey)
        let expectedBody = hex("""
            54504B42 02 000000  0000000000000007  00000002 00000003
            00004FBA 00000384 00000001
            00004FBB 00000384 00000002
            CCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCC
            AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA
            BBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB
            """)
        #expect(Array(file.dropLast(SignedFile.signatureByteCount)) == expectedBody)
        #expect(file.count == 24 + 2 * 12 + 3 * 16 + 64)
        #expect(signingKey.publicKey.isValidSignature(file.suffix(64), for: expectedBody))
    }

    @Test func decodesHandWrittenBytes() throws {
        let body = hex("""
            54504B42 02 000000  000000000000002A  00000001 00000002
            00004FBA 00000258 00000002
            0102030405060708090A0B0C0D0E0F10
            F102030405060708090A0B0C0D0E0F10
            """)
        let batch = try PositiveListKeyBatch(verifying: try SignedFile.sign(body, with: signingKey), publicKey: publicKey)
        #expect(batch.number == 42)
        #expect(batch.count == 2)
        #expect(batch.groups == [.init(day: UTCDay(number: 20_410), intervalSeconds: 600, keys: 0..<2)])
        #expect(batch.records.map(\.key.hex) == ["0102030405060708090a0b0c0d0e0f10", "f102030405060708090a0b0c0d0e0f10"])
        #expect(batch.timeRange == PublishedTimeRange(start: 20_410 * 86_400, end: 20_411 * 86_400))
    }

    // MARK: Round trip and size

    @Test func roundTripsInGroupedSortedOrder() throws {
        let records = randomRecords(1_000)
        let file = try PositiveListKeyBatch.encode(number: 3, records: records, signingKey: signingKey)
        let batch = try PositiveListKeyBatch(verifying: file, publicKey: publicKey)
        #expect(batch.number == 3)
        #expect(Set(batch.records) == Set(records))
        #expect(batch.records.count == records.count)
        for group in batch.groups {
            let keys = group.keys.map { batch.key(at: $0).bytes }
            #expect(zip(keys, keys.dropFirst()).allSatisfy { $0.lexicographicallyPrecedes($1) })
        }
        let listing = PositiveListIndex.BatchListing(
            number: 3, timeRange: batch.timeRange, byteCount: file.count, sha256: Array(SHA256.hash(data: file)), kind: .keys)
        #expect(try PositiveListKeyBatch(verifying: file, listedAs: listing, publicKey: publicKey).count == 1_000)
        // Read back by its publisher: the recorded listing stands for the signature.
        #expect(Set(try PositiveListKeyBatch(recorded: file, listedAs: listing).records) == Set(records))
        var altered = file
        altered[PositiveListKeyBatch.headerByteCount] ^= 0x01
        #expect(throws: PositiveListFormatError.digestMismatch(batchNumber: 3)) { try PositiveListKeyBatch(recorded: altered, listedAs: listing) }
        #expect(listing.relativePath == "keys/3.tpkb")
    }

    /// Issue 13's target: at most 24 bytes per published key, the batch's header, group
    /// headers and signature and its index listing included.
    @Test func aDaysUploadsCostUnder24BytesAKey() throws {
        // 100 uploads of 14 days each, at one interval: 1,400 keys in 14 groups.
        let records = randomRecords(1_400, days: 20_400...20_413)
        let file = try PositiveListKeyBatch.encode(number: 1, records: records, signingKey: signingKey)
        let perKey = Double(file.count + PositiveListIndex.listingByteCount) / Double(records.count)
        #expect(perKey <= 24)
        #expect(perKey < 16.6)
    }

    @Test func emptyBatchRoundTrips() throws {
        let file = try PositiveListKeyBatch.encode(number: 9, records: [], signingKey: signingKey)
        let batch = try PositiveListKeyBatch(verifying: file, publicKey: publicKey)
        #expect(batch.count == 0 && batch.groups.isEmpty)
    }

    @Test func aDuplicateKeyAndAnImpossibleIntervalAreRefused() throws {
        let record = DailyKeyRecord(day: UTCDay(number: 20_410), intervalSeconds: 900, key: key(1))
        let repeated = try PositiveListKeyBatch.encode(number: 1, records: [record, record], signingKey: signingKey)
        #expect(throws: PositiveListFormatError.keysNotSorted(position: 1)) { try PositiveListKeyBatch(verifying: repeated, publicKey: publicKey) }
        let bad = DailyKeyRecord(day: UTCDay(number: 20_410), intervalSeconds: 4, key: key(1))
        let impossible = try PositiveListKeyBatch.encode(number: 1, records: [bad], signingKey: signingKey)
        #expect(throws: PositiveListFormatError.keyGroupOutOfRange(group: 0)) { try PositiveListKeyBatch(verifying: impossible, publicKey: publicKey) }
    }

    // MARK: Hostile input

    func body(of records: [DailyKeyRecord]) throws -> [UInt8] {
        Array(try PositiveListKeyBatch.encode(number: 1, records: records, signingKey: signingKey).dropLast(64))
    }

    func decodeSigned(_ body: [UInt8]) throws(PositiveListFormatError) -> PositiveListKeyBatch {
        try PositiveListKeyBatch(verifying: try! SignedFile.sign(body, with: signingKey), publicKey: publicKey)
    }

    @Test func everyTruncationIsRefused() throws {
        let file = try PositiveListKeyBatch.encode(number: 1, records: randomRecords(5), signingKey: signingKey)
        for length in 0..<file.count {
            #expect(throws: PositiveListFormatError.self, "length \(length)") {
                try PositiveListKeyBatch(verifying: Array(file.prefix(length)), publicKey: publicKey)
            }
        }
        // Truncated and signed again, so the signature passes and the length check must catch it.
        let body = try body(of: randomRecords(5))
        for length in PositiveListKeyBatch.headerByteCount..<body.count {
            #expect(throws: PositiveListFormatError.self, "length \(length)") { try decodeSigned(Array(body.prefix(length))) }
        }
    }

    @Test func everyFlippedByteFailsVerification() throws {
        let file = try PositiveListKeyBatch.encode(number: 1, records: randomRecords(3), signingKey: signingKey)
        for position in file.indices {
            var altered = file
            altered[position] ^= 0x01
            #expect(throws: PositiveListFormatError.self, "byte \(position)") {
                try PositiveListKeyBatch(verifying: altered, publicKey: publicKey)
            }
        }
        let stranger = PositiveListPublicKey(Curve25519.Signing.PrivateKey().publicKey)
        #expect(throws: PositiveListFormatError.badSignature(.keyBatch)) { try PositiveListKeyBatch(verifying: file, publicKey: stranger) }
    }

    @Test func oversizedCountsAreRefusedWithoutAllocating() throws {
        var body = try body(of: [
            DailyKeyRecord(day: UTCDay(number: 20_410), intervalSeconds: 900, key: key(1)),
            DailyKeyRecord(day: UTCDay(number: 20_410), intervalSeconds: 900, key: key(2)),
        ])
        // 2^32 − 1 groups and keys: a reader that trusted them would reserve ~100 GB.
        for (offset, value) in [(16, UInt8(0xFF)), (20, 0xFF)] {
            var altered = body
            altered.replaceSubrange(offset..<offset + 4, with: [value, value, value, value])
            #expect(throws: PositiveListFormatError.self) { try decodeSigned(altered) }
        }
        // The header's key count disagrees with the groups' counts, the length still consistent.
        body.replaceSubrange(24 + 8..<24 + 12, with: [0, 0, 0, 1])
        #expect(throws: PositiveListFormatError.keyCountMismatch(header: 2, groups: 1)) { try decodeSigned(body) }
        body.replaceSubrange(24 + 8..<24 + 12, with: [0, 0, 0, 3])
        #expect(throws: PositiveListFormatError.keyCountMismatch(header: 2, groups: 3)) { try decodeSigned(body) }
    }

    @Test func malformedGroupsAndKeysAreRefused() throws {
        let twoGroups = try body(of: [
            DailyKeyRecord(day: UTCDay(number: 20_410), intervalSeconds: 900, key: key(1)),
            DailyKeyRecord(day: UTCDay(number: 20_411), intervalSeconds: 900, key: key(2)),
        ])
        var swapped = twoGroups
        swapped.replaceSubrange(24..<36, with: twoGroups[36..<48])
        swapped.replaceSubrange(36..<48, with: twoGroups[24..<36])
        #expect(throws: PositiveListFormatError.keyGroupsNotSorted(group: 1)) { try decodeSigned(swapped) }

        var empty = twoGroups
        empty.replaceSubrange(32..<36, with: [0, 0, 0, 0])
        #expect(throws: PositiveListFormatError.emptyKeyGroup(group: 0)) { try decodeSigned(empty) }

        var badInterval = twoGroups
        badInterval.replaceSubrange(28..<32, with: [0, 0, 0, 4])
        #expect(throws: PositiveListFormatError.keyGroupOutOfRange(group: 0)) { try decodeSigned(badInterval) }
        var farDay = twoGroups
        farDay.replaceSubrange(36..<40, with: [0xFF, 0xFF, 0xFF, 0xFF])
        #expect(throws: PositiveListFormatError.keyGroupOutOfRange(group: 1)) { try decodeSigned(farDay) }

        let oneGroup = try body(of: [
            DailyKeyRecord(day: UTCDay(number: 20_410), intervalSeconds: 900, key: key(1)),
            DailyKeyRecord(day: UTCDay(number: 20_410), intervalSeconds: 900, key: key(2)),
        ])
        var repeated = oneGroup
        repeated.replaceSubrange(36 + 16..<36 + 32, with: oneGroup[36..<52])
        #expect(throws: PositiveListFormatError.keysNotSorted(position: 1)) { try decodeSigned(repeated) }

        var wrongVersion = oneGroup
        wrongVersion[4] = 1
        #expect(throws: PositiveListFormatError.unsupportedVersion(.keyBatch, version: 1)) { try decodeSigned(wrongVersion) }
    }

    /// Signed garbage: random edits of a valid body, re-signed so that only the parser stands
    /// between them and the node. Each must be refused or read consistently, never trap.
    @Test func randomlyCorruptedSignedBodiesNeverTrap() throws {
        var generator = SplitMix64(seed: 99)
        let original = try body(of: randomRecords(6, days: 20_400...20_402))
        for _ in 0..<2_000 {
            var body = original
            for _ in 0..<Int.random(in: 1...4, using: &generator) {
                let position = Int.random(in: 0..<body.count, using: &generator)
                switch Int.random(in: 0..<3, using: &generator) {
                case 0: body[position] = UInt8.random(in: 0...255, using: &generator)
                case 1: body.removeSubrange(position...)
                default: body.insert(contentsOf: [UInt8](repeating: 0xFF, count: 12), at: position)
                }
                if body.count < PositiveListKeyBatch.headerByteCount { break }
            }
            if let batch = try? decodeSigned(body) {
                // Whatever parses is self-consistent: every key readable, groups cover the keys.
                #expect(batch.records.count == batch.count)
                #expect(batch.groups.last?.keys.upperBound ?? 0 == batch.count)
            }
        }
        for length in 0..<PositiveListIndex.headerByteCount + 64 {
            let file = try SignedFile.sign(Array(PositiveListKeyIndex.magic + [2] + Array(repeating: 0xFF, count: 27)).prefix(length).map { $0 }, with: signingKey)
            #expect(throws: PositiveListFormatError.self) { try PositiveListKeyIndex(verifying: file, publicKey: publicKey) }
        }
    }

    /// The backward-compatibility promise: a node that knows only id batches refuses a key batch
    /// or key index cleanly (never reads it as ids), and the key decoder refuses id files.
    @Test func idAndKeyFilesAreNeverTakenForEachOther() throws {
        let keyFile = try PositiveListKeyBatch.encode(number: 1, records: randomRecords(3), signingKey: signingKey)
        #expect(throws: PositiveListFormatError.wrongMagic(.batch)) { try PositiveListBatch(verifying: keyFile, publicKey: publicKey) }
        let idFile = try PositiveListBatch.encode(number: 1, entries: [], signingKey: signingKey)
        #expect(throws: PositiveListFormatError.wrongMagic(.keyBatch)) { try PositiveListKeyBatch(verifying: idFile, publicKey: publicKey) }
        let keyIndex = try PositiveListKeyIndex(generation: 1, publishedAt: 5, accepts: .keys, batches: []).encode(signingKey: signingKey)
        #expect(throws: PositiveListFormatError.wrongMagic(.index)) { try PositiveListIndex(verifying: keyIndex, publicKey: publicKey) }
    }

    // MARK: Key index

    @Test func keyIndexRoundTripsWithTheAcceptedUploads() throws {
        let listing = PositiveListIndex.BatchListing(
            number: 4, timeRange: .init(start: 86_400, end: 172_800), byteCount: 200, sha256: Array(repeating: 3, count: 32), kind: .keys)
        for accepts in [AcceptedUploads.ids, .keys, .both] {
            let index = PositiveListKeyIndex(generation: 2, publishedAt: 1_800_000_000, accepts: accepts, batches: [listing])
            let file = try index.encode(signingKey: signingKey)
            #expect(file[5] == accepts.rawValue)
            #expect(try PositiveListKeyIndex(verifying: file, publicKey: publicKey) == index)
        }
        // The id index is unchanged by format version 2: version 1, flags byte zero.
        let idIndex = try PositiveListIndex(generation: 1, publishedAt: 5, batches: []).encode(signingKey: signingKey)
        #expect(Array(idIndex.prefix(8)) == Array("TPLI".utf8) + [1, 0, 0, 0])
    }
}
