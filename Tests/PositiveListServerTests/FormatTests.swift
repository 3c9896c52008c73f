import Crypto
import Foundation
import IDRotation
import PositiveListFormat
import RetiredFormatWriters
import Testing
import TestTiers
import TracerCore

@Suite(.tags(.unit)) struct FormatTests {
    let key = Curve25519.Signing.PrivateKey()
    var publicKey: PositiveListPublicKey { PositiveListPublicKey(key.publicKey) }

    func sortedEntries(_ count: Int, seed: UInt64 = 7) -> [PositiveListEntry] {
        var generator = SplitMix64(seed: seed)
        return (0..<count).map { position in
            let from = UnixSeconds(1_800_000_000 + position * 900)
            return PositiveListEntry(id: UserID.random(using: &generator), validFrom: from, validUntil: from + 900)
        }.sorted { $0.id < $1.id }
    }

    @Test func batchRoundTripsWithSortedEntriesAndTimeRange() throws {
        let entries = sortedEntries(500)
        let file = try PositiveListBatch.encode(number: 42, entries: entries, signingKey: key)
        #expect(file.count == PositiveListBatch.headerByteCount + 500 * 16 + 64)
        let batch = try PositiveListBatch(verifying: file, publicKey: publicKey)
        #expect(batch.number == 42)
        #expect(batch.count == 500)
        #expect(batch.entries == entries)
        #expect(batch.timeRange == PublishedTimeRange(start: 1_800_000_000, end: 1_800_000_000 + 500 * 900))
        #expect(batch.entry(for: entries[321].id) == entries[321])
        #expect(batch.entry(for: UserID(rawValue: 12345)) == nil)
    }

    @Test func overheadOfAHistorySizedBatchIsUnderTwoPercent() throws {
        let entries = sortedEntries(2_688)
        let file = try PositiveListBatch.encode(number: 1, entries: entries, signingKey: key)
        let payload = entries.count * PositiveListBatch.entryByteCount
        #expect(Double(file.count - payload) / Double(payload) < 0.02)
    }

    @Test func everyFlippedByteOfABatchFailsVerification() throws {
        let file = try PositiveListBatch.encode(number: 3, entries: sortedEntries(4), signingKey: key)
        for position in file.indices {
            var altered = file
            altered[position] ^= 0x01
            #expect(throws: PositiveListFormatError.self, "byte \(position)") {
                try PositiveListBatch(verifying: altered, publicKey: publicKey)
            }
        }
    }

    @Test func everyFlippedByteOfAnIndexFailsVerification() throws {
        let index = PositiveListIndex(generation: 9, publishedAt: 1_800_000_000, batches: [
            .init(number: 1, timeRange: .init(start: 10, end: 20), byteCount: 184, sha256: Array(repeating: 7, count: 32)),
            .init(number: 2, timeRange: .init(start: 20, end: 30), byteCount: 200, sha256: Array(repeating: 9, count: 32)),
        ])
        let file = try index.encode(signingKey: key)
        #expect(try PositiveListIndex(verifying: file, publicKey: publicKey) == index)
        for position in file.indices {
            var altered = file
            altered[position] ^= 0x80
            #expect(throws: PositiveListFormatError.self, "byte \(position)") {
                try PositiveListIndex(verifying: altered, publicKey: publicKey)
            }
        }
    }

    @Test func theKeyIndexFlagIsHeaderByteFiveBitZeroAndUnknownBitsAreIgnored() throws {
        let flagged = try PositiveListIndex(generation: 1, publishedAt: 5, batches: [], flags: .keyIndexPublished).encode(signingKey: key)
        #expect(Array(flagged[0..<8]) == [0x54, 0x50, 0x4C, 0x49, 0x01, 0x01, 0x00, 0x00])
        #expect(try PositiveListIndex(verifying: flagged, publicKey: publicKey).flags == .keyIndexPublished)
        // A later server may set bits this reader does not know: it still reads the index.
        var later = Array(flagged.dropLast(64))
        later[5] = 0xF1
        let read = try PositiveListIndex(verifying: try SignedFile.sign(later, with: key), publicKey: publicKey)
        #expect(read.flags == .keyIndexPublished)
        let plain = try PositiveListIndex(generation: 1, publishedAt: 5, batches: []).encode(signingKey: key)
        #expect(plain[5] == 0)
        let plainFlags = try PositiveListIndex(verifying: plain, publicKey: publicKey).flags
        #expect(plainFlags.isEmpty)
    }

    @Test func anotherServersKeyDoesNotVerify() throws {
        let file = try PositiveListBatch.encode(number: 1, entries: sortedEntries(3), signingKey: key)
        let stranger = PositiveListPublicKey(Curve25519.Signing.PrivateKey().publicKey)
        #expect(throws: PositiveListFormatError.badSignature(.batch)) { try PositiveListBatch(verifying: file, publicKey: stranger) }
    }

    @Test func truncatedAndForeignFilesAreRefused() throws {
        let file = try PositiveListBatch.encode(number: 1, entries: sortedEntries(3), signingKey: key)
        #expect(throws: PositiveListFormatError.truncated(.batch, byteCount: 50)) {
            try PositiveListBatch(verifying: Array(file.prefix(50)), publicKey: publicKey)
        }
        // Signed by the right key but not a batch: refused by its magic.
        var body = Array(file.dropLast(SignedFile.signatureByteCount))
        body.replaceSubrange(0..<4, with: PositiveListIndex.magic)
        #expect(throws: PositiveListFormatError.wrongMagic(.batch)) {
            try PositiveListBatch(verifying: try SignedFile.sign(body, with: key), publicKey: publicKey)
        }
        body.replaceSubrange(0..<4, with: PositiveListBatch.magic)
        body[4] = 2
        #expect(throws: PositiveListFormatError.unsupportedVersion(.batch, version: 2)) {
            try PositiveListBatch(verifying: try SignedFile.sign(body, with: key), publicKey: publicKey)
        }
    }

    @Test func batchMustMatchItsIndexListing() throws {
        let file = try PositiveListBatch.encode(number: 5, entries: sortedEntries(3), signingKey: key)
        let digest = Array(SHA256.hash(data: file))
        let range = PublishedTimeRange(start: 0, end: 1)
        #expect(throws: PositiveListFormatError.digestMismatch(batchNumber: 5)) {
            try PositiveListBatch(verifying: file, listedAs: .init(number: 5, timeRange: range, byteCount: file.count, sha256: Array(repeating: 0, count: 32)), publicKey: publicKey)
        }
        #expect(throws: PositiveListFormatError.batchNumberMismatch(expected: 6, actual: 5)) {
            try PositiveListBatch(verifying: file, listedAs: .init(number: 6, timeRange: range, byteCount: file.count, sha256: digest), publicKey: publicKey)
        }
        #expect(throws: PositiveListFormatError.lengthMismatch(.batch, expected: 1, actual: file.count)) {
            try PositiveListBatch(verifying: file, listedAs: .init(number: 5, timeRange: range, byteCount: 1, sha256: digest), publicKey: publicKey)
        }
    }

    /// The publisher reading back its own file checks it against the listing it recorded (size,
    /// SHA-256, number), which stands for the signature: the same refusals, no key needed.
    @Test func aRecordedBatchIsCheckedAgainstItsListingAlone() throws {
        let entries = sortedEntries(3)
        let file = try PositiveListBatch.encode(number: 5, entries: entries, signingKey: key)
        let digest = Array(SHA256.hash(data: file))
        let range = PublishedTimeRange(start: 0, end: 1)
        #expect(try PositiveListBatch(recorded: file, listedAs: .init(number: 5, timeRange: range, byteCount: file.count, sha256: digest)).entries == entries)
        var altered = file
        altered[PositiveListBatch.headerByteCount] ^= 0x01
        #expect(throws: PositiveListFormatError.digestMismatch(batchNumber: 5)) {
            try PositiveListBatch(recorded: altered, listedAs: .init(number: 5, timeRange: range, byteCount: file.count, sha256: digest))
        }
        #expect(throws: PositiveListFormatError.batchNumberMismatch(expected: 6, actual: 5)) {
            try PositiveListBatch(recorded: file, listedAs: .init(number: 6, timeRange: range, byteCount: file.count, sha256: digest))
        }
        #expect(throws: PositiveListFormatError.lengthMismatch(.batch, expected: 1, actual: file.count)) {
            try PositiveListBatch(recorded: file, listedAs: .init(number: 5, timeRange: range, byteCount: 1, sha256: digest))
        }
    }

    /// The order is part of the privacy promise (it must not reveal upload order): a batch an
    /// older server left behind with ids out of order or repeated is refused, not moved over.
    @Test func aBatchWithUnsortedOrRepeatedIdsIsRefused() throws {
        let entries = sortedEntries(3)
        for unsorted in [[entries[1], entries[0]], [entries[0], entries[0]]] {
            let file = try PositiveListBatch.encode(number: 1, entries: unsorted, signingKey: key)
            #expect(throws: PositiveListFormatError.entriesNotSorted(position: 1)) { try PositiveListBatch(verifying: file, publicKey: publicKey) }
        }
    }

    /// A count near 2^64 in a signed header used to overflow the expected length and trap.
    @Test func hugeCountsAreRefusedNotTrapped() throws {
        for count in [UInt64.max, UInt64.max / 16, UInt64(Int.max), 1 << 59] {
            var batch = Array(try PositiveListBatch.encode(number: 1, entries: sortedEntries(2), signingKey: key).dropLast(64))
            batch.replaceSubrange(32..<40, with: (0..<8).map { UInt8(truncatingIfNeeded: count >> (56 - 8 * $0)) })
            #expect(throws: PositiveListFormatError.self) {
                try PositiveListBatch(verifying: try SignedFile.sign(batch, with: key), publicKey: publicKey)
            }
            var index = Array(try PositiveListIndex(generation: 1, publishedAt: 1, batches: []).encode(signingKey: key).dropLast(64))
            index.replaceSubrange(24..<32, with: (0..<8).map { UInt8(truncatingIfNeeded: count >> (56 - 8 * $0)) })
            #expect(throws: PositiveListFormatError.self) {
                try PositiveListIndex(verifying: try SignedFile.sign(index, with: key), publicKey: publicKey)
            }
        }
    }

    @Test func publicKeyTextRoundTripsAndRejectsGarbage() throws {
        #expect(try PositiveListPublicKey(base64: publicKey.base64) == publicKey)
        #expect(throws: PositiveListFormatError.invalidPublicKey) { try PositiveListPublicKey(base64: "not a key") }
        #expect(throws: PositiveListFormatError.invalidPublicKey) { try PositiveListPublicKey(base64: Data([1, 2, 3]).base64EncodedString()) }
    }
}
