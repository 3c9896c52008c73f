import Crypto
import Foundation
import Hummingbird
import PositiveListFormat
import PositiveListServer
import ServerStorage
import Synchronization
import TracerCore
import TransparencyLog

/// Serves the published directory the way a CDN would: strong ETags, `If-None-Match` → 304,
/// full tiles and bundles cached for a year as immutable, the checkpoint and the upload policy
/// for a short time. The retired files of formats 1 and 2 (`index.tpli`, `batches/`, `keys/`)
/// are not served, even while an upgrade keeps them on disk.
///
/// Files are kept in memory, keyed by their inode, size and modification time, so an atomic
/// rename of a new checkpoint is noticed at the next request and a popular tile is read from disk
/// once. Memory is bounded; a file over the bound is read for each request.
package final class PublishedFileServer: Sendable {
    struct FileIdentity: Hashable, Sendable {
        let device: UInt64
        let inode: UInt64
        let size: Int64
        let modifiedSeconds: Int
        let modifiedNanoseconds: Int
    }

    struct CachedFile: Sendable {
        let identity: FileIdentity
        let contents: ByteBuffer
        let entityTag: String
    }

    private struct Cache {
        var files: [String: CachedFile] = [:]
        var totalBytes = 0
    }

    static let batchCacheControl = "public, max-age=31536000, immutable"

    private let directory: PublishedDirectory
    private let indexCacheControl: String
    private let maxCachedBytes: Int
    private let cache = Mutex(Cache())

    package init(directory: PublishedDirectory, indexMaxAgeSeconds: Int, maxCachedBytes: Int = 512 << 20) {
        self.directory = directory
        self.indexCacheControl = "public, max-age=\(indexMaxAgeSeconds)"
        self.maxCachedBytes = maxCachedBytes
    }

    package func addRoutes(to router: Router<PositiveListRequestContext>, table: inout RouteTable) {
        for method in [HTTPRequest.Method.get, .head] {
            // The log (format version 3): its checkpoint as an index, its tiles as batches.
            table.add("log/checkpoint", method, to: router) { request, _ in
                try self.respond(relativePath: "log/checkpoint", cacheControl: self.indexCacheControl, request: request)
            }
            // The upload policy changes only with the authority's setting, and is revalidated as the checkpoint is.
            table.add(RouterPath(UploadPolicyNote.relativePath), method, to: router) { request, _ in
                try self.respond(relativePath: UploadPolicyNote.relativePath, cacheControl: self.indexCacheControl, request: request)
            }
            table.add("log/tile/**", method, to: router) { request, context in
                let path = "tile/" + context.parameters.getCatchAll().joined(separator: "/")
                // Only the one spelling of a tile or bundle path the publisher writes.
                guard Self.isLogTilePath(path) else { throw APIError.forStatus(.notFound) }
                return try self.respond(relativePath: "log/" + path, cacheControl: Self.batchCacheControl, request: request, ranges: true)
            }
        }
    }

    /// One `bytes=first-last`, `bytes=first-` or `bytes=-suffix` range of a file of `size` bytes:
    /// nil when the header is not one such range (the whole file is sent, as RFC 9110 allows),
    /// .some(nil) when it is one but not satisfiable (416).
    static func byteRange(_ header: String, size: Int) -> Range<Int>?? {
        guard header.hasPrefix("bytes="), !header.contains(",") else { return nil }
        let spec = header.dropFirst(6).trimmingCharacters(in: .whitespaces)
        let parts = spec.split(separator: "-", maxSplits: 1, omittingEmptySubsequences: false)
        guard parts.count == 2, parts.allSatisfy({ $0.allSatisfy(\.isASCII) && $0.allSatisfy(\.isNumber) }) else { return nil }
        if parts[0].isEmpty {
            guard let suffix = Int(parts[1]), suffix > 0 else { return nil }
            return size == 0 ? .some(nil) : .some(max(0, size - suffix)..<size)
        }
        guard let first = Int(parts[0]) else { return nil }
        let last = parts[1].isEmpty ? Int.max : Int(parts[1])
        guard let last, last >= first else { return nil }
        guard first < size else { return .some(nil) }
        return .some(first..<min(last, size - 1) + 1)
    }

    /// A hash tile or entry bundle path in its canonical spelling (C2SP tlog-tiles).
    static func isLogTilePath(_ path: String) -> Bool {
        if let bundle = try? EntryBundleID(path: path) { return bundle.path == path }
        if let tile = try? TileID(path: path) { return tile.path == path }
        return false
    }

    private func respond(relativePath: String, cacheControl: String, request: Request, ranges: Bool = false) throws -> Response {
        let found: CachedFile?
        do {
            found = try file(at: relativePath)
        } catch let error as FileUnavailable {
            throw APIError(
                .serviceUnavailable, "file_unavailable",
                "The server cannot read this file right now (\(String(cString: strerror(error.errorNumber)))); try again in a few seconds.",
                headers: [.retryAfter: "5", .cacheControl: "no-store"])
        }
        guard let file = found else {
            throw APIError.forStatus(.notFound)
        }
        var headers: HTTPFields = [.eTag: file.entityTag, .cacheControl: cacheControl]
        if let condition = request.headers[.ifNoneMatch], Self.matches(condition, file.entityTag) {
            return Response(status: .notModified, headers: headers)
        }
        headers[.contentType] = "application/octet-stream"
        // Immutable log files answer one byte range, as nginx does: a node fetches only the
        // bytes a wider partial bundle adds to the one it holds.
        if ranges, request.method == .get, let range = request.headers[.range],
           request.headers[.ifRange].map({ $0 == file.entityTag }) ?? true {
            let size = file.contents.readableBytes
            switch Self.byteRange(range, size: size) {
            case .some(.some(let bytes)):
                headers[.contentRange] = "bytes \(bytes.lowerBound)-\(bytes.upperBound - 1)/\(size)"
                let slice = file.contents.getSlice(at: file.contents.readerIndex + bytes.lowerBound, length: bytes.count) ?? ByteBuffer()
                return Response(status: .partialContent, headers: headers, body: ResponseBody(byteBuffer: slice))
            case .some(.none):
                headers[.contentRange] = "bytes */\(size)"
                return Response(status: .rangeNotSatisfiable, headers: headers)
            case .none:
                break
            }
        }
        if request.method == .head {
            headers[.contentLength] = String(file.contents.readableBytes)
            return Response(status: .ok, headers: headers)
        }
        return Response(status: .ok, headers: headers, body: ResponseBody(byteBuffer: file.contents))
    }

    /// `If-None-Match` holds `*` or a list of tags, strong or weak; a weak match is enough for
    /// a GET (RFC 9110, 13.1.2).
    static func matches(_ condition: String, _ entityTag: String) -> Bool {
        condition.split(separator: ",").contains { candidate in
            var tag = candidate.trimmingCharacters(in: .whitespaces)
            if tag == "*" { return true }
            if tag.hasPrefix("W/") { tag.removeFirst(2) }
            return tag == entityTag
        }
    }

    /// The file at `relativePath` below the published directory, or nil when there is no
    /// regular file there, reached without following a symbolic link.
    ///
    /// The published directory holds only files the publisher wrote, by renaming them into place;
    /// a link (or a second hard link) there was put by someone else, and following it would serve
    /// whatever it points to, such as the signing key beside public/. So every component below
    /// the directory is opened with O_NOFOLLOW, relative to its parent's descriptor, and
    /// identity and contents come from that one descriptor: nothing can be swapped between the
    /// check and the read. (The directory itself may be a link: that is the operator's choice.)
    func file(at relativePath: String) throws -> CachedFile? {
        guard let descriptor = try Self.openBelow(directory.path, relativePath) else { return nil }
        defer { close(descriptor) }
        var status = stat()
        guard fstat(descriptor, &status) == 0 else { throw FileUnavailable(errorNumber: errno) }
        guard (status.st_mode & S_IFMT) == S_IFREG, status.st_nlink == 1 else { return nil }
        let identity = FileIdentity(
            device: UInt64(status.st_dev), inode: UInt64(status.st_ino), size: Int64(status.st_size),
            modifiedSeconds: status.st_mtim.tv_sec, modifiedNanoseconds: status.st_mtim.tv_nsec)
        if let cached = cache.withLock({ $0.files[relativePath] }), cached.identity == identity {
            return cached
        }
        // Read outside the lock; two requests racing on a miss both read, which is harmless.
        guard let data = Self.readAll(descriptor, expectedSize: Int(status.st_size)) else { throw FileUnavailable(errorNumber: errno) }
        let digest = SHA256.hash(data: data)
        let file = CachedFile(
            identity: identity, contents: ByteBuffer(bytes: data),
            entityTag: "\"" + Hex.encode(digest.prefix(16)) + "\"")
        guard data.count <= maxCachedBytes else { return file }
        cache.withLock { cache in
            if let previous = cache.files.removeValue(forKey: relativePath) { cache.totalBytes -= previous.contents.readableBytes }
            while cache.totalBytes + data.count > maxCachedBytes, let victim = cache.files.keys.first {
                cache.totalBytes -= cache.files.removeValue(forKey: victim)!.contents.readableBytes
            }
            cache.files[relativePath] = file
            cache.totalBytes += data.count
        }
        return file
    }

    /// Opens `relativePath` component by component below `directory`, refusing symbolic links
    /// (O_NOFOLLOW: ELOOP) and, for the last, not blocking on a FIFO (fstat then refuses it).
    /// nil when there is no such file; throws ``FileUnavailable`` when there may be one that
    /// cannot be opened now.
    private static func openBelow(_ directory: String, _ relativePath: String) throws(FileUnavailable) -> Int32? {
        var current = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard current >= 0 else { return try absence(errno) }
        let components = relativePath.split(separator: "/")
        for (position, component) in components.enumerated() {
            guard component != "..", component != "." else {
                close(current)
                return nil
            }
            let isLast = position == components.count - 1
            let next = openat(current, String(component), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | (isLast ? O_NONBLOCK : O_DIRECTORY))
            let failure = errno
            close(current)
            guard next >= 0 else { return try absence(failure) }
            current = next
        }
        return current
    }

    /// A file that may exist but cannot be opened or read now (out of descriptors, EMFILE or
    /// ENFILE; EACCES; EIO...). Answered 503, never 404: a 404 for a published file tells a
    /// node (and a CDN that caches it) that the file is not there.
    struct FileUnavailable: Error {
        let errorNumber: Int32
    }

    /// nil for the errors that mean "no such file here" (or a link, which is not served);
    /// throws for every other.
    static func absence(_ errorNumber: Int32) throws(FileUnavailable) -> Int32? {
        switch errorNumber {
        case ENOENT, ENOTDIR, ELOOP, ENAMETOOLONG: return nil
        default: throw FileUnavailable(errorNumber: errorNumber)
        }
    }

    private static func readAll(_ descriptor: Int32, expectedSize: Int) -> Data? {
        var data = Data(capacity: expectedSize)
        var buffer = [UInt8](repeating: 0, count: 1 << 16)
        while true {
            let count = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
            if count == 0 { return data }
            if count < 0 {
                if errno == EINTR { continue }
                return nil
            }
            data.append(contentsOf: buffer[0..<count])
        }
    }
}
