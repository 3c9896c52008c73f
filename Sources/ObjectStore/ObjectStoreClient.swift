import CurlHTTP
import Foundation
#if canImport(FoundationXML)
import FoundationXML
#endif

/// One object as a listing or HEAD shows it.
public struct StoredObject: Sendable, Equatable {
    public var key: String
    public var size: Int
    /// Without quotes. For a single-part upload without KMS encryption (what sync does), the
    /// hex MD5 of the bytes on S3, MinIO and moto alike.
    public var etag: String
}

/// What a HEAD shows of an object's headers.
public struct ObjectHeaders: Sendable, Equatable {
    public var size: Int
    public var etag: String
    public var contentType: String?
    public var cacheControl: String?
}

/// The object store operations sync needs (S3 REST API, path-style or virtual-hosted), signed
/// with SigV4 by libcurl. A request whose connection failed in a way that may pass (refused, cut
/// or stalled part-way) or that the service answered 500, 502, 503 or 504 is tried again, at most
/// ``retry``'s attempts: a sync makes hundreds of requests and must not fail, and start over, for
/// one lost connection. A request that ran out its whole ``timeout`` (bytes trickling all along)
/// is not: tried again it would hold the sync, and the publication lock, that long again. Every operation is safe to repeat (a PUT of the same bytes, a DELETE of
/// an object already gone). A store that stays unreachable fails the sync after them, with the
/// last reason; sync as a whole is idempotent and is run again (`serve` at its back-off).
public struct ObjectStoreClient: Sendable {
    public let location: ObjectStoreLocation
    /// Asked before each request: temporary credentials are renewed behind a long-running server
    /// (a credentials file rewritten every hour), and a client built at its start would sign with
    /// expired ones until restarted.
    let credentials: @Sendable () throws(ObjectStoreError) -> ObjectStoreCredentials
    /// Per request; a 20 MB batch over a slow uplink needs minutes.
    public var timeout: Duration
    /// Attempts per request and the waits between them (full jitter, 0.5 s doubling to 2 s).
    public var retry = RetryPolicy(maxAttempts: 3, initialDelay: .milliseconds(500), maxDelay: .seconds(2))

    public init(location: ObjectStoreLocation, credentials: ObjectStoreCredentials, timeout: Duration = .seconds(300)) throws(ObjectStoreError) {
        try self.init(location: location, timeout: timeout) { () throws(ObjectStoreError) in credentials }
    }

    /// A client with the credentials of `credentialsFile`, else of the environment. They are read
    /// now, so that missing ones stop a server before it listens; a file is read again before each
    /// request, so temporary credentials renewed by rewriting it are used without a restart.
    public init(location: ObjectStoreLocation, credentialsFile: String?, environment: [String: String],
                timeout: Duration = .seconds(300)) throws(ObjectStoreError) {
        let first = try ObjectStoreCredentials.load(file: credentialsFile, environment: environment)
        guard let file = credentialsFile else {
            try self.init(location: location, credentials: first, timeout: timeout)
            return
        }
        try self.init(location: location, timeout: timeout) { () throws(ObjectStoreError) in
            try ObjectStoreCredentials.load(file: file)
        }
    }

    /// A client that signs each request with what `credentials` returns at that moment.
    public init(location: ObjectStoreLocation, timeout: Duration = .seconds(300),
                credentials: @escaping @Sendable () throws(ObjectStoreError) -> ObjectStoreCredentials) throws(ObjectStoreError) {
        if let problem = location.problems().first { throw .invalidSettings(problem) }
        self.location = location
        self.credentials = credentials
        self.timeout = timeout
    }

    public func put(_ key: String, body: [UInt8], contentType: String, cacheControl: String) async throws(ObjectStoreError) {
        let response = try await send(
            S3Request(method: .put, url: location.url(forKey: key),
                      headers: [("Content-Type", contentType), ("Cache-Control", cacheControl)], body: body),
            operation: "upload", key: key)
        guard response.status == 200 else { throw failure(response, operation: "upload", key: key) }
    }

    /// nil when there is no such object.
    public func head(_ key: String) async throws(ObjectStoreError) -> ObjectHeaders? {
        let response = try await send(S3Request(method: .head, url: location.url(forKey: key)), operation: "read", key: key)
        if response.status == 404 { return nil }
        guard response.status == 200 else { throw failure(response, operation: "read", key: key) }
        return ObjectHeaders(
            size: Int(response.headers["content-length"] ?? "") ?? 0, etag: Self.unquoted(response.headers["etag"] ?? ""),
            contentType: response.headers["content-type"], cacheControl: response.headers["cache-control"])
    }

    /// nil when there is no such object.
    public func get(_ key: String) async throws(ObjectStoreError) -> [UInt8]? {
        let response = try await send(S3Request(method: .get, url: location.url(forKey: key)), operation: "download", key: key)
        if response.status == 404 { return nil }
        guard response.status == 200 else { throw failure(response, operation: "download", key: key) }
        return response.body
    }

    /// Deleting an absent object succeeds (S3 answers 204 either way).
    public func delete(_ key: String) async throws(ObjectStoreError) {
        let response = try await send(S3Request(method: .delete, url: location.url(forKey: key)), operation: "delete", key: key)
        guard response.status == 204 || response.status == 200 || response.status == 404 else {
            throw failure(response, operation: "delete", key: key)
        }
    }

