/// The ids of the live batches, in memory, so that an upload asks "was this id published?"
/// without a database lookup per id.
///
/// They used to be a SQLite table keyed by id. Random ids made that table cost twice: each
/// upload's lookups read leaf pages all over it (about 2 µs an id once it outgrew the page
/// cache), and each publication merged a million ids into it, rewriting nearly every page (1.3 to
/// 1.6 s). Each batch's row already holds its published ids, sorted, so they are the record; this
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

    /// Bytes held by the index's arrays.
    var memoryBytes: Int {
        ids.capacity * 8 + slots.capacity * 4 + bucketStarts.capacity * 8 + slotBatches.capacity * 8
    }

    /// Adds the ids of batches not held yet; each batch's ids need not be sorted (a batch's
    /// recorded ones are).
    ///
    /// One k-way merge of the held ids and every new batch, so a server starting with hundreds
    /// of batches pays one pass, not one per batch; at its peak it holds the new batches' ids
    /// and the merged arrays, about 20 bytes per id.
    mutating func insert(_ newBatches: [(number: UInt64, ids: [UInt64])]) {
        var runs = [Run(ids: ids, slots: slots, slot: 0)]
        for batch in newBatches where !batches.contains(batch.number) {
            let slot = UInt32(slotBatches.count)
            slotBatches.append(batch.number)
            batches.insert(batch.number)
            var sorted = batch.ids
            if !zip(sorted, sorted.dropFirst()).allSatisfy({ $0 < $1 }) { sorted.sort() }
            runs.append(Run(ids: sorted, slots: nil, slot: slot))
        }
        guard runs.count > 1 else { return }
        ids = []
        slots = []
        let total = runs.reduce(0) { $0 + $1.ids.count }
        var mergedIDs: [UInt64] = []
        var mergedSlots: [UInt32] = []
        mergedIDs.reserveCapacity(total)
        mergedSlots.reserveCapacity(total)
        if runs.count == 2, let heldSlots = runs[0].slots {
            // One new batch, as after every publication: a plain two-way merge.
            let (held, new) = (runs[0].ids, runs[1])
            var next = 0
            for (position, id) in held.enumerated() {
                while next < new.ids.count && new.ids[next] < id {
                    mergedIDs.append(new.ids[next])
                    mergedSlots.append(new.slot)
                    next += 1
                }
                mergedIDs.append(id)
                mergedSlots.append(heldSlots[position])
            }
            mergedIDs.append(contentsOf: new.ids[next...])
            mergedSlots.append(contentsOf: repeatElement(new.slot, count: new.ids.count - next))
        } else {
            var heap = RunHeap(runs: runs)
            while let (run, position) = heap.popSmallest() {
                mergedIDs.append(heap.runs[run].ids[position])
                mergedSlots.append(heap.runs[run].slots?[position] ?? heap.runs[run].slot)
            }
        }
        ids = mergedIDs
        slots = mergedSlots
        rebuildDirectory()
    }

    /// A sorted run of ids and their batch slots (one slot for a whole new batch).
    private struct Run {
        var ids: [UInt64]
        var slots: [UInt32]?
        var slot: UInt32
    }

    /// A binary min-heap of the runs' next ids.
    private struct RunHeap {
        let runs: [Run]
        private var next: [Int]
        private var heap: [Int]

        init(runs: [Run]) {
            self.runs = runs
            next = Array(repeating: 0, count: runs.count)
            heap = runs.indices.filter { !runs[$0].ids.isEmpty }
            for position in stride(from: heap.count / 2 - 1, through: 0, by: -1) { siftDown(position) }
        }

        private func head(_ run: Int) -> UInt64 { runs[run].ids[next[run]] }

        /// The run and position of the smallest id not taken yet, which it takes.
        mutating func popSmallest() -> (run: Int, position: Int)? {
            guard let run = heap.first else { return nil }
            let position = next[run]
            next[run] += 1
            if next[run] == runs[run].ids.count {
                heap[0] = heap[heap.count - 1]
                heap.removeLast()
            }
            if !heap.isEmpty { siftDown(0) }
            return (run, position)
        }

        private mutating func siftDown(_ start: Int) {
            var parent = start
            while true {
                let left = 2 * parent + 1
                guard left < heap.count else { return }
                var smallest = left
                if left + 1 < heap.count && head(heap[left + 1]) < head(heap[left]) { smallest = left + 1 }
                guard head(heap[smallest]) < head(heap[parent]) else { return }
                heap.swapAt(parent, smallest)
                parent = smallest
            }
        }
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
