import Foundation
import PositiveListFormat
#if canImport(Glibc)
import Glibc
#endif

/// Streams the entries of a batch file that was verified when it was downloaded, in chunks
/// through one fixed buffer, so that matching a list of any size needs the same small memory.
///
/// The signature is not checked again here (the download did that before the file entered the
/// cache); the header, the length and the entry count are, so a damaged cache file is refused
/// instead of being matched partly.
struct BatchFileReader {
    static let chunkEntryCount = 65_536

    let path: String
    let expectedNumber: UInt64

    struct Header {
        var number: UInt64
        var entryCount: Int
    }

    /// Calls `body` with consecutive runs of whole 16-byte entries, in file order.
    func forEachChunk(_ body: (UnsafeRawBufferPointer) throws -> Void) throws(MatchingError) {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { throw .damagedCache(path: path, reason: "cannot open it (\(String(cString: strerror(errno))))") }
        defer { close(descriptor) }
        var status = stat()
        guard fstat(descriptor, &status) == 0 else { throw .damagedCache(path: path, reason: "cannot read its size") }
        let fileSize = Int(status.st_size)

        let chunkBytes = Self.chunkEntryCount * PositiveListBatch.entryByteCount
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: chunkBytes, alignment: 16)
        defer { buffer.deallocate() }

        let header = try readHeader(descriptor, fileSize: fileSize, into: buffer)
        var remaining = header.entryCount * PositiveListBatch.entryByteCount
        var offset = off_t(PositiveListBatch.headerByteCount)
        while remaining > 0 {
            let wanted = min(remaining, chunkBytes)
            try readFully(descriptor, into: UnsafeMutableRawBufferPointer(rebasing: buffer[0..<wanted]), at: offset)
            do {
                try body(UnsafeRawBufferPointer(rebasing: buffer[0..<wanted]))
            } catch let error as MatchingError {
                throw error
            } catch {
                throw .damagedCache(path: path, reason: "\(error)")
            }
            remaining -= wanted
            offset += off_t(wanted)
        }
    }

    private func readHeader(_ descriptor: Int32, fileSize: Int, into buffer: UnsafeMutableRawBufferPointer) throws(MatchingError) -> Header {
        let headerSize = PositiveListBatch.headerByteCount
        guard fileSize >= headerSize + SignedFile.signatureByteCount else {
            throw .damagedCache(path: path, reason: "it is too short to be a batch")
        }
        let headerBuffer = UnsafeMutableRawBufferPointer(rebasing: buffer[0..<headerSize])
        try readFully(descriptor, into: headerBuffer, at: 0)
        let bytes = Array(headerBuffer)
        guard Array(bytes[0..<4]) == PositiveListBatch.magic, bytes[4] == PositiveListBatch.version else {
            throw .damagedCache(path: path, reason: "it does not start like a batch")
        }
        func integer(at position: Int) -> UInt64 {
            bytes[position..<position + 8].reduce(0) { $0 << 8 | UInt64($1) }
        }
        let number = integer(at: 8)
        let count = integer(at: 32)
        guard number == expectedNumber else {
            throw .damagedCache(path: path, reason: "it holds batch \(number), not \(expectedNumber)")
        }
        let entryBytes = fileSize - headerSize - SignedFile.signatureByteCount
        guard count <= UInt64(Int.max / PositiveListBatch.entryByteCount),
              Int(count) * PositiveListBatch.entryByteCount == entryBytes
        else { throw .damagedCache(path: path, reason: "its length does not match its entry count") }
        return Header(number: number, entryCount: Int(count))
    }

    private func readFully(_ descriptor: Int32, into buffer: UnsafeMutableRawBufferPointer, at start: off_t) throws(MatchingError) {
        var done = 0
        while done < buffer.count {
            let result = pread(descriptor, buffer.baseAddress! + done, buffer.count - done, start + off_t(done))
            if result < 0 && errno == EINTR { continue }
            guard result > 0 else {
                throw .damagedCache(path: path, reason: result == 0 ? "it ends early" : String(cString: strerror(errno)))
            }
            done += result
        }
    }
}
