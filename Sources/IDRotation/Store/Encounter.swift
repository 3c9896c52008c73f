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

    public init(
        peer: UserID, ownWindowStart: UnixSeconds, time: UnixSeconds, rssi: Int8? = nil,
        txPower: Int8? = nil, reportedRSSI: Int8? = nil, learnedBy: LearnedBy = []
    ) {
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

    public init(_ sighting: Sighting) {
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
    }
}

/// How many RSSI readings had each value (dBm), stored compactly: per value present, its byte
/// (two's complement) and its count as 4 bytes big-endian, in ascending order of value.
public struct RSSIHistogram: Sendable, Hashable {
    public private(set) var counts: [Int8: Int] = [:]

    public init() {}

    public init(_ counts: [Int8: Int]) { self.counts = counts.filter { $0.value > 0 } }

    public var isEmpty: Bool { counts.isEmpty }
    public var total: Int { counts.values.reduce(0, +) }

    public mutating func add(_ rssi: Int8, count: Int = 1) {
        counts[rssi, default: 0] += count
    }

    public mutating func merge(_ other: RSSIHistogram) {
        for (rssi, count) in other.counts { add(rssi, count: count) }
    }

    static let entrySize = 5

    public var encoded: [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(counts.count * Self.entrySize)
        for (rssi, count) in counts.sorted(by: { $0.key < $1.key }) {
            let clamped = UInt32(clamping: count)
            bytes += [UInt8(bitPattern: rssi), UInt8(clamped >> 24), UInt8((clamped >> 16) & 0xff), UInt8((clamped >> 8) & 0xff), UInt8(clamped & 0xff)]
        }
        return bytes
    }

    /// nil when `bytes` is not a whole number of entries.
    public init?(encoded bytes: some Collection<UInt8>) {
        let bytes = Array(bytes)
        guard bytes.count % Self.entrySize == 0 else { return nil }
        for start in stride(from: 0, to: bytes.count, by: Self.entrySize) {
            let count = bytes[(start + 1)...(start + 4)].reduce(0) { $0 << 8 | Int($1) }
            add(Int8(bitPattern: bytes[start]), count: count)
        }
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
}
