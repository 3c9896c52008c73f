import TracerCore

/// One entry of the positive list's log (format version 3, docs/positive-list-format.md): the
/// whole of one published batch, or one part of it when the batch is larger than a log entry
/// may be (65,535 bytes, the entry bundle's 16-bit length).
///
/// Layout (big-endian): kind (1 byte: 1 ids, 2 keys), batch number (8), part p (2), part count
/// P (2), then the payload. Ids: 16-byte entries as in an id batch, strictly increasing. Keys: a
/// 2-byte group count G, G 12-byte groups as in a key batch (counting only this part's keys),
/// then the keys group after group. Decoding is strict: one byte string per entry, and never a
/// trap on hostile bytes. The entry knows nothing of the log it is in (no TransparencyLog).
public struct ListLogEntry: Sendable, Equatable {
    public enum Kind: UInt8, Sendable {
        case ids = 1
        case keys = 2
    }

    public enum Payload: Sendable, Equatable {
        /// A contiguous run of the batch's sorted entries, at least one.
        case ids([PositiveListEntry])
        /// Keys in published order ((day, interval), then key bytes), at least one.
        case keys([DailyKeyRecord])
    }

    public static let headerByteCount = 13
    /// The largest entry a tlog-tiles entry bundle can hold.
    public static let maximumByteCount = 65_535
    /// Ids in a part: (65,535 - 13) / 16.
    public static let maximumIDsPerEntry = (maximumByteCount - headerByteCount) / IDEntryCoding.byteCount

    public let batchNumber: UInt64
    public let part: UInt16
    public let partCount: UInt16
    public let payload: Payload

    public var kind: Kind {
        switch payload {
        case .ids: .ids
        case .keys: .keys
        }
    }

    public init(batchNumber: UInt64, part: UInt16, partCount: UInt16, payload: Payload) {
        self.batchNumber = batchNumber
        self.part = part
        self.partCount = partCount
        self.payload = payload
    }

    /// Encodes the entry; refuses what `init(decoding:)` would refuse (empty, unsorted, too
    /// large, a part out of range), so the server cannot publish an entry its nodes reject.
    public func encode() throws(PositiveListFormatError) -> [UInt8] {
        guard partCount >= 1, part < partCount else { throw .logEntryMalformed("part \(part) of \(partCount)") }
        var writer = ByteWriter(capacity: Self.headerByteCount)
        writer.append(kind.rawValue)
        writer.append(batchNumber)
        writer.append(part)
        writer.append(partCount)
        switch payload {
        case .ids(let entries):
            guard !entries.isEmpty else { throw .logEntryMalformed("an ids entry holds no id") }
            try IDEntryCoding.append(entries, to: &writer)
        case .keys(let records):
            guard !records.isEmpty else { throw .logEntryMalformed("a keys entry holds no key") }
            // The order is the published one; the caller's order is checked, not changed, so
            // that what is published part by part is what was cut.
            guard KeyGroupCoding.sorted(records) == records else { throw .keysNotSorted(position: 0) }
            let groups = try KeyGroupCoding.groups(of: records)
            guard let groupCount = UInt16(exactly: groups.count) else { throw .logEntryMalformed("\(groups.count) key groups") }
            writer.append(groupCount)
            KeyGroupCoding.append(groups, to: &writer)
            for record in records { writer.append(record.key.bytes) }
        }
        guard writer.bytes.count <= Self.maximumByteCount else {
            throw .logEntryMalformed("\(writer.bytes.count) bytes, more than \(Self.maximumByteCount)")
        }
        return writer.bytes
    }

    /// The fixed fields of an entry, before its payload.
    public struct Header: Sendable, Hashable {
        public var kind: Kind
        public var batchNumber: UInt64
        public var part: UInt16
        public var partCount: UInt16
    }

