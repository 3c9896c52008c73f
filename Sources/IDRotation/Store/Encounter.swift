import Foundation
import TracerCore

/// How a peer's id reached us. Both can happen in one window.
public struct LearnedBy: OptionSet, Hashable, Sendable {
    public let rawValue: Int
    public init(rawValue: Int) { self.rawValue = rawValue }

    /// We connected and read the id from the peer's GATT service.
    public static let read = LearnedBy(rawValue: 1)
    /// The peer connected and wrote its id to our GATT service.
    public static let written = LearnedBy(rawValue: 2)

    public var names: [String] {
        var names: [String] = []
        if contains(.read) { names.append("read") }
        if contains(.written) { names.append("written") }
        return names
    }
}

/// One observation of a peer id: an exchange, or an advertising report from an address whose id
/// we learned earlier in the window (then `learnedBy` is empty).
public struct Sighting: Sendable, Hashable {
    public var peer: UserID
    /// The start of our own id's window at the time: encounters are kept per our window.
    public var ownWindowStart: UnixSeconds
    public var time: UnixSeconds
    /// The RSSI we measured, when known.
    public var rssi: Int8?
    /// The peer's advertised TX power, when known.
    public var txPower: Int8?
    /// The RSSI the peer says it measured for us (10-byte write form).
    public var reportedRSSI: Int8?
    public var learnedBy: LearnedBy
    /// Where this node was, when it knew (`EncounterLog` fills it in from the place in force).
    public var place: Place?

    public init(
        peer: UserID, ownWindowStart: UnixSeconds, time: UnixSeconds, rssi: Int8? = nil,
        txPower: Int8? = nil, reportedRSSI: Int8? = nil, learnedBy: LearnedBy = [], place: Place? = nil
    ) {
        self.place = place
        self.peer = peer
        self.ownWindowStart = ownWindowStart
        self.time = time
        self.rssi = rssi
        self.txPower = txPower
        self.reportedRSSI = reportedRSSI
        self.learnedBy = learnedBy
    }
}

/// Everything known about one peer id during one of our windows: the aggregate of its sightings.
public struct Encounter: Sendable, Hashable {
    public struct Key: Hashable, Sendable {
        public var peer: UserID
        public var ownWindowStart: UnixSeconds
    }

    public var peer: UserID
    public var ownWindowStart: UnixSeconds
    public var firstSeen: UnixSeconds
    public var lastSeen: UnixSeconds
    public var sightings: Int
    public var rssiMin: Int8?
    public var rssiMax: Int8?
    public var rssiSum: Int
    public var rssiCount: Int
    public var txPower: Int8?
    public var reportedRSSI: Int8?
    public var learnedBy: LearnedBy
    /// How many readings had each RSSI value: the shape of the window, so that the risk model can
    /// split its contact time by attenuation (`risk.attenuation_summary = buckets`). Empty for a
    /// row logged before schema v3, which kept only the bounds, sum and count.
    public var rssiHistogram: RSSIHistogram
    /// Where this node was when the window's contact began (the first sighting that knew); nil
    /// for a node without a place, without a fix, or a row logged before places were recorded.
    public var place: Place?

    public init(_ sighting: Sighting) {
        place = sighting.place
        peer = sighting.peer
        ownWindowStart = sighting.ownWindowStart
        firstSeen = sighting.time
        lastSeen = sighting.time
        sightings = 1
        rssiMin = sighting.rssi
        rssiMax = sighting.rssi
        rssiSum = sighting.rssi.map(Int.init) ?? 0
        rssiCount = sighting.rssi == nil ? 0 : 1
        txPower = sighting.txPower
        reportedRSSI = sighting.reportedRSSI
        learnedBy = sighting.learnedBy
        rssiHistogram = RSSIHistogram()
        if let rssi = sighting.rssi { rssiHistogram.add(rssi) }
    }

    public var key: Key { Key(peer: peer, ownWindowStart: ownWindowStart) }

    public var rssiMean: Double? { rssiCount > 0 ? Double(rssiSum) / Double(rssiCount) : nil }

    /// How long the peer was seen within this window, in seconds.
    public var duration: Int64 { lastSeen - firstSeen }

