import TracerCore
import Testing
import TestTiers

@Suite(.tags(.unit)) struct HexTests {
    @Test func encodesLowercaseTwoDigitsAByte() {
        #expect(Hex.encode([UInt8]()) == "")
        #expect(Hex.encode([0x00, 0x01, 0x0f, 0x10, 0xab, 0xff]) == "00010f10abff")
        // SHA-256 of nothing, as every tool prints it: the object store's empty-payload hash.
        #expect(Hex.encode([0xe3, 0xb0, 0xc4, 0x42]) == "e3b0c442")
    }

    @Test func decodesEitherCase() {
        #expect(Hex.decode("") == [])
        #expect(Hex.decode("00010f10abff") == [0x00, 0x01, 0x0f, 0x10, 0xab, 0xff])
        #expect(Hex.decode("ABff") == [0xab, 0xff])
    }

    @Test(arguments: ["0", "abc", "0g", "g0", " 0", "0x00", "+1", "é0"])
    func refusesWhatIsNotPairsOfDigits(text: String) {
        #expect(Hex.decode(text) == nil)
    }

    @Test func roundTripsEveryByte() {
        let bytes = (0...255).map(UInt8.init)
        #expect(Hex.decode(Hex.encode(bytes)) == bytes)
    }

    @Test func digitValues() {
        #expect(Hex.digitValue(UInt8(ascii: "0")) == 0)
        #expect(Hex.digitValue(UInt8(ascii: "9")) == 9)
        #expect(Hex.digitValue(UInt8(ascii: "a")) == 10)
        #expect(Hex.digitValue(UInt8(ascii: "F")) == 15)
        for other in ["/", ":", "@", "G", "`", "g"] { #expect(Hex.digitValue(UInt8(ascii: Unicode.Scalar(other)!)) == nil) }
    }
}

@Suite(.tags(.unit)) struct SplitMix64Tests {
    /// Vigna's reference splitmix64.c: seed 0 gives e220a8397b1dcdaf first; seed 1234567 the
    /// sequence below (also checked with a few lines of Python, not with this code).
    @Test func matchesTheReferenceSequence() {
        var zero = SplitMix64(seed: 0)
        #expect(zero.next() == 0xE220_A839_7B1D_CDAF)
        #expect(zero.next() == 0x6E78_9E6A_A1B9_65F4)
        var generator = SplitMix64(seed: 1_234_567)
        let expected: [UInt64] = [
            6_457_827_717_110_365_317, 3_203_168_211_198_807_973, 9_817_491_932_198_370_423,
            4_593_380_528_125_082_431, 16_408_922_859_458_223_821,
        ]
        #expect((0..<5).map { _ in generator.next() } == expected)
    }
}
