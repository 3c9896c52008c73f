import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// The entries a node holds of one followed log, left in their file and read when needed: a
/// national id list's entries are hundreds of megabytes, which a node must not hold in memory
/// (nor map: every page of a mapping read once counts in the process's resident memory).
///
/// `FollowedLogStore.load()` makes one after checking that the file holds exactly the entries
/// the state counts; readers hold the cache's lock, so the file does not change under them, and
/// a file that does anyway (another program, a failing disk) is reported as damaged.
public struct HeldLogEntries: Sendable {
    /// The entries file.
    public let path: String
    /// The log index of the first entry held.
    public let firstIndex: UInt64
    /// How many entries are held, from `firstIndex` on.
    public let count: Int
    /// Where the first entry's frame starts and the last one's ends in the file.
    let startOffset: Int
    let endOffset: Int

    /// The bytes of a read: 4 MB holds about 64 entries of an id list (each up to 64 kB), enough
    /// for every processor of a small node to take several.
    public static let defaultChunkByteCount = 4 << 20

    /// Calls `body` with consecutive runs of whole entries, in log order, read through one buffer
    /// of `chunkByteCount` bytes (at least one largest entry); `body` returns false to stop early.
    public func forEachChunk(
        chunkByteCount: Int = Self.defaultChunkByteCount, _ body: (LogEntryChunk) -> Bool
    ) throws(FollowedLogStoreError) {
        guard count > 0 else { return }
        let file = try EntriesFile(path: path)
        defer { file.close() }
        let capacity = max(chunkByteCount, 2 + 65_535)
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: capacity, alignment: 16)
        defer { buffer.deallocate() }
        var offset = startOffset
        var entriesRead = 0
        var ranges: [Range<Int>] = []
        while offset < endOffset {
            let wanted = min(capacity, endOffset - offset)
            let read = UnsafeMutableRawBufferPointer(rebasing: buffer[0..<wanted])
            try file.read(into: read, at: offset)
            ranges.removeAll(keepingCapacity: true)
            var position = 0
            while wanted - position >= 2 {
                let length = Int(read[position]) << 8 | Int(read[position + 1])
                guard wanted - position - 2 >= length else { break }
                ranges.append((position + 2)..<(position + 2 + length))
                position += 2 + length
            }
            // The whole file was framed when it was loaded, and a buffer holds a largest entry.
            guard !ranges.isEmpty else { throw .damaged(path: path, reason: "it changed while it was read") }
            entriesRead += ranges.count
            guard entriesRead <= count else { throw .damaged(path: path, reason: "it changed while it was read") }
            let chunk = LogEntryChunk(bytes: UnsafeRawBufferPointer(read), ranges: ranges, fileOffset: offset, firstPosition: entriesRead - ranges.count)
            offset += position
            guard body(chunk) else { return }
        }
        guard entriesRead == count else { throw .damaged(path: path, reason: "it changed while it was read") }
    }

    /// The bytes of one entry read again from its place in the file (`LogEntryChunk.fileOffset(of:)`).
    public func entry(atFileOffset offset: Int, length: Int) throws(FollowedLogStoreError) -> [UInt8] {
        guard offset >= startOffset, length >= 0, offset + length <= endOffset else {
            throw .damaged(path: path, reason: "no entry is held at byte \(offset)")
        }
        let file = try EntriesFile(path: path)
        defer { file.close() }
        return try file.bytes(count: length, at: offset)
    }

    /// Every entry held, in memory: for small logs and tests, never for matching a national list.
    public func read() throws(FollowedLogStoreError) -> [Data] {
        var entries: [Data] = []
        entries.reserveCapacity(count)
        try forEachChunk { chunk in
            for index in chunk.ranges.indices { entries.append(Data(chunk[index])) }
            return true
        }
        return entries
    }

    /// The position (from 0, in log order) of the first entry that satisfies `predicate`, read
    /// until one does.
    public func firstPosition(where predicate: (UnsafeRawBufferPointer) -> Bool) throws(FollowedLogStoreError) -> Int? {
        var found: Int?
        try forEachChunk { chunk in
            found = chunk.ranges.indices.first { predicate(chunk[$0]) }.map { chunk.firstPosition + $0 }
            return found == nil
        }
        return found
    }

    /// Where the entry at `position` starts its frame in the file, read until it.
    func frameOffset(ofPosition position: Int) throws(FollowedLogStoreError) -> Int {
        guard position < count else { return endOffset }
        var offset = endOffset
        try forEachChunk { chunk in
            guard position < chunk.firstPosition + chunk.ranges.count else { return true }
            offset = chunk.fileOffset + chunk.ranges[position - chunk.firstPosition].lowerBound - 2
            return false
        }
        return offset
    }

    /// Reads the frames of an entries file from byte `startOffset`, counting those up to `limit`
    /// entries, and remembering the last `keptCount` of them; the frames are read, not their
    /// bytes: small entries a window of them at a time, after a large one only the next 2-byte
    /// length (an id list's entries are up to 64 kB). Stops at the limit or at a frame the file
    /// does not hold whole (a tail an unfinished update appended, left to the caller).
    static func frames(
        of file: EntriesFile, from startOffset: Int, fileSize: Int, limit: UInt64, keepingLast keptCount: Int
    ) throws(FollowedLogStoreError) -> (count: Int, endOffset: Int, last: [Range<Int>]) {
        let windowSize = 16 << 10
        var window = [UInt8](repeating: 0, count: windowSize)
        var windowStart = 0
        var windowEnd = 0
        // The last `keptCount` frames, as a ring: `count % keptCount` is where the next goes.
        var last: [Range<Int>] = []
        last.reserveCapacity(keptCount)
        var count = 0
        var offset = startOffset
        var previousLength = 0
        while UInt64(count) < limit, fileSize - offset >= 2 {
            if offset < windowStart || offset + 2 > windowEnd {
                // Past a frame larger than the window, the next is likely large too.
                let length = previousLength >= windowSize ? 2 : min(windowSize, fileSize - offset)
                try window.withUnsafeMutableBytes { buffer in
                    Result { () throws(FollowedLogStoreError) in try file.read(into: UnsafeMutableRawBufferPointer(rebasing: buffer[0..<length]), at: offset) }
                }.get()
                (windowStart, windowEnd) = (offset, offset + length)
            }
            let length = Int(window[offset - windowStart]) << 8 | Int(window[offset - windowStart + 1])
            guard fileSize - offset - 2 >= length else { break }
            previousLength = length
            if keptCount > 0 {
                let frame = (offset + 2)..<(offset + 2 + length)
                if last.count < keptCount { last.append(frame) } else { last[count % keptCount] = frame }
            }
            count += 1
            offset += 2 + length
        }
        let oldest = last.count < keptCount ? 0 : count % max(1, keptCount)
        return (count, offset, Array(last[oldest...] + last[..<oldest]))
    }
}