    /// An entry's header, checked as `init(decoding:)` checks it, without its payload: what a
    /// reader needs to tell parts apart before deciding to decode one.
    public static func header(of bytes: UnsafeRawBufferPointer) throws(PositiveListFormatError) -> Header {
        guard bytes.count <= maximumByteCount else { throw .logEntryMalformed("\(bytes.count) bytes, more than \(maximumByteCount)") }
        guard bytes.count >= headerByteCount else { throw .truncated(.logEntry, byteCount: bytes.count) }
        guard let kind = Kind(rawValue: bytes[0]) else { throw .logEntryMalformed("kind \(bytes[0]) is neither 1 (ids) nor 2 (keys)") }
        let header = Header(
            kind: kind, batchNumber: UInt64(bigEndian: bytes.loadUnaligned(fromByteOffset: 1, as: UInt64.self)),
            part: UInt16(bigEndian: bytes.loadUnaligned(fromByteOffset: 9, as: UInt16.self)),
            partCount: UInt16(bigEndian: bytes.loadUnaligned(fromByteOffset: 11, as: UInt16.self)))
        guard header.partCount >= 1, header.part < header.partCount else { throw .logEntryMalformed("part \(header.part) of \(header.partCount)") }
        return header
    }

    /// An ids entry's 16-byte records in place (id, valid from, valid until; big-endian), checked
    /// as `init(decoding:)` checks them but not decoded: for a node probing every id of a national
    /// list. Throws for a keys entry, as for any entry that does not decode.
    public static func idRecords(of bytes: UnsafeRawBufferPointer) throws(PositiveListFormatError) -> UnsafeRawBufferPointer {
        let header = try header(of: bytes)
        guard header.kind == .ids else { throw .logEntryMalformed("a keys entry holds no ids") }
        let payloadBytes = bytes.count - headerByteCount
        guard payloadBytes > 0, payloadBytes % IDEntryCoding.byteCount == 0 else {
            throw .logEntryMalformed("an ids payload of \(payloadBytes) bytes is not a positive multiple of 16")
        }
        let records = UnsafeRawBufferPointer(rebasing: bytes[headerByteCount...])
        try IDEntryCoding.check(records)
        return records
    }

    /// Parses one log entry strictly.
    public init(decoding bytes: [UInt8]) throws(PositiveListFormatError) {
        let header = try bytes.withUnsafeBytes { raw in Result { () throws(PositiveListFormatError) in try Self.header(of: raw) } }.get()
        let (number, part, partCount) = (header.batchNumber, header.part, header.partCount)
        switch header.kind {
        case .ids:
            try bytes.withUnsafeBytes { raw in Result { () throws(PositiveListFormatError) in _ = try Self.idRecords(of: raw) } }.get()
            let count = (bytes.count - Self.headerByteCount) / IDEntryCoding.byteCount
            let entries = (0..<count).map { IDEntryCoding.read(bytes, at: Self.headerByteCount + $0 * IDEntryCoding.byteCount) }
            self.init(batchNumber: number, part: part, partCount: partCount, payload: .ids(entries))
        case .keys:
            guard bytes.count >= Self.headerByteCount + 2 else { throw .truncated(.logEntry, byteCount: bytes.count) }
            let groupCount = Int(bytes.readInteger(at: Self.headerByteCount, as: UInt16.self))
            guard groupCount >= 1 else { throw .logEntryMalformed("a keys entry has no group") }
            let groupsOffset = Self.headerByteCount + 2
            let keysOffset = groupsOffset + groupCount * KeyGroupCoding.byteCount
            guard bytes.count >= keysOffset, (bytes.count - keysOffset) % KeyGroupCoding.keyByteCount == 0 else {
                throw .logEntryMalformed("\(bytes.count) bytes do not hold \(groupCount) groups and whole 16-byte keys")
            }
            let keyCount = (bytes.count - keysOffset) / KeyGroupCoding.keyByteCount
            guard keyCount >= 1 else { throw .logEntryMalformed("a keys entry holds no key") }
            let groups = try KeyGroupCoding.decode(bytes, groupsAt: groupsOffset, groupCount: groupCount, keysAt: keysOffset, keyCount: keyCount)
            var records: [DailyKeyRecord] = []
            records.reserveCapacity(keyCount)
            for group in groups {
                for position in group.keys {
                    let at = keysOffset + position * KeyGroupCoding.keyByteCount
                    // Exactly 16 bytes by the length check above.
                    let key = try! DailyKey(bytes: bytes[at..<at + KeyGroupCoding.keyByteCount])
                    records.append(DailyKeyRecord(day: group.day, intervalSeconds: group.intervalSeconds, key: key))
                }
            }
            self.init(batchNumber: number, part: part, partCount: partCount, payload: .keys(records))
        }
    }

