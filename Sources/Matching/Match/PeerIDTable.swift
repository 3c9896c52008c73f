
/// The peer ids this node logged, in a compact open-addressing hash table built for one task:
/// answering "did we meet this id?" for millions of listed ids as fast as memory allows.
///
/// Two arrays of plain words, no per-entry objects: a presence filter of 16 bits per logged id
/// (256 KB for 100,000 ids, small enough to stay in the CPU's L2 cache) answers almost every
/// probe of an id we never met with one load; only the ~1 in 16 that pass it probe the slot
/// table. The hash multiplies by an odd constant drawn at random for every table, so peers who
/// choose their ids cannot make them collide on purpose.
///
/// `@unchecked Sendable` is safe: every stored property is a `let`, and the memory behind the
/// pointers is written only in `init`, before the table can be shared, and freed only in `deinit`,
/// after the last reference is gone; the threads that share it only read.
final class PeerIDTable: @unchecked Sendable {
    /// Number of distinct ids held.
    let count: Int
    private let multiplier: UInt64
    private let filterShift: UInt64
    private let filter: UnsafeMutablePointer<UInt64>
    private let filterWordCount: Int
    private let slotShift: UInt64
    private let slotMask: Int
    private let slotKeys: UnsafeMutablePointer<UInt64>
    private let slotValues: UnsafeMutablePointer<UInt32>
    /// 0 marks an empty slot, so the one id whose value is 0 is kept aside.
    private let zeroValue: UInt32?

    /// Builds the table for `ids` mapping each to a value (an index into the caller's records).
    /// Ids must be distinct.
    init<Generator: RandomNumberGenerator>(
        _ pairs: [(id: UInt64, value: UInt32)], using generator: inout Generator
    ) {
        count = pairs.count
        multiplier = generator.next() | 1
        let slotBits = Self.bits(forAtLeast: max(16, pairs.count * 2))
        let filterBits = Self.bits(forAtLeast: max(64, pairs.count * 16))
        slotShift = UInt64(64 - slotBits)
        slotMask = (1 << slotBits) - 1
        filterShift = UInt64(64 - filterBits)
        filterWordCount = (1 << filterBits) / 64
        filter = .allocate(capacity: filterWordCount)
        filter.initialize(repeating: 0, count: filterWordCount)
        slotKeys = .allocate(capacity: 1 << slotBits)
        slotKeys.initialize(repeating: 0, count: 1 << slotBits)
        slotValues = .allocate(capacity: 1 << slotBits)
        slotValues.initialize(repeating: 0, count: 1 << slotBits)
        var zero: UInt32?
        for pair in pairs {
            let hash = pair.id &* multiplier
            let bit = Int(truncatingIfNeeded: hash >> filterShift)
            filter[bit >> 6] |= 1 << UInt64(bit & 63)
            if pair.id == 0 {
                zero = pair.value
                continue
            }
            var slot = Int(truncatingIfNeeded: hash >> slotShift)
            while slotKeys[slot] != 0 { slot = (slot + 1) & slotMask }
            slotKeys[slot] = pair.id
            slotValues[slot] = pair.value
        }
        zeroValue = zero
    }

    convenience init(_ pairs: [(id: UInt64, value: UInt32)]) {
        var generator = SystemRandomNumberGenerator()
        self.init(pairs, using: &generator)
    }

    deinit {
        filter.deallocate()
        slotKeys.deallocate()
        slotValues.deallocate()
    }

    /// The value stored for `id`, if the table holds it.
    @inline(__always)
    func value(for id: UInt64) -> UInt32? {
        let hash = id &* multiplier
        let bit = Int(truncatingIfNeeded: hash >> filterShift)
        guard filter[bit >> 6] & (1 << UInt64(bit & 63)) != 0 else { return nil }
        return slowLookup(id, hash: hash)
    }

    private func slowLookup(_ id: UInt64, hash: UInt64) -> UInt32? {
        if id == 0 { return zeroValue }
        var slot = Int(truncatingIfNeeded: hash >> slotShift)
        while true {
            let key = slotKeys[slot]
            if key == id { return slotValues[slot] }
            if key == 0 { return nil }
            slot = (slot + 1) & slotMask
        }
    }

    /// Bytes held by the table's arrays.
    var byteCount: Int { filterWordCount * 8 + (slotMask + 1) * 12 }

    private static func bits(forAtLeast minimum: Int) -> Int {
        var bits = 1
        while (1 << bits) < minimum { bits += 1 }
        return bits
    }
}
