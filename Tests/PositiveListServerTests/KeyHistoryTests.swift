import Foundation
import IDRotation
import PositiveListFormat
@testable import PositiveListServer
import Testing
import TestTiers
import TracerCore

/// Decoding and validating `POST /v1/key-histories` bodies.
@Suite(.tags(.unit)) struct KeyHistoryTests {
    static let now: UnixSeconds = 20_410 * 86_400 + 43_200
    static let today: Int64 = 20_410
    let rules = KeyHistoryRules(ServerConfiguration(authorities: []))

    func decode(_ text: String) throws(HistoryDecodingError) -> SubmittedKeyHistory {
        try SubmittedKeyHistory(json: Data(text.utf8))
    }

    func key(_ fill: Character) -> String { String(repeating: fill, count: 32) }

    @Test func decodesAKnownBody() throws {
        let text = #"{"keys":[{"day":20410,"intervalSeconds":900,"key":"000102030405060708090a0b0c0d0e0f"},{"key":"FFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFF","intervalSeconds":6e2,"day":20409,"note":[1,{"x":null}]}]}"#
        #expect(try decode(text) == SubmittedKeyHistory(keys: [
            SubmittedKey(day: 20_410, intervalSeconds: 900, key: "000102030405060708090a0b0c0d0e0f"),
            SubmittedKey(day: 20_409, intervalSeconds: 600, key: "FFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFF"),
        ]))
        let history = SubmittedKeyHistory(keys: [SubmittedKey(day: 1, intervalSeconds: 900, key: key("a"))])
        #expect(try SubmittedKeyHistory(json: try JSONEncoder().encode(history)) == history)
    }

    @Test func malformedBodiesNameTheirPlace() throws {
        let cases: [(String, HistoryDecodingError)] = [
            ("[]", .notAKeyHistoryObject),
            (#"{"ids": []}"#, .missingField(path: "keys")),
            (#"{"keys": [], "keys": []}"#, .duplicateField(path: "keys")),
            (#"{"keys": {}}"#, .wrongType(path: "keys")),
            (#"{"keys": [{"intervalSeconds": 900, "key": "aa"}]}"#, .missingField(path: "keys[0].day")),
            (#"{"keys": [{"day": 1, "key": "aa"}]}"#, .missingField(path: "keys[0].intervalSeconds")),
            (#"{"keys": [{"day": 1, "intervalSeconds": 900}]}"#, .missingField(path: "keys[0].key")),
            (#"{"keys": [{"day": 1.5, "intervalSeconds": 900, "key": "aa"}]}"#, .notAnInteger(path: "keys[0].day")),
            (#"{"keys": [{"day": 1, "intervalSeconds": 900, "key": 7}]}"#, .wrongType(path: "keys[0].key")),
            (#"{"keys": [{"day": 1, "day": 2, "intervalSeconds": 900, "key": "aa"}]}"#, .duplicateField(path: "keys[0].day")),
            (#"{"keys": [1]}"#, .wrongType(path: "keys[0]")),
            (#"{"keys": [{"day": 1, "intervalSeconds": 900, "intervalSeconds": 900, "key": "aa"}]}"#,
             .duplicateField(path: "keys[0].intervalSeconds")),
            (#"{"keys": [{"day": 1, "intervalSeconds": 900, "key": "aa", "key": "bb"}]}"#, .duplicateField(path: "keys[0].key")),
            (#"{"keys": [{"day": 1, "intervalSeconds": 900, "key": null}]}"#, .wrongType(path: "keys[0].key")),
            (#"{"keys": [{"day": 1, "intervalSeconds": "900", "key": "aa"}]}"#, .wrongType(path: "keys[0].intervalSeconds")),
            (#"{"keys": [{"day": 1, "intervalSeconds": 900, "key": "aa"}, "x"]}"#, .wrongType(path: "keys[1]")),
        ]
        for (text, expected) in cases {
            #expect(throws: expected, "\(text)") { try decode(text) }
        }
        for truncated in [#"{"keys": [{"day": 1"#, #"{"keys""#, ""] {
            #expect(throws: HistoryDecodingError.self) { try decode(truncated) }
        }
    }

    @Test func hostileBodiesAreRefusedNotTrapped() throws {
        let deep = String(repeating: "[", count: 10_000) + String(repeating: "]", count: 10_000)
        #expect(throws: HistoryDecodingError.self) { try decode(#"{"keys": [{"x": \#(deep), "day": 1, "intervalSeconds": 900, "key": "aa"}]}"#) }
        #expect(throws: HistoryDecodingError.notAnInteger(path: "keys[0].day")) {
            try decode(#"{"keys": [{"day": 99999999999999999999, "intervalSeconds": 900, "key": "aa"}]}"#)
        }
        #expect(throws: HistoryDecodingError.notAnInteger(path: "keys[0].intervalSeconds")) {
            try decode(#"{"keys": [{"day": 1, "intervalSeconds": 1e400, "key": "aa"}]}"#)
        }
        #expect(throws: HistoryDecodingError.self) { try SubmittedKeyHistory(json: Data([0x7B, 0x22, 0xFF, 0x22, 0x3A, 0x31, 0x7D])) }
        // Extreme but well-formed values reach validation, which refuses them by position.
        let extreme = try decode(#"{"keys": [{"day": -9223372036854775808, "intervalSeconds": 9223372036854775807, "key": "\#(key("0"))"}]}"#)
        #expect(throws: KeyHistoryRejection.invalidInterval(position: 0, allowed: [900])) { try rules.validate(extreme, now: Self.now) }
    }

    func validate(_ keys: [SubmittedKey]) throws(KeyHistoryRejection) -> [DailyKeyRecord] {
        try rules.validate(SubmittedKeyHistory(keys: keys), now: Self.now)
    }

    @Test func acceptsTheRetentionPeriodAndToday() throws {
        let keys = (0...28).map { SubmittedKey(day: Self.today - Int64($0), intervalSeconds: 900, key: key("1")) }
        let records = try validate(keys)
        #expect(records.count == 29)
        #expect(records.first == DailyKeyRecord(day: UTCDay(number: Self.today), intervalSeconds: 900, key: try DailyKey(hex: key("1"))))
        // The same day at two intervals the server accepts is two keys (a node restarted with
        // another interval).
        let twoIntervals = KeyHistoryRules(maxKeys: 64, retentionDays: 28, clockSkewSeconds: 300, allowedIntervals: [600, 900])
        #expect(try twoIntervals.validate(SubmittedKeyHistory(keys: [
            SubmittedKey(day: Self.today, intervalSeconds: 900, key: key("1")),
            SubmittedKey(day: Self.today, intervalSeconds: 600, key: key("2")),
        ]), now: Self.now).count == 2)
    }

    @Test func refusesEachBadKeyWithItsPosition() throws {
        let good = SubmittedKey(day: Self.today, intervalSeconds: 900, key: key("1"))
        let cases: [(SubmittedKey, KeyHistoryRejection)] = [
            (SubmittedKey(day: Self.today - 1, intervalSeconds: 900, key: "abc"), .invalidKey(position: 1)),
            (SubmittedKey(day: Self.today - 1, intervalSeconds: 900, key: key("g")), .invalidKey(position: 1)),
            (SubmittedKey(day: Self.today - 1, intervalSeconds: 4, key: key("2")), .invalidInterval(position: 1, allowed: [900])),
            (SubmittedKey(day: Self.today - 1, intervalSeconds: 86_401, key: key("2")), .invalidInterval(position: 1, allowed: [900])),
            // Intervals a RotationSchedule takes but the deployment's nodes do not use: 5 s
            // would make each key 17,280 ids for every node to derive (issue 25).
            (SubmittedKey(day: Self.today - 1, intervalSeconds: 5, key: key("2")), .invalidInterval(position: 1, allowed: [900])),
            (SubmittedKey(day: Self.today - 1, intervalSeconds: 600, key: key("2")), .invalidInterval(position: 1, allowed: [900])),
            (SubmittedKey(day: Self.today - 29, intervalSeconds: 900, key: key("2")), .dayTooOld(position: 1, retentionDays: 28)),
            (SubmittedKey(day: -1, intervalSeconds: 900, key: key("2")), .dayTooOld(position: 1, retentionDays: 28)),
            (SubmittedKey(day: Self.today + 1, intervalSeconds: 900, key: key("2")), .dayInFuture(position: 1)),
            (SubmittedKey(day: .max, intervalSeconds: 900, key: key("2")), .dayInFuture(position: 1)),
            (SubmittedKey(day: Self.today, intervalSeconds: 900, key: key("2")), .duplicateDay(position: 1, first: 0)),
        ]
        for (bad, expected) in cases {
            #expect(throws: expected) { try validate([good, bad]) }
        }
        #expect(throws: KeyHistoryRejection.empty) { try validate([]) }
        let tooMany = (0..<65).map { SubmittedKey(day: Self.today - Int64($0 % 29), intervalSeconds: 900, key: key("3")) }
        #expect(throws: KeyHistoryRejection.tooManyKeys(count: 65, limit: 64)) { try validate(tooMany) }
    }
}
