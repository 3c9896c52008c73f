import Crypto
import Foundation
import IDRotation
import PositiveListFormat
import RetiredFormatWriters
import Testing
import TestTiers
import TracerCore

/// The log entry of format version 3 (docs/positive-list-format.md, "Format version 3"): known
/// bytes, the cut into parts at the 65,535-byte limit, and hostile bytes.
@Suite(.tags(.unit)) struct ListLogEntryTests {
    static let idVector: [UInt8] = [
        0x01, 0, 0, 0, 0, 0, 0, 0, 0x07, 0x00, 0x00, 0x00, 0x01,
        0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x6B, 0x49, 0xD2, 0x00, 0x6B, 0x49, 0xD5, 0x84,
    ]
    static let keyVector: [UInt8] = [0x02, 0, 0, 0, 0, 0, 0, 0, 0x03, 0x00, 0x01, 0x00, 0x02, 0x00, 0x01,
        0x00, 0x00, 0x4E, 0x20, 0x00, 0x00, 0x03, 0x84, 0x00, 0x00, 0x00, 0x01] + Array(repeating: 0xAA, count: 16)

    static func id(_ raw: UInt64, from: UnixSeconds = 1_800_000_000) -> PositiveListEntry {
        PositiveListEntry(id: UserID(rawValue: raw), validFrom: from, validUntil: from + 900)
    }

    static func key(_ seed: UInt64, day: Int64 = 20_000, interval: Int64 = 900) -> DailyKeyRecord {
        var generator = SplitMix64(seed: seed)
        return DailyKeyRecord(day: UTCDay(number: day), intervalSeconds: interval, key: DailyKey.random(using: &generator))
    }

    @Test func anIDEntryHasTheDocumentedBytes() throws {
        let entry = ListLogEntry(batchNumber: 7, part: 0, partCount: 1, payload: .ids([Self.id(0x0102_0304_0506_0708)]))
        #expect(try entry.encode() == Self.idVector)
        #expect(try ListLogEntry(decoding: Self.idVector) == entry)
        #expect(entry.kind == .ids)
    }

    @Test func aKeyEntryHasTheDocumentedBytes() throws {
        let record = DailyKeyRecord(day: UTCDay(number: 20_000), intervalSeconds: 900, key: try DailyKey(bytes: Array(repeating: 0xAA, count: 16)))
        let entry = ListLogEntry(batchNumber: 3, part: 1, partCount: 2, payload: .keys([record]))
        #expect(Self.keyVector.count == 43)
        #expect(try entry.encode() == Self.keyVector)
        #expect(try ListLogEntry(decoding: Self.keyVector) == entry)
    }

    /// 4,095 ids fill an entry to 65,533 bytes; the 4,096th opens a second part.
    @Test func anIDBatchIsCutIntoPartsAtTheLimit() throws {
        #expect(ListLogEntry.maximumIDsPerEntry == 4_095)
        let ids = (1...8_191).map { Self.id(UInt64($0) * 7) }
        let parts = try ListLogEntry.entries(idBatch: 9, entries: ids)
        #expect(parts.map(\.part) == [0, 1, 2])
        #expect(parts.allSatisfy { $0.partCount == 3 && $0.batchNumber == 9 })
        let encoded = try parts.map { try $0.encode() }
        #expect(encoded.map(\.count) == [65_533, 65_533, 29])
        var back: [PositiveListEntry] = []
        for bytes in encoded {
            guard case .ids(let entries) = try ListLogEntry(decoding: bytes).payload else { Issue.record("not ids"); return }
            back += entries
        }
        #expect(back == ids)
        #expect(try ListLogEntry.entries(idBatch: 1, entries: Array(ids.prefix(4_095))).count == 1)
        #expect(try ListLogEntry.entries(idBatch: 1, entries: Array(ids.prefix(4_096))).count == 2)
    }

    /// One group: 4,094 keys fit (65,531 bytes), the 4,095th does not. Many groups: a group may be
    /// split across parts, each part's groups count only its keys, and the keys come back in order.
    @Test func aKeyBatchIsCutIntoPartsAtTheLimit() throws {
        let one = (0..<4_095).map { Self.key(UInt64($0)) }
        let cut = try ListLogEntry.entries(keyBatch: 4, records: one)
        #expect(try cut.map { try $0.encode().count } == [65_531, 43])
        var many: [DailyKeyRecord] = []
        for index in 0..<9_000 {
            let interval: Int64 = index % 3 == 0 ? 600 : 900
            many.append(Self.key(UInt64(index), day: 20_000 + Int64(index % 29), interval: interval))
        }
        let parts = try ListLogEntry.entries(keyBatch: 5, records: many)
        var back: [DailyKeyRecord] = []
        for part in parts {
            let bytes = try part.encode()
            #expect(bytes.count <= 65_535)
            #expect(bytes.count > 65_535 - 16 - 12 || part.part == part.partCount - 1, "every part but the last is as large as fits")
            guard case .keys(let records) = try ListLogEntry(decoding: bytes).payload else { Issue.record("not keys"); return }
            back += records
        }
        #expect(back.count == 9_000)
        #expect(Set(back) == Set(many))
        #expect(parts.map { Int($0.part) } == Array(0..<parts.count))
    }

    /// The figures docs/positive-list-format.md gives: an entry and its bundle framing against
    /// the key batch file, for 1 key and for 580 keys in 1 and in 29 groups.
    @Test func bytesPerKeyAgainstKeyBatches() throws {
        let signingKey = Curve25519.Signing.PrivateKey()
        func sizes(_ records: [DailyKeyRecord]) throws -> (log: Int, batch: Int) {
            let entries = try ListLogEntry.entries(keyBatch: 1, records: records)
            return (try entries.reduce(0) { $0 + 2 + (try $1.encode().count) },
                    try PositiveListKeyBatch.encode(number: 1, records: records, signingKey: signingKey).count)
        }
        #expect(try sizes([Self.key(1)]) == (45, 116))
        #expect(try sizes((0..<580).map { Self.key(UInt64($0)) }) == (9_309, 9_380))
        #expect(try sizes((0..<580).map { Self.key(UInt64($0), day: 20_000 + Int64($0 % 29)) }) == (9_645, 9_716))
    }

    @Test func theEncoderRefusesWhatReadersRefuse() {
        #expect(throws: PositiveListFormatError.self) { try ListLogEntry(batchNumber: 1, part: 0, partCount: 1, payload: .ids([])).encode() }
        #expect(throws: PositiveListFormatError.self) { try ListLogEntry(batchNumber: 1, part: 0, partCount: 1, payload: .keys([])).encode() }
        #expect(throws: PositiveListFormatError.self) {
            try ListLogEntry(batchNumber: 1, part: 1, partCount: 1, payload: .ids([Self.id(1)])).encode()
        }
        #expect(throws: PositiveListFormatError.self) {
            try ListLogEntry(batchNumber: 1, part: 0, partCount: 1, payload: .ids([Self.id(2), Self.id(1)])).encode()
        }
        #expect(throws: PositiveListFormatError.self) {
            try ListLogEntry(batchNumber: 1, part: 0, partCount: 1, payload: .ids((1...4_096).map { Self.id(UInt64($0)) })).encode()
        }
        let unsorted = [Self.key(1, day: 20_001), Self.key(2, day: 20_000)]
        #expect(throws: PositiveListFormatError.self) { try ListLogEntry(batchNumber: 1, part: 0, partCount: 1, payload: .keys(unsorted)).encode() }
    }

    @Test func hostileEntriesAreRefused() {
        func refused(_ bytes: [UInt8], _ comment: Comment) {
            #expect(throws: PositiveListFormatError.self, comment) { try ListLogEntry(decoding: bytes) }
        }
        var bytes = Self.idVector
        bytes[0] = 3
        refused(bytes, "kind 3")
        bytes = Self.idVector
        bytes[0] = 0
        refused(bytes, "kind 0")
        bytes = Self.idVector
        bytes[12] = 0
        refused(bytes, "part count 0")
        bytes = Self.idVector
        bytes[10] = 1
        refused(bytes, "part 1 of 1")
        refused(Array(Self.idVector.prefix(13)), "no id")
        refused(Self.idVector + [0], "a byte left over")
        refused(Self.idVector + Self.idVector.suffix(16), "an id repeated")
        bytes = Self.idVector
        bytes[25] = 0x6B; bytes[26] = 0x49; bytes[27] = 0xD2; bytes[28] = 0x00
        refused(bytes, "a window that ends where it starts")
        for length in 0..<Self.keyVector.count { refused(Array(Self.keyVector.prefix(length)), "cut at \(length)") }
        refused(Self.keyVector + [0], "a key byte left over")
        bytes = Self.keyVector
        bytes[14] = 0
        refused(bytes, "no group")
        bytes[14] = 2
        refused(bytes, "two groups, one key")
        bytes = Self.keyVector
        bytes[26] = 2
        refused(bytes, "a group counting two keys where one is")
        bytes = Self.keyVector
        bytes[21] = 0; bytes[22] = 4
        refused(bytes, "interval 4")
        bytes = Self.keyVector
        bytes[20] = 0x01; bytes[21] = 0x51; bytes[22] = 0x81
        refused(bytes, "interval 86,401")
        bytes = Self.keyVector
        bytes[26] = 2
        refused(bytes + Array(repeating: 0xAA, count: 16), "a key repeated in its group")
        refused(Array(repeating: 0, count: 65_536), "over 65,535 bytes")
    }

    /// Garbage of every length up to a few hundred bytes, with plausible headers: an answer or a
    /// typed error, never a trap.
    @Test func randomBytesNeverTrap() {
        var generator = SplitMix64(seed: 39)
        for round in 0..<20_000 {
            var bytes = (0..<Int(generator.next() % 300)).map { _ in UInt8(truncatingIfNeeded: generator.next()) }
            if round % 2 == 0, bytes.count > 15 {
                bytes[0] = UInt8(1 + round % 4 / 2)
                bytes[11] = 0
                bytes[12] = 1
                bytes[9] = 0
                bytes[10] = 0
                bytes[13] = 0
            }
            if let entry = try? ListLogEntry(decoding: bytes) {
                #expect((try? entry.encode()) == bytes, "what decodes encodes back to the same bytes")
            }
        }
    }
}