    /// Folds another observation of the same key into this one.
    public mutating func add(_ sighting: Sighting) {
        firstSeen = min(firstSeen, sighting.time)
        lastSeen = max(lastSeen, sighting.time)
        sightings += 1
        if let rssi = sighting.rssi {
            rssiMin = rssiMin.map { min($0, rssi) } ?? rssi
            rssiMax = rssiMax.map { max($0, rssi) } ?? rssi
            rssiSum += Int(rssi)
            rssiCount += 1
            rssiHistogram.add(rssi)
        }
        if let txPower = sighting.txPower { self.txPower = txPower }
        if let reported = sighting.reportedRSSI { reportedRSSI = reported }
        learnedBy.formUnion(sighting.learnedBy)
        if place == nil { place = sighting.place }
    }

    /// Folds another encounter of the same key into this one, as the store's upsert folds a row
    /// into the one it has (`EncounterStore.upsertEncounter`): `other` is the later observation.
    public mutating func merge(_ other: Encounter) {
        firstSeen = min(firstSeen, other.firstSeen)
        lastSeen = max(lastSeen, other.lastSeen)
        sightings += other.sightings
        rssiMin = [rssiMin, other.rssiMin].compactMap { $0 }.min()
        rssiMax = [rssiMax, other.rssiMax].compactMap { $0 }.max()
        rssiSum += other.rssiSum
        rssiCount += other.rssiCount
        for (rssi, count) in other.rssiHistogram.counts { rssiHistogram.add(rssi, count: count) }
        txPower = other.txPower ?? txPower
        reportedRSSI = other.reportedRSSI ?? reportedRSSI
        learnedBy.formUnion(other.learnedBy)
        if place == nil { place = other.place }
    }
}

/// How many RSSI readings had each value (dBm), stored compactly: per value present, its byte
/// (two's complement) and its count as 4 bytes big-endian, in ascending order of value. Kept as
/// a sorted array, not a dictionary: it is updated for every sighting and merged in every upsert,
/// and a window rarely holds more than a few dozen distinct values.
public struct RSSIHistogram: Sendable, Hashable {
    struct Entry: Sendable, Hashable {
        var rssi: Int8
        var count: UInt32
    }

    private(set) var entries: [Entry] = []

    public init() {}

    public init(_ counts: [Int8: Int]) {
        for (rssi, count) in counts where count > 0 { add(rssi, count: count) }
    }

    public var counts: [Int8: Int] {
        Dictionary(uniqueKeysWithValues: entries.map { ($0.rssi, Int($0.count)) })
    }

    public var isEmpty: Bool { entries.isEmpty }
    public var total: Int { entries.reduce(0) { $0 + Int($1.count) } }

    public mutating func add(_ rssi: Int8, count: Int = 1) {
        var index = entries.count
        while index > 0 && entries[index - 1].rssi > rssi { index -= 1 }
        if index > 0 && entries[index - 1].rssi == rssi {
            entries[index - 1].count = entries[index - 1].count.addingSaturating(UInt32(clamping: count))
        } else {
            entries.insert(Entry(rssi: rssi, count: UInt32(clamping: count)), at: index)
        }
    }

    static let entrySize = 5

    public var encoded: [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(entries.count * Self.entrySize)
        for entry in entries { Self.append(entry, to: &bytes) }
        return bytes
    }

    /// nil when `bytes` is not a whole number of entries in ascending order of value.
    public init?(encoded bytes: some Collection<UInt8>) {
        guard let entries = Self.entries(Array(bytes)) else { return nil }
        self.entries = entries
    }

    /// Two encoded histograms merged into one, without building either: what the store's upsert
    /// runs for every row it updates. nil when either is not a valid encoding.
    public static func mergeEncoded(_ left: [UInt8], _ right: [UInt8]) -> [UInt8]? {
        var valid = true
        let merged = [UInt8](unsafeUninitializedCapacity: left.count + right.count) { output, count in
            let written = left.withUnsafeBytes { left in
                right.withUnsafeBytes { right in merge(left, right, into: UnsafeMutableRawBufferPointer(output)) }
            }
            valid = written != nil
            count = written ?? 0
        }
        return valid ? merged : nil
    }

    /// The same on blobs as SQLite hands them to the upsert's merge function, with no copy into
    /// arrays and back: the merge runs once per row a flush updates, so copies cost throughput.
    public static func mergeEncoded(_ left: Data, _ right: Data) -> Data? {
        var merged = Data(count: left.count + right.count)
        let written = merged.withUnsafeMutableBytes { output in
            left.withUnsafeBytes { left in right.withUnsafeBytes { right in merge(left, right, into: output) } }
        }
        guard let written else { return nil }
        merged.count = written
        return merged
    }