    /// Every object whose key starts with `prefix` (ListObjectsV2, page by page; `pageSize` is
    /// the service's default of 1,000 unless a test asks for small pages).
    public func list(prefix: String, pageSize: Int? = nil) async throws(ObjectStoreError) -> [StoredObject] {
        var objects: [StoredObject] = []
        var continuation: String?
        repeat {
            var parameters = [("list-type", "2"), ("prefix", prefix)]
            if let pageSize { parameters.append(("max-keys", String(pageSize))) }
            if let continuation { parameters.append(("continuation-token", continuation)) }
            let url = location.bucketURL + "?" + S3URIEncoding.query(parameters)
            let response = try await send(S3Request(method: .get, url: url), operation: "list", key: "")
            guard response.status == 200 else { throw failure(response, operation: "list", key: "") }
            let page = try ListBucketResultParser.parse(response.body, bucket: location.bucket)
            objects += page.objects
            continuation = page.nextContinuationToken
        } while continuation != nil
        return objects
    }

    private func send(_ request: S3Request, operation: String, key: String) async throws(ObjectStoreError) -> S3Response {
        let url = request.url.prefix(while: { $0 != "?" }).description
        var random = SystemRandomNumberGenerator()
        var attempts = 0
        while true {
            attempts += 1
            let last = attempts >= retry.maxAttempts
            // Signed anew each time: with the credentials of the moment and a fresh date.
            switch await S3Transfer(request: request, region: location.region, credentials: try credentials(), timeout: timeout).perform() {
            case .answered(let response) where Self.mayPass(response.status) && !last:
                break
            case .answered(let response):
                return response
            case .failed(let reason, let mayPass):
                guard mayPass, !last else {
                    throw .transport(operation: operation, url: url, reason: attempts == 1 ? reason : "\(reason); tried \(attempts) times")
                }
            }
            do {
                try await Task.sleep(for: retry.delay(afterFailedAttempts: attempts, using: &random))
            } catch {
                throw .transport(operation: operation, url: url, reason: "cancelled")
            }
        }
    }

    /// The service's own trouble, which S3 asks clients to retry (InternalError, SlowDown, a
    /// gateway between): not a refusal that another attempt would meet again.
    static func mayPass(_ status: Int) -> Bool { [500, 502, 503, 504].contains(status) }

    /// The service's refusal, in the words of ObjectStoreError.
    private func failure(_ response: S3Response, operation: String, key: String) -> ObjectStoreError {
        let code = response.errorCode
        switch (response.status, code) {
        case (403, "InvalidAccessKeyId"), (403, "SignatureDoesNotMatch"), (403, "InvalidClientTokenId"), (403, "AuthorizationHeaderMalformed"),
             (400, "AuthorizationHeaderMalformed"), (400, "ExpiredToken"), (403, "ExpiredToken"), (403, "InvalidToken"),
             (400, "InvalidToken"), (403, "RequestTimeTooSkewed"):
            return .credentialsRejected(operation: operation, bucket: location.bucket, code: code)
        case (403, _): return .accessDenied(operation: operation, bucket: location.bucket, key: key)
        case (404, "NoSuchBucket"): return .noSuchBucket(bucket: location.bucket)
        default: return .unexpectedStatus(operation: operation, key: key, status: response.status, code: code)
        }
    }

    static func unquoted(_ etag: String) -> String { etag.trimmingCharacters(in: CharacterSet(charactersIn: "\"")) }
}

/// ListObjectsV2's XML answer: the `<Contents>` entries and the continuation token.
final class ListBucketResultParser: NSObject, XMLParserDelegate {
    struct Page {
        var objects: [StoredObject] = []
        var nextContinuationToken: String?
    }

    private var page = Page()
    private var current: [String: String]?
    private var text = ""
    private var isTruncated = false

    static func parse(_ body: [UInt8], bucket: String) throws(ObjectStoreError) -> Page {
        let delegate = ListBucketResultParser()
        let parser = XMLParser(data: Data(body))
        parser.delegate = delegate
        guard parser.parse() else {
            throw .malformedListing(bucket: bucket, detail: parser.parserError.map { "\($0)" } ?? "not XML")
        }
        // A truncated page without a token would make the caller miss objects (or loop).
        if delegate.isTruncated && delegate.page.nextContinuationToken == nil {
            throw .malformedListing(bucket: bucket, detail: "a truncated page without NextContinuationToken")
        }
        if !delegate.isTruncated { delegate.page.nextContinuationToken = nil }
        return delegate.page
    }

    func parser(_ parser: XMLParser, didStartElement name: String, namespaceURI: String?, qualifiedName: String?, attributes: [String: String] = [:]) {
        if name == "Contents" { current = [:] }
        text = ""
    }

    func parser(_ parser: XMLParser, foundCharacters string: String) { text += string }

    func parser(_ parser: XMLParser, didEndElement name: String, namespaceURI: String?, qualifiedName: String?) {
        switch name {
        case "Contents":
            if let fields = current, let key = fields["Key"] {
                page.objects.append(StoredObject(key: key, size: Int(fields["Size"] ?? "") ?? 0, etag: ObjectStoreClient.unquoted(fields["ETag"] ?? "")))
            }
            current = nil
        case "IsTruncated": isTruncated = text == "true"
        case "NextContinuationToken": page.nextContinuationToken = text
        default: current?[name] = text
        }
        text = ""
    }
}
