/// A calendar day in UTC, numbered from 1970-01-01 (day 0): the unit a node draws keys for.
public struct UTCDay: Hashable, Comparable, Sendable, Codable, CustomStringConvertible {
    public let number: Int64

    public init(number: Int64) {
        self.number = number
    }

    /// The day that `time` falls in.
    public init(containing time: UnixSeconds) {
        // Floor division, so that a time before 1970 still falls in the day that contains it.
        let quotient = time / .secondsPerDay
        number = (time % .secondsPerDay != 0 && time < 0) ? quotient - 1 : quotient
    }

    /// 00:00:00 UTC of the day.
    public var start: UnixSeconds { number * .secondsPerDay }
    /// 00:00:00 UTC of the next day.
    public var end: UnixSeconds { start + .secondsPerDay }

    /// YYYY-MM-DD (proleptic Gregorian), computed without a calendar so that no time-zone setting
    /// can shift it. Howard Hinnant's `civil_from_days`.
    public var date: String {
        let shifted = number + 719_468
        let era = (shifted >= 0 ? shifted : shifted - 146_096) / 146_097
        let dayOfEra = shifted - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1_460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let shiftedMonth = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * shiftedMonth + 2) / 5 + 1
        let month = shiftedMonth < 10 ? shiftedMonth + 3 : shiftedMonth - 9
        let year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0)
        func padded(_ value: Int64, _ width: Int) -> String {
            let text = String(value)
            return String(repeating: "0", count: max(0, width - text.count)) + text
        }
        return padded(year, 4) + "-" + padded(month, 2) + "-" + padded(day, 2)
    }

    public var description: String { date }

    public static func < (lhs: UTCDay, rhs: UTCDay) -> Bool { lhs.number < rhs.number }
}

/// Why bytes or text could not be read as a `DailyKey`.
public enum DailyKeyError: Error, Equatable, Sendable, CustomStringConvertible {
    case wrongByteCount(Int)
    case invalidHex

    public var description: String {
        switch self {
        case .wrongByteCount(let count):
            return "a daily key is exactly 16 bytes, got \(count)"
        case .invalidHex:
            // The rejected text is not echoed: it may be a real key.
            return "a daily key is written as exactly 32 hexadecimal characters"
        }
    }
}

/// The 16 random bytes a node draws for one UTC day; every userId it broadcasts that day is
/// derived from it (`IDDerivation`, docs/daily-keys.md).
///
/// Whoever holds a day's key can compute all of that day's ids, and so link them to each other:
/// the key is as private as all of the day's ids together. Interpolating a key into a string, or
/// dumping it, yields no byte of it; code that must store, export or upload it asks for `bytes`
/// or `hex`.
public struct DailyKey: Hashable, Sendable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    public static let byteCount = 16

    public let bytes: [UInt8]

    public init<Bytes: Collection>(bytes: Bytes) throws(DailyKeyError) where Bytes.Element == UInt8 {
        guard bytes.count == Self.byteCount else { throw .wrongByteCount(bytes.count) }
        self.bytes = Array(bytes)
    }

    public init(hex: String) throws(DailyKeyError) {
        guard hex.utf8.count == 2 * Self.byteCount, let bytes = Hex.decode(hex) else { throw .invalidHex }
        self.bytes = bytes
    }

    /// A fresh key from the operating system's CSPRNG (`getrandom(2)` on Linux).
    public static func random() -> DailyKey {
        var generator = SystemRandomNumberGenerator()
        return random(using: &generator)
    }

    public static func random<Generator: RandomNumberGenerator>(using generator: inout Generator) -> DailyKey {
        let words: [UInt64] = [generator.next(), generator.next()]
        let bytes = words.flatMap { word in (0..<8).map { UInt8(truncatingIfNeeded: word >> (8 * (7 - $0))) } }
        // Exactly 16 bytes by construction.
        return try! DailyKey(bytes: bytes)
    }

    /// Lowercase hexadecimal, 32 characters: for export and upload, never for logs.
    public var hex: String { Hex.encode(bytes) }

    public var description: String { "DailyKey(redacted)" }
    public var debugDescription: String { description }
    public var customMirror: Mirror { Mirror(self, children: [:]) }
}

/// A daily key with what it derives: the ids of the windows of `day` at `intervalSeconds`. The
/// node keeps its own keys this way; a published key is the same triple.
public struct DailyKeyRecord: Hashable, Sendable {
    public let day: UTCDay
    public let intervalSeconds: Int64
    public let key: DailyKey

    public init(day: UTCDay, intervalSeconds: Int64, key: DailyKey) {
        self.day = day
        self.intervalSeconds = intervalSeconds
        self.key = key
    }
}
