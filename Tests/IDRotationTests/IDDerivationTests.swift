import Foundation
import IDRotation
import Testing
import TestTiers
import TracerCore

@Suite(.tags(.unit)) struct IDDerivationTests {
    /// docs/daily-keys.md, "Test vectors": computed with OpenSSL (Python's `cryptography`, AES-128
    /// in ECB mode, one block per window; three cross-checked with the `openssl enc` command), not
    /// with this code.
    struct Vector: Sendable, CustomTestStringConvertible {
        let key: String
        let interval: Int64
        let windowIndex: UInt32
        let block: String
        let id: String
        var testDescription: String { "\(key.prefix(8))… \(interval) s #\(windowIndex)" }
    }

    static let vectors: [Vector] = [
        Vector(key: "000102030405060708090a0b0c0d0e0f", interval: 900, windowIndex: 1_994_784,
               block: "545241434552494400000384001e7020", id: "23007d4a385af653"),
        Vector(key: "000102030405060708090a0b0c0d0e0f", interval: 900, windowIndex: 1_994_785,
               block: "545241434552494400000384001e7021", id: "afed9bb64c1eb8e1"),
        Vector(key: "000102030405060708090a0b0c0d0e0f", interval: 900, windowIndex: 1_994_879,
               block: "545241434552494400000384001e707f", id: "98dc4304778324a2"),
        Vector(key: "2b7e151628aed2a6abf7158809cf4f3c", interval: 900, windowIndex: 1_994_784,
               block: "545241434552494400000384001e7020", id: "541db73fa303d6e7"),
        Vector(key: "2b7e151628aed2a6abf7158809cf4f3c", interval: 900, windowIndex: 1_994_785,
               block: "545241434552494400000384001e7021", id: "041a1ba0ae9b408a"),
        Vector(key: "2b7e151628aed2a6abf7158809cf4f3c", interval: 900, windowIndex: 1_994_879,
               block: "545241434552494400000384001e707f", id: "d7a5e0814dd2c19e"),
        Vector(key: "2b7e151628aed2a6abf7158809cf4f3c", interval: 600, windowIndex: 2_992_176,
               block: "545241434552494400000258002da830", id: "d39f5bc3381212d2"),
        Vector(key: "2b7e151628aed2a6abf7158809cf4f3c", interval: 600, windowIndex: 2_992_177,
               block: "545241434552494400000258002da831", id: "e6e385e42e216f0f"),
        Vector(key: "2b7e151628aed2a6abf7158809cf4f3c", interval: 600, windowIndex: 2_992_319,
               block: "545241434552494400000258002da8bf", id: "a5c414db2bdb86f6"),
        Vector(key: "ffffffffffffffffffffffffffffffff", interval: 900, windowIndex: 1_994_880,
               block: "545241434552494400000384001e7080", id: "2cc40441200014ee"),
        Vector(key: "ffffffffffffffffffffffffffffffff", interval: 900, windowIndex: 1_994_881,
               block: "545241434552494400000384001e7081", id: "1592ffc10f39d431"),
        Vector(key: "ffffffffffffffffffffffffffffffff", interval: 900, windowIndex: 1_994_975,
               block: "545241434552494400000384001e70df", id: "22c9fe8599b740d2"),
        Vector(key: "8c3d1e55a0f41b6e9d27c4f0355e7a19", interval: 7, windowIndex: 256_472_229,
               block: "5452414345524944000000070f4974a5", id: "a697b1b3d40225c7"),
        Vector(key: "8c3d1e55a0f41b6e9d27c4f0355e7a19", interval: 7, windowIndex: 256_472_230,
               block: "5452414345524944000000070f4974a6", id: "9f92788ac342b455"),
        Vector(key: "8c3d1e55a0f41b6e9d27c4f0355e7a19", interval: 7, windowIndex: 256_484_571,
               block: "5452414345524944000000070f49a4db", id: "0e801928863c518c"),
    ]

    @Test(arguments: vectors)
    func singleIDMatchesTheVector(_ vector: Vector) throws {
        let derivation = try IDDerivation(intervalSeconds: vector.interval)
        let key = try DailyKey(hex: vector.key)
        #expect(Hex.encode(derivation.block(windowIndex: vector.windowIndex)) == vector.block)
        #expect(derivation.id(key: key, windowIndex: vector.windowIndex).hex == vector.id)
    }

    @Test(arguments: vectors)
    func batchMatchesTheVector(_ vector: Vector) throws {
        let derivation = try IDDerivation(intervalSeconds: vector.interval)
        let key = try DailyKey(hex: vector.key)
        // The vector's window inside a longer run, so the CTR counter has to reach it.
        let first = vector.windowIndex - min(vector.windowIndex, 5)
        let ids = derivation.ids(key: key, windowIndices: first..<(vector.windowIndex + 3))
        #expect(ids[Int(vector.windowIndex - first)].hex == vector.id)
    }

    /// The vectors' days: which window indices each covers (docs/daily-keys.md).
    @Test func windowIndicesOfADay() throws {
        let day = UTCDay(number: 20_779)
        #expect(day.date == "2026-11-22")
        #expect(try IDDerivation(intervalSeconds: 900).windowIndices(of: day) == 1_994_784..<1_994_880)
        #expect(try IDDerivation(intervalSeconds: 600).windowIndices(of: day) == 2_992_176..<2_992_320)
        #expect(try IDDerivation(intervalSeconds: 900).windowIndices(of: UTCDay(number: 20_780)) == 1_994_880..<1_994_976)
        // 7 s does not divide a day: the window whose slot begins at 23:59:56 on the 21st ends on
        // the 22nd but belongs to the 21st, whose key derives it.
        let seven = try IDDerivation(intervalSeconds: 7)
        #expect(seven.windowIndices(of: day) == 256_472_229..<256_484_572)
        #expect(seven.day(ofWindowIndex: 256_472_228) == UTCDay(number: 20_778))
        #expect(seven.day(ofWindowIndex: 256_472_229) == day)
        #expect(seven.windowIndices(of: UTCDay(number: 20_778)).upperBound == 256_472_229)
    }

    @Test func batchEqualsSingleOverWholeDays() throws {
        let key = DailyKey.random()
        // 96 windows (one pass) and 12,343 (many passes, and a range that starts mid-pass).
        for interval: Int64 in [900, 7] {
            let derivation = try IDDerivation(intervalSeconds: interval)
            let indices = derivation.windowIndices(of: UTCDay(number: 20_779))
            let batch = derivation.ids(key: key, windowIndices: indices)
            #expect(batch.count == indices.count)
            let single = indices.map { derivation.id(key: key, windowIndex: $0) }
            #expect(batch == single, "interval \(interval)")
        }
    }

    @Test func theBatchWritesOnlyItsRangeOfTheCallersBuffer() throws {
        let derivation = try IDDerivation(intervalSeconds: 900)
        let key = DailyKey.random()
        let sentinel = UserID(rawValue: 0x5e47_1ee1)
        var buffer = [UserID](repeating: sentinel, count: 100)
        buffer.withUnsafeMutableBufferPointer { derivation.ids(key: key, windowIndices: 10..<106, into: $0) }
        #expect(Array(buffer.prefix(96)) == derivation.ids(key: key, windowIndices: 10..<106))
        #expect(buffer.suffix(4).allSatisfy { $0 == sentinel })
    }

    @Test func differentDaysKeysAndIntervalsGiveDifferentIDs() throws {
        let derivation = try IDDerivation(intervalSeconds: 900)
        let key = DailyKey.random()
        let other = DailyKey.random()
        let today = derivation.ids(key: key, day: UTCDay(number: 20_779))
        let tomorrow = derivation.ids(key: key, day: UTCDay(number: 20_780))
        let otherToday = derivation.ids(key: other, day: UTCDay(number: 20_779))
        let tenMinutes = try IDDerivation(intervalSeconds: 600).ids(key: key, day: UTCDay(number: 20_779))
        #expect(Set(today).count == 96)
        #expect(Set(today).isDisjoint(with: tomorrow))
        #expect(Set(today).isDisjoint(with: otherToday))
        #expect(Set(today).isDisjoint(with: tenMinutes))
    }

    /// Every window a schedule hands out, with jitter and pauses, gets its own index, increasing,
    /// and the day of its slot: the rule the rotator and a matcher both rely on.
    @Test func scheduledWindowsGetIncreasingIndicesInTheirSlotsDay() throws {
        let schedule = try RotationSchedule(intervalSeconds: 900, jitterSeconds: 300)
        let derivation = IDDerivation(schedule: schedule)
        var now: UnixSeconds = 1_795_391_000  // 23:43:20 on 2026-11-22
        var previous: IDWindow?
        var previousIndex: UInt32?
        for step in 0..<500 {
            let window = schedule.window(after: previous, at: now)
            let index = try #require(derivation.windowIndex(ofWindowStartingAt: window.start))
            if let previousIndex { #expect(index > previousIndex) }
            #expect(derivation.nominalStart(ofWindowIndex: index) <= window.start)
            #expect(window.start - derivation.nominalStart(ofWindowIndex: index) < 300)
            #expect(derivation.day(ofWindowIndex: index) == UTCDay(containing: derivation.nominalStart(ofWindowIndex: index)))
            #expect(derivation.windowIndices(of: derivation.day(ofWindowIndex: index)).contains(index))
            previous = window
            previousIndex = index
            // Mostly on time, sometimes late, now and then after a pause of hours.
            now = window.end + (step % 7 == 0 ? 3 : 0) + (step % 41 == 0 ? 10_000 : 0)
        }
    }

    @Test func windowsOutsideTheIndexRangeHaveNoIndex() throws {
        let derivation = try IDDerivation(intervalSeconds: 900)
        #expect(derivation.windowIndex(ofWindowStartingAt: -1) == nil)
        #expect(derivation.windowIndex(ofWindowStartingAt: 0) == 0)
        #expect(derivation.windowIndex(ofWindowStartingAt: Int64(UInt32.max) * 900 + 899) == UInt32.max)
        #expect(derivation.windowIndex(ofWindowStartingAt: (Int64(UInt32.max) + 1) * 900) == nil)
        #expect(derivation.windowIndices(of: UTCDay(number: -1)).isEmpty)
        #expect(throws: RotationScheduleError.self) { try IDDerivation(intervalSeconds: 4) }
    }
}
