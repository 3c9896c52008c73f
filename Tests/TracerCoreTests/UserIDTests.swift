import Foundation
import TracerCore
import Testing
import TestTiers

@Suite(.tags(.unit)) struct UserIDTests {
    @Test func bytesHexAndIntegerAgree() throws {
        let id = try UserID(bytes: [0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef])
        #expect(id.rawValue == 0x0123_4567_89ab_cdef)
        #expect(id.hex == "0123456789abcdef")
        #expect(id.bytes == [0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef])
        #expect(try UserID(hex: "0123456789ABCDEF") == id)
        #expect(UserID(databaseValue: id.databaseValue) == id)
    }

    @Test func hexKeepsLeadingZeros() {
        #expect(UserID(rawValue: 1).hex == "0000000000000001")
        #expect(UserID(rawValue: 0).bytes == [0, 0, 0, 0, 0, 0, 0, 0])
        #expect(UserID(databaseValue: -1).hex == "ffffffffffffffff")
    }

    @Test(arguments: [0, 7, 9, 16])
    func rejectsWrongByteCounts(count: Int) {
        #expect(throws: UserIDError.wrongByteCount(count)) { try UserID(bytes: [UInt8](repeating: 1, count: count)) }
    }

    @Test(arguments: ["", "0123456789abcde", "0123456789abcdef0", "0123456789abcdeg", "+123456789abcdef", " 123456789abcdef"])
    func rejectsMalformedHex(text: String) {
        #expect(throws: UserIDError.self) { try UserID(hex: text) }
    }

    @Test func tagIsTheFirstTwoBytesOfSHA256() throws {
        // sha256(00 × 8) = af5570f5…, sha256(0123456789abcdef) = 55c5…
        #expect(UserID(rawValue: 0).tag == "id#af55")
        #expect(try UserID(hex: "0123456789abcdef").tag == "id#55c5")
    }

    @Test func interpolationNeverShowsTheFullID() throws {
        let id = try UserID(hex: "0123456789abcdef")
        let texts = ["\(id)", String(describing: id), String(reflecting: id), "\([id])", "\(Optional(id) as Any)"]
        for text in texts {
            #expect(!text.contains("0123456789abcdef"), "leaked in \(text)")
            #expect(!text.localizedStandardContains("89ab"), "partial id leaked in \(text)")
        }
    }

    @Test func randomIDsAreDistinctAndUseEveryBit() {
        let count = 100_000
        var seen = Set<UserID>()
        var bitCounts = [Int](repeating: 0, count: 64)
        for _ in 0..<count {
            let id = UserID.random()
            seen.insert(id)
            for bit in 0..<64 where id.rawValue & (1 << UInt64(bit)) != 0 { bitCounts[bit] += 1 }
        }
        #expect(seen.count == count)
        // Each bit should be set about half the time; 5 standard deviations is 0.5 ± 0.008.
        for (bit, ones) in bitCounts.enumerated() {
            let share = Double(ones) / Double(count)
            #expect(abs(share - 0.5) < 0.008, "bit \(bit) set in \(share) of ids")
        }
    }

    @Test func orderFollowsByteOrder() throws {
        let low = try UserID(bytes: [0x00, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff])
        let high = try UserID(bytes: [0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00])
        #expect(low < high)
        #expect(UserID(rawValue: 0x8000_0000_0000_0000) > UserID(rawValue: 0x7fff_ffff_ffff_ffff))
    }
}