/// A run of consecutive held entries in one read buffer: valid only during the call it is
/// handed to.
public struct LogEntryChunk {
    /// The buffer the entries are in.
    public let bytes: UnsafeRawBufferPointer
    /// Each entry's bytes in `bytes`, in log order.
    public let ranges: [Range<Int>]
    /// Where `bytes` starts in the entries file.
    public let fileOffset: Int
    /// The position among the held entries of the chunk's first entry.
    public let firstPosition: Int

    public subscript(index: Int) -> UnsafeRawBufferPointer {
        UnsafeRawBufferPointer(rebasing: bytes[ranges[index]])
    }

    /// Where entry `index`'s bytes start in the file, to read it again later.
    public func fileOffset(of index: Int) -> Int { fileOffset + ranges[index].lowerBound }
}

/// An entries file open for reading.
struct EntriesFile {
    let path: String
    let descriptor: Int32

    init(path: String) throws(FollowedLogStoreError) {
        self.path = path
        descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else {
            if errno == ENOENT { throw .damaged(path: path, reason: "it is missing") }
            throw .unreadable(path: path, reason: String(cString: strerror(errno)))
        }
    }

    func close() { _ = Glibc.close(descriptor) }

    func size() throws(FollowedLogStoreError) -> Int {
        var status = stat()
        guard fstat(descriptor, &status) == 0 else { throw .unreadable(path: path, reason: String(cString: strerror(errno))) }
        return Int(status.st_size)
    }

    /// `count` bytes from byte `offset`.
    func bytes(count: Int, at offset: Int) throws(FollowedLogStoreError) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: count)
        try bytes.withUnsafeMutableBytes { buffer in Result { () throws(FollowedLogStoreError) in try read(into: buffer, at: offset) } }.get()
        return bytes
    }

    /// Fills `buffer` from byte `offset`; a file that ends first was changed since it was framed.
    func read(into buffer: UnsafeMutableRawBufferPointer, at offset: Int) throws(FollowedLogStoreError) {
        var done = 0
        while done < buffer.count {
            let result = pread(descriptor, buffer.baseAddress! + done, buffer.count - done, off_t(offset + done))
            if result < 0 && errno == EINTR { continue }
            guard result > 0 else {
                if result == 0 { throw .damaged(path: path, reason: "it ends early") }
                throw .unreadable(path: path, reason: String(cString: strerror(errno)))
            }
            done += result
        }
    }
}
