/// The ids of the live batches, in memory, so that an upload asks "was this id published?"
/// without a database lookup per id.
///
/// They used to be a SQLite table keyed by id. Random ids made that table cost twice: each
/// upload's lookups read leaf pages all over it (about 2 µs an id once it outgrew the page
/// cache), and each publication merged a million ids into it, rewriting nearly every page (1.3 to
/// 1.6 s). The batch files already hold every published id, sorted, so they are the record; this
/// index is rebuilt from them and changes only when a batch is published or expires.
///
/// Layout: every id sorted, next to the slot of the batch holding it (so an expired batch's ids
/// can be dropped), and a directory of where each value of the ids' top bits starts. A lookup is
/// one directory read and a binary search in a bucket of four to eight ids, mostly on one cache
/// line. Random ids spread evenly over the buckets; crafted, clustered ids only lengthen the
/// search in their own bucket, logarithmically. Memory: 8 bytes per id, 4 for its batch slot and
/// 1 to 2 for the directory.
struct PublishedIDIndex: Sendable {
    /// The batch numbers whose ids are held.
    private(set) var batches: Set<UInt64> = []
    private var slotBatches: [UInt64] = []
    private var ids: [UInt64] = []
    private var slots: [UInt32] = []
    private var bucketStarts: [Int] = [0, 0, 0]
    private var shift: UInt64 = 63

    var count: Int { ids.count }

    func contains(_ id: UInt64) -> Bool {
        let bucket = Int(truncatingIfNeeded: id >> shift)
        var low = bucketStarts[bucket]
        var high = bucketStarts[bucket + 1]
        while low < high {
            let middle = (low + high) >> 1
            let candidate = ids[middle]
            if candidate == id { return true }
            if candidate < id { low = middle + 1 } else { high = middle }
        }
        return false
    }

    /// Adds the ids of batches not held yet; each batch's ids need not be sorted.
    mutating func insert(_ newBatches: [(number: UInt64, ids: [UInt64])]) {
        let fresh = newBatches.filter { !batches.contains($0.number) }
        guard !fresh.isEmpty else { return }
        var added: [(id: UInt64, slot: UInt32)] = []
        added.reserveCapacity(fresh.reduce(0) { $0 + $1.ids.count })
        for batch in fresh {
            let slot = UInt32(slotBatches.count)
            slotBatches.append(batch.number)
            batches.insert(batch.number)
            for id in batch.ids { added.append((id, slot)) }
        }
        // A batch file is sorted already; several at once (a server starting) are not.
        if fresh.count > 1 || !zip(added, added.dropFirst()).allSatisfy({ $0.id < $1.id }) {
            added.sort { $0.id < $1.id }
        }
        mergeSorted(added)
        rebuildDirectory()
    }

    /// Drops the ids of `gone` batches.
    mutating func remove(batches gone: Set<UInt64>) {
        guard !gone.isDisjoint(with: batches) else { return }
        // Renumber the slots that stay, so slot numbers never outgrow the live batches.
        var renumbered = [UInt32?](repeating: nil, count: slotBatches.count)
        var keptBatches: [UInt64] = []
        for (slot, number) in slotBatches.enumerated() where !gone.contains(number) {
            renumbered[slot] = UInt32(keptBatches.count)
            keptBatches.append(number)
        }
        var keptIDs: [UInt64] = []
        var keptSlots: [UInt32] = []
        keptIDs.reserveCapacity(ids.count)
        keptSlots.reserveCapacity(ids.count)
        for position in ids.indices {
            guard let slot = renumbered[Int(slots[position])] else { continue }
            keptIDs.append(ids[position])
            keptSlots.append(slot)
        }
        ids = keptIDs
        slots = keptSlots
        slotBatches = keptBatches
        batches.subtract(gone)
        rebuildDirectory()
    }

    private mutating func mergeSorted(_ added: [(id: UInt64, slot: UInt32)]) {
        var mergedIDs: [UInt64] = []
        var mergedSlots: [UInt32] = []
        mergedIDs.reserveCapacity(ids.count + added.count)
        mergedSlots.reserveCapacity(ids.count + added.count)
        var old = 0
        var new = 0
        while old < ids.count && new < added.count {
            if ids[old] <= added[new].id {
                mergedIDs.append(ids[old])
                mergedSlots.append(slots[old])
                old += 1
            } else {
                mergedIDs.append(added[new].id)
                mergedSlots.append(added[new].slot)
                new += 1
            }
        }
        mergedIDs.append(contentsOf: ids[old...])
        mergedSlots.append(contentsOf: slots[old...])
        for entry in added[new...] {
            mergedIDs.append(entry.id)
            mergedSlots.append(entry.slot)
        }
        ids = mergedIDs
        slots = mergedSlots
    }

    /// Four to eight ids per bucket, between 2 and 2^26 buckets.
    private mutating func rebuildDirectory() {
        let wanted = max(1, ids.count / 4)
        let bits = min(26, max(1, Int.bitWidth - wanted.leadingZeroBitCount - 1))
        shift = UInt64(64 - bits)
        let bucketCount = 1 << bits
        var starts = [Int](repeating: 0, count: bucketCount + 1)
        for id in ids { starts[Int(truncatingIfNeeded: id >> shift) + 1] += 1 }
        for bucket in 0..<bucketCount { starts[bucket + 1] += starts[bucket] }
        bucketStarts = starts
    }
}
