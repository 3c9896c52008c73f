import Foundation
import IDRotation
import PositiveListFormat
@testable import PositiveListServer
import Testing
import TestTiers
import TracerCore
import ServerTestSupport

@Suite(.tags(.unit)) struct HistoryJSONDecoderTests {
    func decode(_ text: String) throws(HistoryDecodingError) -> SubmittedHistory {
        try SubmittedHistory(json: Data(text.utf8))
    }

    func error(_ text: String) -> HistoryDecodingError? {
        do {
            _ = try decode(text)
            return nil
        } catch {
            return error
        }
    }

    func error(bytes: [UInt8]) -> HistoryDecodingError? {
        do {
            _ = try SubmittedHistory(json: Data(bytes))
            return nil
        } catch {
            return error
        }
    }

    // MARK: Known bytes

    @Test(.timeLimit(.minutes(1)))
    func aMillionZerosInANumberAreReadInLinearTime() throws {
        // Stripping leading zeros one removeFirst() at a time made this quadratic: minutes of a
        // request handler's time for one 1 MB body.
        let zeros = String(repeating: "0", count: 1_000_000)
        let text = #"{"ids":[{"id":"0123456789abcdef","validFrom":0.\#(zeros)1,"validUntil":1800000900}]}"#
        #expect(error(text) != nil)
        let exact = #"{"ids":[{"id":"0123456789abcdef","validFrom":1800000000.\#(zeros),"validUntil":1800000900}]}"#
        #expect(try decode(exact).ids.first?.validFrom == 1_800_000_000)
    }

    @Test func decodesAKnownBody() throws {
        let text = #"{"ids":[{"id":"0123456789abcdef","validFrom":1800000000,"validUntil":1800000900},{"id":"FEDCBA9876543210","validFrom":0,"validUntil":9223372036854775807}]}"#
        #expect(try decode(text) == SubmittedHistory(ids: [
            SubmittedEntry(id: "0123456789abcdef", validFrom: 1_800_000_000, validUntil: 1_800_000_900),
            SubmittedEntry(id: "FEDCBA9876543210", validFrom: 0, validUntil: .max),
        ]))
    }

    @Test func decodesWhatJSONEncoderWrites() throws {
        let history = SubmittedHistory(ids: Histories.entries(count: 2_688, endingAt: ServerFixture.start))
        let encoded = try JSONEncoder().encode(history)
        #expect(try SubmittedHistory(json: encoded) == history)
        let pretty = JSONEncoder()
        pretty.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        #expect(try SubmittedHistory(json: try pretty.encode(history)) == history)
    }

    @Test func acceptsWhitespaceMemberOrderUnknownMembersAndAByteOrderMark() throws {
        let text = """
            \u{FEFF} {
              "note" : {"nested": [1, -2.5e-3, true, false, null, "\\u00e9\\n", {}, []]},
              "ids" : [ { "validUntil" : 20 , "extra" : [ ] , "id" : "00000000000000aa" , "validFrom" : 10 } ] ,
              "version": 2
            }\r\n
            """
        #expect(try decode(text) == SubmittedHistory(ids: [SubmittedEntry(id: "00000000000000aa", validFrom: 10, validUntil: 20)]))
    }

    @Test func anEmptyListIsAHistoryForValidationToRefuse() throws {
        #expect(try decode(#"{"ids":[]}"#) == SubmittedHistory(ids: []))
    }

    @Test(arguments: [
        ("1800000000", Int64(1_800_000_000)),
        ("-0", 0),
        ("-900", -900),
        ("1.8e9", 1_800_000_000),
        ("1800000000.000", 1_800_000_000),
        ("18000000000E-1", 1_800_000_000),
        ("0.5e1", 5),
        ("2E+1", 20),
        ("0e99999999999999999999", 0),
        ("-9223372036854775808", .min),
        ("9223372036854775807", .max),
        ("-92233720368547758.08e2", .min),
    ])
    func timesAreIntegersHoweverTheyAreWritten(written: String, value: Int64) throws {
        let history = try decode(#"{"ids":[{"id":"0123456789abcdef","validFrom":\#(written),"validUntil":1}]}"#)
        #expect(history.ids.first?.validFrom == value)
    }

    @Test func escapedStringsAreDecoded() throws {
        // "\u0030" is "0": an id written with escapes is still the same id.
        let history = try decode(#"{"ids":[{"id":"\u00301234567\u0038\u0039abcdef","validFrom":1,"validUntil":2}],"x":"\"\\\/\b\f\n\r\t\ud83d\ude00"}"#)
        #expect(history.ids.first?.id == "0123456789abcdef")
    }

    @Test func idsThatAreNotHexAreLeftToValidation() throws {
        // The decoder reads strings; `HistoryRules` refuses them as invalid_id with a position.
        let history = try decode(#"{"ids":[{"id":"not hex, héhé","validFrom":1,"validUntil":2},{"id":"","validFrom":1,"validUntil":2}]}"#)
        #expect(history.ids.map(\.id) == ["not hex, héhé", ""])
    }

    @Test func repeatedIdsInOneUploadAreAllDecoded() throws {
        // Storing them once is the store's job; the decoder keeps the history as sent.
        let entry = #"{"id":"0123456789abcdef","validFrom":1,"validUntil":2}"#
        #expect(try decode(#"{"ids":[\#(entry),\#(entry),\#(entry)]}"#).ids.count == 3)
    }

    // MARK: Wrong shapes

    @Test(arguments: [
        (#"[]"#, HistoryDecodingError.notAnObject),
        (#""ids""#, .notAnObject),
        (#"null"#, .notAnObject),
        (#"{}"#, .missingField(path: "ids")),
        (#"{"IDS":[]}"#, .missingField(path: "ids")),
        (#"{"ids":"x"}"#, .wrongType(path: "ids")),
        (#"{"ids":null}"#, .wrongType(path: "ids")),
        (#"{"ids":{}}"#, .wrongType(path: "ids")),
        (#"{"ids":[1]}"#, .wrongType(path: "ids[0]")),
        (#"{"ids":[{"id":"0123456789abcdef"}]}"#, .missingField(path: "ids[0].validFrom")),
        (#"{"ids":[{"id":"0123456789abcdef","validFrom":1}]}"#, .missingField(path: "ids[0].validUntil")),
        (#"{"ids":[{"validFrom":1,"validUntil":2}]}"#, .missingField(path: "ids[0].id")),
        (#"{"ids":[{"id":5,"validFrom":1,"validUntil":2}]}"#, .wrongType(path: "ids[0].id")),
        (#"{"ids":[{"id":null,"validFrom":1,"validUntil":2}]}"#, .wrongType(path: "ids[0].id")),
        (#"{"ids":[{"id":"a","validFrom":"1","validUntil":2}]}"#, .wrongType(path: "ids[0].validFrom")),
        (#"{"ids":[{"id":"a","validFrom":1,"validUntil":[2]}]}"#, .wrongType(path: "ids[0].validUntil")),
        (#"{"ids":[{"id":"a","validFrom":1,"validUntil":2},{"id":"b","validFrom":true,"validUntil":2}]}"#, .wrongType(path: "ids[1].validFrom")),
        (#"{"ids":[],"ids":[]}"#, .duplicateField(path: "ids")),
        (#"{"ids":[{"id":"a","id":"b","validFrom":1,"validUntil":2}]}"#, .duplicateField(path: "ids[0].id")),
    ])
    func wrongShapesNameThePlace(text: String, expected: HistoryDecodingError) {
        #expect(error(text) == expected)
    }

    // MARK: Hostile input

    @Test(arguments: [
        "99999999999999999999",
        "9223372036854775808",
        "-9223372036854775809",
        "1e19",
        "1e999999999999999999999999",
        "1.5",
        "1800000000.5",
        "1e-1",
        "123456789012345678901234567890e-10",
    ])
    func hugeAndFractionalTimesAreRefused(written: String) {
        #expect(error(#"{"ids":[{"id":"a","validFrom":\#(written),"validUntil":2}]}"#) == .notAnInteger(path: "ids[0].validFrom"))
    }

    @Test func deepNestingIsRefusedWithoutExhaustingTheStack() {
        let depth = 100_000
        let deep = String(repeating: "[", count: depth) + String(repeating: "]", count: depth)
        #expect(error(#"{"ids":[],"x":\#(deep)}"#) == .nestedTooDeeply(offset: 14 + HistoryJSONDecoder.maximumDepth - 1))
        let objects = String(repeating: #"{"a":"#, count: depth) + "1" + String(repeating: "}", count: depth)
        #expect(error(objects).map { if case .nestedTooDeeply = $0 { true } else { false } } == true)
        let entries = #"{"ids":[{"id":"a","validFrom":1,"validUntil":2,"x":\#(deep)}]}"#
        #expect(error(entries).map { if case .nestedTooDeeply = $0 { true } else { false } } == true)
        // Nesting within the limit is fine.
        let allowed = String(repeating: "[", count: 50) + String(repeating: "]", count: 50)
        #expect(error(#"{"ids":[],"x":\#(allowed)}"#) == nil)
    }

    @Test(arguments: [
        #"{"ids":[{"id":"\x","validFrom":1,"validUntil":2}]}"#,
        #"{"ids":[{"id":"\u12","validFrom":1,"validUntil":2}]}"#,
        #"{"ids":[{"id":"\u12g4","validFrom":1,"validUntil":2}]}"#,
        #"{"ids":[{"id":"\ud800","validFrom":1,"validUntil":2}]}"#,
        #"{"ids":[{"id":"\ud800\u0041","validFrom":1,"validUntil":2}]}"#,
        #"{"ids":[{"id":"\udc00","validFrom":1,"validUntil":2}]}"#,
        #"{"ids":[],"x":"\"#,
        "{\"ids\":[],\"x\":\"tab\tinside\"}",
        "{\"ids\":[],\"x\":\"\u{0}\"}",
    ])
    func badEscapesAndControlCharactersAreNotJSON(text: String) {
        #expect(error(text).map { if case .notJSON = $0 { true } else { false } } == true, "\(text)")
    }

    @Test func invalidUTF8IsNotJSON() {
        for bad: [UInt8] in [[0xFF], [0xC3], [0xE2, 0x82], [0xED, 0xA0, 0x80], [0xC0, 0xAF]] {
            let body = Array(#"{"ids":[{"id":""#.utf8) + bad + Array(#"","validFrom":1,"validUntil":2}]}"#.utf8)
            #expect(error(bytes: body) == .notJSON(offset: 15), "\(bad)")
            let skipped = Array(#"{"ids":[],"x":""#.utf8) + bad + Array(#""}"#.utf8)
            #expect(error(bytes: skipped) == .notJSON(offset: 15), "\(bad)")
        }
    }

    @Test func everyTruncationOfAValidBodyIsRefused() {
        let text = #"{"ids":[{"id":"0123456789abcdef","validFrom":1.8e9,"validUntil":-1,"x":[true,false,null,"\u00e9",{"y":{}}]}]}"#
        let bytes = Array(text.utf8)
        #expect(error(bytes: bytes) == nil)
        for length in 0..<bytes.count {
            #expect(error(bytes: Array(bytes[..<length])) != nil, "accepted the first \(length) bytes")
        }
    }

    @Test(arguments: [
        "",
        " ",
        "{",
        "}",
        #"{"ids":[]"#,
        #"{"ids":[]}}"#,
        #"{"ids":[]} x"#,
        "{\"ids\":[]}\u{0}",
        #"{"ids":[],}"#,
        #"{"ids":[{"id":"a","validFrom":1,"validUntil":2},]}"#,
        #"{"ids":[{"id":"a","validFrom":1,"validUntil":2,}]}"#,
        #"{"ids" [] }"#,
        #"{ids:[]}"#,
        #"{'ids':[]}"#,
        #"{"ids":[{"id":"a","validFrom":01,"validUntil":2}]}"#,
        #"{"ids":[{"id":"a","validFrom":+1,"validUntil":2}]}"#,
        #"{"ids":[{"id":"a","validFrom":1.,"validUntil":2}]}"#,
        #"{"ids":[{"id":"a","validFrom":.5,"validUntil":2}]}"#,
        #"{"ids":[{"id":"a","validFrom":1e,"validUntil":2}]}"#,
        #"{"ids":[{"id":"a","validFrom":-,"validUntil":2}]}"#,
        #"{"ids":[],"x":NaN}"#,
        #"{"ids":[],"x":Infinity}"#,
        #"{"ids":[],"x":tru}"#,
        #"{"ids":[],"x":nul}"#,
        #"{"ids":[],"x":[1 2]}"#,
        #"{"ids":[],"x":{"a" 1}}"#,
        #"{"ids":[],"x":{1:2}}"#,
    ])
    func malformedJSONIsRefused(text: String) {
        #expect(error(text).map { if case .notJSON = $0 { true } else { false } } == true, "\(text)")
    }

    @Test func randomBytesNeverTrap() {
        var generator = SplitMix64(seed: 42)
        let valid = Array(#"{"ids":[{"id":"0123456789abcdef","validFrom":1800000000,"validUntil":1800000900}]}"#.utf8)
        for _ in 0..<20_000 {
            var bytes = valid
            // Flip a few bytes of a valid body, or write random bytes.
            if Bool.random(using: &generator) {
                for _ in 0..<Int.random(in: 1...4, using: &generator) {
                    bytes[Int.random(in: 0..<bytes.count, using: &generator)] = UInt8.random(in: 0...255, using: &generator)
                }
            } else {
                bytes = (0..<Int.random(in: 0...64, using: &generator)).map { _ in
                    Array(#"{}[]":,-0123456789.eE+\u"tfnrl "#.utf8).randomElement(using: &generator)!
                }
            }
            _ = error(bytes: bytes)
        }
    }

    @Test func errorDetailsNeverEchoTheContent() {
        let secret = "0123456789abcdef"
        for text in [
            #"{"ids":[{"id":"\#(secret)","validFrom":1}]}"#, #"{"ids":[{"id":"\#(secret)\x"}]}"#,
            #"{"ids":[{"id":"\#(secret)","validFrom":"\#(secret)","validUntil":2}]}"#,
        ] {
            let detail = error(text)?.detail ?? ""
            #expect(!detail.isEmpty)
            #expect(!detail.contains(secret))
        }
    }
}
