import TracerCore
import Testing
import TestTiers

@Suite(.tags(.unit)) struct DailyKeyTests {
    @Test func utcDays() {
        #expect(UTCDay(number: 0).date == "1970-01-01")
        #expect(UTCDay(number: 11_016).date == "2000-02-29")
        #expect(UTCDay(number: -1).date == "1969-12-31")
        #expect(UTCDay(containing: -1) == UTCDay(number: -1))
        #expect(UTCDay(containing: 1_795_305_599) == UTCDay(number: 20_778))
        #expect(UTCDay(containing: 1_795_305_600) == UTCDay(number: 20_779))
        #expect(UTCDay(number: 20_779).start == 1_795_305_600)
    }

    @Test func aKeyNeverShowsInTextButRoundTripsAsHex() throws {
        let key = try DailyKey(hex: "8c3d1e55a0f41b6e9d27c4f0355e7a19")
        #expect(try DailyKey(hex: key.hex) == key)
        #expect(try DailyKey(bytes: key.bytes) == key)
        var dumped = ""
        dump(key, to: &dumped)
        let record = DailyKeyRecord(day: UTCDay(number: 1), intervalSeconds: 900, key: key)
        for text in ["\(key)", String(reflecting: key), dumped, "\(record)", String(reflecting: record)] {
            #expect(!text.lowercased().contains("8c3d"), "\(text)")
            #expect(!text.contains("140, 61"), "the bytes in decimal: \(text)")
        }
        #expect(throws: DailyKeyError.wrongByteCount(15)) { try DailyKey(bytes: [UInt8](repeating: 0, count: 15)) }
        #expect(throws: DailyKeyError.invalidHex) { try DailyKey(hex: "8c3d") }
        #expect(throws: DailyKeyError.invalidHex) { try DailyKey(hex: String(repeating: "g", count: 32)) }
        #expect(!"\(DailyKeyError.invalidHex)".contains("g"))
    }
}