    /// Merges two encodings into `output`, which has room for both; returns the bytes written, or
    /// nil when either is not a whole number of entries in ascending order of value.
    private static func merge(
        _ left: UnsafeRawBufferPointer, _ right: UnsafeRawBufferPointer, into output: UnsafeMutableRawBufferPointer
    ) -> Int? {
        guard left.count % entrySize == 0, right.count % entrySize == 0 else { return nil }
        var (l, r, written) = (0, 0, 0)
        var previous: Int8?
        while l < left.count || r < right.count {
            let entry: Entry
            if r >= right.count || (l < left.count && Int8(bitPattern: left[l]) < Int8(bitPattern: right[r])) {
                entry = Self.entry(left, at: l); l += entrySize
            } else if l >= left.count || Int8(bitPattern: right[r]) < Int8(bitPattern: left[l]) {
                entry = Self.entry(right, at: r); r += entrySize
            } else {
                var sum = Self.entry(left, at: l)
                sum.count = sum.count.addingSaturating(Self.entry(right, at: r).count)
                entry = sum; l += entrySize; r += entrySize
            }
            if let previous, previous >= entry.rssi { return nil }
            previous = entry.rssi
            let bytes = Self.bytes(of: entry)
            output[written] = bytes.0; output[written + 1] = bytes.1; output[written + 2] = bytes.2
            output[written + 3] = bytes.3; output[written + 4] = bytes.4
            written += entrySize
        }
        return written
    }

    private static func entries(_ bytes: [UInt8]) -> [Entry]? {
        guard bytes.count % entrySize == 0 else { return nil }
        var entries: [Entry] = []
        entries.reserveCapacity(bytes.count / entrySize)
        let valid = bytes.withUnsafeBytes { bytes in
            for start in stride(from: 0, to: bytes.count, by: entrySize) {
                let entry = entry(bytes, at: start)
                if let last = entries.last, last.rssi >= entry.rssi { return false }
                entries.append(entry)
            }
            return true
        }
        return valid ? entries : nil
    }

    private static func entry(_ bytes: UnsafeRawBufferPointer, at start: Int) -> Entry {
        let count = UInt32(bytes[start + 1]) << 24 | UInt32(bytes[start + 2]) << 16 | UInt32(bytes[start + 3]) << 8 | UInt32(bytes[start + 4])
        return Entry(rssi: Int8(bitPattern: bytes[start]), count: count)
    }

    /// An entry's five bytes, as a tuple: appending them as an array literal allocated an array
    /// per entry, which was half the merge's time.
    private static func bytes(of entry: Entry) -> (UInt8, UInt8, UInt8, UInt8, UInt8) {
        (UInt8(bitPattern: entry.rssi), UInt8(entry.count >> 24), UInt8((entry.count >> 16) & 0xff),
         UInt8((entry.count >> 8) & 0xff), UInt8(entry.count & 0xff))
    }

    private static func append(_ entry: Entry, to bytes: inout [UInt8]) {
        let entryBytes = Self.bytes(of: entry)
        bytes.append(entryBytes.0); bytes.append(entryBytes.1); bytes.append(entryBytes.2)
        bytes.append(entryBytes.3); bytes.append(entryBytes.4)
    }
}

extension UInt32 {
    func addingSaturating(_ other: UInt32) -> UInt32 {
        let (sum, overflow) = addingReportingOverflow(other)
        return overflow ? .max : sum
    }
}

/// Sightings not yet written, aggregated by (peer, our window) so that a crowd's thousands of
/// advertising reports a second become a handful of row updates.
public struct SightingBatch: Sendable {
    public private(set) var pending: [Encounter.Key: Encounter] = [:]
    public private(set) var sightingCount = 0

    public init() {}

    public var isEmpty: Bool { pending.isEmpty }
    public var rowCount: Int { pending.count }

    public mutating func add(_ sighting: Sighting) {
        let key = Encounter.Key(peer: sighting.peer, ownWindowStart: sighting.ownWindowStart)
        sightingCount += 1
        if pending[key]?.add(sighting) == nil {
            pending[key] = Encounter(sighting)
        }
    }

    /// Adds an encounter already folded from sightings (one kept by `EncounterSpill`), merged
    /// into any of the same key.
    public mutating func add(_ encounter: Encounter) {
        sightingCount += encounter.sightings
        if pending[encounter.key]?.merge(encounter) == nil {
            pending[encounter.key] = encounter
        }
    }
}