    /// Cuts a whole id batch (entries sorted by id) into log entries, each as large as fits.
    public static func entries(idBatch number: UInt64, entries: [PositiveListEntry]) throws(PositiveListFormatError) -> [ListLogEntry] {
        guard !entries.isEmpty else { return [] }
        var chunks: [[PositiveListEntry]] = []
        for start in stride(from: 0, to: entries.count, by: maximumIDsPerEntry) {
            chunks.append(Array(entries[start..<min(start + maximumIDsPerEntry, entries.count)]))
        }
        guard let count = UInt16(exactly: chunks.count) else { throw .logEntryMalformed("\(chunks.count) parts") }
        return chunks.enumerated().map { ListLogEntry(batchNumber: number, part: UInt16($0.offset), partCount: count, payload: .ids($0.element)) }
    }

    /// Cuts a whole key batch into log entries, each as large as fits: keys in published order,
    /// a part closed when one more key (and its group, if it starts one) would pass the limit.
    public static func entries(keyBatch number: UInt64, records: [DailyKeyRecord]) throws(PositiveListFormatError) -> [ListLogEntry] {
        let sorted = KeyGroupCoding.sorted(records)
        var chunks: [ArraySlice<DailyKeyRecord>] = []
        var start = 0
        var size = headerByteCount + 2
        for (position, record) in sorted.enumerated() {
            let opensGroup = position == start
                || (sorted[position - 1].day, sorted[position - 1].intervalSeconds) != (record.day, record.intervalSeconds)
            let added = KeyGroupCoding.keyByteCount + (opensGroup ? KeyGroupCoding.byteCount : 0)
            if size + added > maximumByteCount {
                chunks.append(sorted[start..<position])
                start = position
                size = headerByteCount + 2 + KeyGroupCoding.byteCount + KeyGroupCoding.keyByteCount
            } else {
                size += added
            }
        }
        if start < sorted.count { chunks.append(sorted[start...]) }
        guard let count = UInt16(exactly: chunks.count) else { throw .logEntryMalformed("\(chunks.count) parts") }
        return chunks.enumerated().map {
            ListLogEntry(batchNumber: number, part: UInt16($0.offset), partCount: count, payload: .keys(Array($0.element)))
        }
    }
}

// MARK: Retention

extension ListLogEntry {
    /// When the entry's last record ends: the latest `validUntil` of its ids, or the end of the
    /// latest UTC day of its keys (a key's ids are valid until its day ends).
    public var latestRecordEnd: UnixSeconds {
        switch payload {
        case .ids(let listed): listed.map(\.validUntil).max() ?? .min
        case .keys(let records): records.map(\.day.end).max() ?? .min
        }
    }

    /// The retention rule of the log (docs/positive-list-format.md, "Retention"), shared by the
    /// node, which keeps and fetches only live entries, and the server, which deletes the entry
    /// bundles before the first live one: an entry is live while one of its records ends at or
    /// after `cutoff`.
    public func isLive(cutoff: UnixSeconds) -> Bool { latestRecordEnd >= cutoff }

    /// Until when the entry's bytes are live: its `latestRecordEnd`, or for ever (`.max`) when
    /// they do not parse, so that what a reader cannot read it never throws away.
    public static func liveUntil(_ bytes: [UInt8]) -> UnixSeconds {
        (try? ListLogEntry(decoding: bytes))?.latestRecordEnd ?? .max
    }

    /// The same rule on an entry's bytes (bytes that do not parse are live).
    public static func isLive(_ bytes: [UInt8], cutoff: UnixSeconds) -> Bool { liveUntil(bytes) >= cutoff }
}
