/// Where the published files go: an S3-compatible endpoint, a bucket in it, and an optional key
/// prefix, so that one bucket can hold several lists (or other things) side by side.
public struct ObjectStoreLocation: Sendable, Equatable {
    /// The service's base URL, e.g. `https://s3.eu-central-1.amazonaws.com` or `http://127.0.0.1:9000`.
    public var endpoint: String
    public var bucket: String
    /// The SigV4 signing region (`us-east-1` for most S3-compatible servers that ignore it).
    public var region: String
    /// Prepended to every object key, e.g. `tracer/`; empty puts the files at the bucket's root.
    public var keyPrefix: String
    /// `endpoint/bucket/key` rather than `bucket.endpoint/key`. MinIO, Ceph RGW and moto are
    /// usually addressed path-style; AWS prefers virtual-hosted style for new buckets.
    public var pathStyle: Bool

    public init(endpoint: String, bucket: String, region: String = "us-east-1", keyPrefix: String = "", pathStyle: Bool = true) {
        self.endpoint = endpoint.hasSuffix("/") ? String(endpoint.dropLast()) : endpoint
        self.bucket = bucket
        self.region = region
        self.keyPrefix = keyPrefix
        self.pathStyle = pathStyle
    }

    /// The full object key of a published file's relative path (`log/checkpoint`, `log/tile/0/000`).
    public func key(for relativePath: String) -> String { keyPrefix + relativePath }

    /// The bucket's own URL (for ListObjectsV2), ending in "/".
    public var bucketURL: String {
        if pathStyle { return endpoint + "/" + bucket + "/" }
        guard let schemeEnd = endpoint.range(of: "://") else { return endpoint + "/" + bucket + "/" }
        return endpoint[..<schemeEnd.upperBound] + bucket + "." + endpoint[schemeEnd.upperBound...] + "/"
    }

    /// The URL of the object `key`; each path segment percent-encoded as SigV4 expects.
    public func url(forKey key: String) -> String {
        bucketURL + key.split(separator: "/", omittingEmptySubsequences: false).map { S3URIEncoding.encode(String($0)) }.joined(separator: "/")
    }

    /// The URL a node fetches the list from when the bucket is public (path-style or virtual-hosted
    /// like `bucketURL`, with the prefix): what `tracer` is configured with when no CDN is in front.
    public var publicListURL: String { bucketURL + keyPrefix }

    /// The settings' own problems, as plain sentences, before any request is made.
    public func problems() -> [String] {
        var found: [String] = []
        let scheme = endpoint.prefix(while: { $0 != ":" }).lowercased()
        if scheme != "http" && scheme != "https" { found.append("endpoint must be an http or https URL (it is \"\(endpoint)\")") }
        // S3's own rules for bucket names (3 to 63 lowercase letters, digits, dots and hyphens).
        let allowed = Set("abcdefghijklmnopqrstuvwxyz0123456789.-")
        if !(3...63).contains(bucket.count) || !bucket.allSatisfy(allowed.contains) {
            found.append("bucket must be 3 to 63 lowercase letters, digits, dots or hyphens (it is \"\(bucket)\")")
        }
        if region.isEmpty || region.contains(":") { found.append("region must be a region name such as us-east-1") }
        if keyPrefix.hasPrefix("/") { found.append("keyPrefix must not start with \"/\"") }
        // Nodes fetch BASE_URL/log/checkpoint, so the prefix must be a folder of its own.
        if !keyPrefix.isEmpty && !keyPrefix.hasSuffix("/") {
            found.append("keyPrefix must be empty or end in \"/\" (it is \"\(keyPrefix)\"), since nodes fetch BASE_URL/log/checkpoint")
        }
        return found
    }
}

/// Percent-encoding as SigV4 canonicalizes it: every byte but A-Z a-z 0-9 - _ . ~ as %XX, in
/// upper case. URLs are built already encoded this way, so libcurl's canonical form is the URL itself
/// whether or not this libcurl version normalizes it (7.88 does not normalize query strings).
enum S3URIEncoding {
    static func encode(_ text: String) -> String {
        var result = ""
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                 UInt8(ascii: "-"), UInt8(ascii: "_"), UInt8(ascii: "."), UInt8(ascii: "~"):
                result.unicodeScalars.append(Unicode.Scalar(byte))
            default:
                let hex = Array("0123456789ABCDEF".utf8)
                result += "%" + String(decoding: [hex[Int(byte >> 4)], hex[Int(byte & 15)]], as: UTF8.self)
            }
        }
        return result
    }

    /// A query string with its parameters sorted by name, as SigV4's canonical query requires.
    static func query(_ parameters: [(String, String)]) -> String {
        parameters.map { (encode($0.0), encode($0.1)) }.sorted { $0.0 < $1.0 }.map { "\($0.0)=\($0.1)" }.joined(separator: "&")
    }
}
