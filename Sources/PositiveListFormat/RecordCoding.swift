import TracerCore

/// The 16-byte id entry (id, validFrom, validUntil) as id batches and log entries hold it: one
/// encoding and one set of checks for both, so that the two can never disagree on a byte.
enum IDEntryCoding {
    static let byteCount = 16

    /// Appends `entries`, which must be sorted by id without duplicates and have well-formed
    /// windows that fit 32 bits; `position` in an error counts from the first of them.
    static func append(_ entries: some Sequence<PositiveListEntry>, to writer: inout ByteWriter) throws(PositiveListFormatError) {
        var previous: UserID?
        for (position, entry) in entries.enumerated() {
            // The order is part of the privacy promise (it must not reveal upload order), so a
            // caller's mistake is refused here rather than published.
            if let previous, entry.id <= previous { throw .entriesNotSorted(position: position) }
            guard entry.validUntil > entry.validFrom else { throw .malformedWindow(position: position) }
            guard let from = UInt32(exactly: entry.validFrom) else { throw .timeOutOfRange(.validFrom) }
            guard let until = UInt32(exactly: entry.validUntil) else { throw .timeOutOfRange(.validUntil) }
            writer.append(entry.id.rawValue)
            writer.append(from)
            writer.append(until)
            previous = entry.id
        }
    }

    /// Checks `count` entries from `offset` (the length already checked): strictly increasing
    /// ids, windows that end after they start.
    static func check(_ bytes: [UInt8], at offset: Int, count: Int) throws(PositiveListFormatError) {
        try bytes.withUnsafeBytes { raw in
            Result { () throws(PositiveListFormatError) in try check(UnsafeRawBufferPointer(rebasing: raw[offset..<(offset + count * byteCount)])) }
        }.get()
    }

    /// The same checks on whole records in place, read as loads rather than byte by byte: a node
    /// checks every listed id of a national list before it matches them.
    static func check(_ records: UnsafeRawBufferPointer) throws(PositiveListFormatError) {
        var previous: UInt64?
        for position in 0..<(records.count / byteCount) {
            let start = position * byteCount
            let id = UInt64(bigEndian: records.loadUnaligned(fromByteOffset: start, as: UInt64.self))
            if let previous, id <= previous { throw .entriesNotSorted(position: position) }
            let from = UInt32(bigEndian: records.loadUnaligned(fromByteOffset: start + 8, as: UInt32.self))
            let until = UInt32(bigEndian: records.loadUnaligned(fromByteOffset: start + 12, as: UInt32.self))
            guard until > from else { throw .malformedWindow(position: position) }
            previous = id
        }
    }

    static func read(_ bytes: [UInt8], at offset: Int) -> PositiveListEntry {
        PositiveListEntry(
            id: UserID(rawValue: bytes.readInteger(at: offset, as: UInt64.self)),
            validFrom: UnixSeconds(bytes.readInteger(at: offset + 8, as: UInt32.self)),
            validUntil: UnixSeconds(bytes.readInteger(at: offset + 12, as: UInt32.self)))
    }
}

/// The 12-byte key group (UTC day, rotation interval, key count) and the order of keys within
/// groups, as key batches and log entries hold them.
package enum KeyGroupCoding {
    static let byteCount = 12
    static let keyByteCount = DailyKey.byteCount

    struct RawGroup: Equatable {
        var day: UInt32
        var interval: UInt32
        var count: UInt32
    }

    /// The published order: (day, interval), then key bytes.
    package static func sorted(_ records: [DailyKeyRecord]) -> [DailyKeyRecord] {
        records.sorted { lhs, rhs in
            if lhs.day != rhs.day { return lhs.day < rhs.day }
            if lhs.intervalSeconds != rhs.intervalSeconds { return lhs.intervalSeconds < rhs.intervalSeconds }
            return lhs.key.bytes.lexicographicallyPrecedes(rhs.key.bytes)
        }
    }

    /// The groups of `sorted` (in the published order); refuses a day or interval out of range
    /// and a key repeated within its group.
    static func groups(of sorted: some RandomAccessCollection<DailyKeyRecord>) throws(PositiveListFormatError) -> [RawGroup] {
        var groups: [RawGroup] = []
        var previous: DailyKeyRecord?
        for (position, record) in sorted.enumerated() {
            guard let day = UInt32(exactly: record.day.number), let interval = UInt32(exactly: record.intervalSeconds),
                  isInRange(day: day, interval: interval)
            else { throw .keyGroupOutOfRange(group: groups.count) }
            if let last = groups.last, last.day == day, last.interval == interval {
                guard previous?.key.bytes != record.key.bytes else { throw .keysNotSorted(position: position) }
                groups[groups.count - 1].count += 1
            } else {
                groups.append(RawGroup(day: day, interval: interval, count: 1))
            }
            previous = record
        }
        return groups
    }

    static func append(_ groups: [RawGroup], to writer: inout ByteWriter) {
        for group in groups {
            writer.append(group.day)
            writer.append(group.interval)
            writer.append(group.count)
        }
    }

    /// A rotation interval of 5 s to a day, and a day whose windows a 32-bit index can number.
    static func isInRange(day: UInt32, interval: UInt32) -> Bool {
        guard let derivation = try? IDDerivation(intervalSeconds: Int64(interval)) else { return false }
        return !derivation.windowIndices(of: UTCDay(number: Int64(day))).isEmpty
    }

    /// Reads and checks `groupCount` groups from `offset` that must number `keyCount` keys in
    /// all, then checks that the keys (from `keysOffset`) increase within each group.
    static func decode(
        _ bytes: [UInt8], groupsAt offset: Int, groupCount: Int, keysAt keysOffset: Int, keyCount: Int
    ) throws(PositiveListFormatError) -> [PositiveListKeyBatch.Group] {
        var groups: [PositiveListKeyBatch.Group] = []
        groups.reserveCapacity(groupCount)
        var start = 0
        var previous: (day: UInt32, interval: UInt32)?
        for group in 0..<groupCount {
            let at = offset + group * byteCount
            let day = bytes.readInteger(at: at, as: UInt32.self)
            let interval = bytes.readInteger(at: at + 4, as: UInt32.self)
            let count = Int(bytes.readInteger(at: at + 8, as: UInt32.self))
            if let previous, (previous.day, previous.interval) >= (day, interval) { throw .keyGroupsNotSorted(group: group) }
            guard count > 0 else { throw .emptyKeyGroup(group: group) }
            guard isInRange(day: day, interval: interval) else { throw .keyGroupOutOfRange(group: group) }
            guard start + count <= keyCount else { throw .keyCountMismatch(header: UInt64(keyCount), groups: UInt64(start + count)) }
            groups.append(PositiveListKeyBatch.Group(day: UTCDay(number: Int64(day)), intervalSeconds: Int64(interval), keys: start..<start + count))
            start += count
            previous = (day, interval)
        }
        guard start == keyCount else { throw .keyCountMismatch(header: UInt64(keyCount), groups: UInt64(start)) }
        for group in groups {
            for position in group.keys.dropFirst() {
                let at = keysOffset + position * keyByteCount
                guard bytes[at - keyByteCount..<at].lexicographicallyPrecedes(bytes[at..<at + keyByteCount]) else {
                    throw .keysNotSorted(position: position)
                }
            }
        }
        return groups
    }
}
