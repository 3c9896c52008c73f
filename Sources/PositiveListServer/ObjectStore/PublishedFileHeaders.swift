/// The Content-Type and Cache-Control each published file gets in the object store: the values
/// deploy/nginx/tracer-server.conf gives the same files (a test compares them), so that a CDN in
/// front of the bucket caches exactly as one in front of nginx would.
public enum PublishedFileHeaders {
    /// nginx's `default_type` with an empty `types {}`: the files are opaque signed binaries.
    public static let contentType = "application/octet-stream"
    /// Nodes fetch the indexes on every check: cacheable briefly, so a new batch shows within a minute.
    public static let indexCacheControl = "public, max-age=60"
    /// Batches never change once published.
    public static let batchCacheControl = "public, max-age=31536000, immutable"
}
