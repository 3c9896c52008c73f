public struct DownloadProgress: Sendable, Equatable {
    public var receivedBytes: Int64
    /// nil while the server has not said how long the body is.
    public var totalBytes: Int64?

    public init(receivedBytes: Int64, totalBytes: Int64?) {
        self.receivedBytes = receivedBytes
        self.totalBytes = totalBytes
    }
}
