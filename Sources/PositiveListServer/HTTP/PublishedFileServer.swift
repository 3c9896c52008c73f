import Crypto
import Foundation
import Hummingbird
import PositiveListFormat
import Synchronization

/// Serves the published directory the way a CDN would: strong ETags, `If-None-Match` → 304,
/// batches cached for a year as immutable, the index for a short time.
///
/// Files are kept in memory, keyed by their inode, size and modification time, so an atomic
/// rename of a new index is noticed at the next request and a popular batch is read from disk
/// once. Memory is bounded; a file over the bound is read for each request.
final class PublishedFileServer: Sendable {
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

    init(directory: PublishedDirectory, indexMaxAgeSeconds: Int, maxCachedBytes: Int = 512 << 20) {
        self.directory = directory
        self.indexCacheControl = "public, max-age=\(indexMaxAgeSeconds)"
        self.maxCachedBytes = maxCachedBytes
    }

    func addRoutes(to router: Router<PositiveListRequestContext>, table: inout RouteTable) {
        for method in [HTTPRequest.Method.get, .head] {
            table.add(RouterPath(PositiveListIndex.relativePath), method, to: router) { request, _ in
                try self.respond(relativePath: PositiveListIndex.relativePath, cacheControl: self.indexCacheControl, request: request)
            }
            table.add("batches/:name", method, to: router) { request, context in
                let name = try context.parameters.require("name")
                // Only names the publisher writes: digits and `.tplb`. Nothing else of the
                // file system is reachable through this route.
                guard name.hasSuffix(".tplb"), let number = UInt64(name.dropLast(5)), name == "\(number).tplb" else {
                    throw APIError.forStatus(.notFound)
                }
                return try self.respond(
                    relativePath: PositiveListBatch.relativePath(number: number), cacheControl: Self.batchCacheControl, request: request)
            }
            // The key index and key batches share one directory, hence one route.
            table.add("keys/:name", method, to: router) { request, context in
                let name = try context.parameters.require("name")
                if "keys/" + name == PositiveListKeyIndex.relativePath {
                    return try self.respond(relativePath: PositiveListKeyIndex.relativePath, cacheControl: self.indexCacheControl, request: request)
                }
                guard name.hasSuffix(".tpkb"), let number = UInt64(name.dropLast(5)), name == "\(number).tpkb" else {
                    throw APIError.forStatus(.notFound)
                }
                return try self.respond(
                    relativePath: PositiveListKeyBatch.relativePath(number: number), cacheControl: Self.batchCacheControl, request: request)
            }
        }
    }

    private func respond(relativePath: String, cacheControl: String, request: Request) throws -> Response {
        guard let file = try file(at: relativePath) else {
            throw APIError.forStatus(.notFound)
        }
        var headers: HTTPFields = [.eTag: file.entityTag, .cacheControl: cacheControl]
        if let condition = request.headers[.ifNoneMatch], Self.matches(condition, file.entityTag) {
            return Response(status: .notModified, headers: headers)
        }
        headers[.contentType] = "application/octet-stream"
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

    func file(at relativePath: String) throws -> CachedFile? {
        let path = directory.path + "/" + relativePath
        var status = stat()
        guard stat(path, &status) == 0, (status.st_mode & S_IFMT) == S_IFREG else { return nil }
        let identity = FileIdentity(
            device: UInt64(status.st_dev), inode: UInt64(status.st_ino), size: Int64(status.st_size),
            modifiedSeconds: status.st_mtim.tv_sec, modifiedNanoseconds: status.st_mtim.tv_nsec)
        if let cached = cache.withLock({ $0.files[relativePath] }), cached.identity == identity {
            return cached
        }
        // Read outside the lock; two requests racing on a miss both read, which is harmless.
        guard let data = FileManager.default.contents(atPath: path) else { return nil }
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
}
