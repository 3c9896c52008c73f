public struct HTTPClientConfiguration: Sendable {
    /// Limit for DNS, TCP and TLS set-up of one attempt.
    public var connectTimeout: Duration
    /// The overall limit of one attempt is baseTimeout plus the expected byte count at
    /// minimumTransferRate.
    public var baseTimeout: Duration
    /// Bytes per second. Also aborts a transfer that stays below this rate for lowSpeedTime
    /// (a stalled server), whatever the overall limit.
    public var minimumTransferRate: Int
    /// Rounded up to whole seconds, which is what libcurl takes.
    public var lowSpeedTime: Duration
    /// `perform` throws responseTooLarge for a longer body; use `download` for big files.
    public var maxInMemoryResponseBytes: Int
    /// How much of a non-2xx body `download` keeps for the caller.
    public var maxErrorBodyBytes: Int
    /// CURLOPT_PINNEDPUBLICKEY, e.g. "sha256//BASE64" (several joined with ";").
    public var pinnedPublicKey: String?
    /// A PEM file of trusted CAs; nil uses the system CA store (libcurl's default).
    public var caBundlePath: String?
    public var retry: RetryPolicy
    public var userAgent: String
    /// Redirects to http or https only.
    public var maxRedirects: Int

    public init(
        connectTimeout: Duration = .seconds(5),
        baseTimeout: Duration = .seconds(30),
        minimumTransferRate: Int = 32 * 1024,
        lowSpeedTime: Duration = .seconds(15),
        maxInMemoryResponseBytes: Int = 64 << 20,
        maxErrorBodyBytes: Int = 64 << 10,
        pinnedPublicKey: String? = nil,
        caBundlePath: String? = nil,
        retry: RetryPolicy = RetryPolicy(),
        userAgent: String = "tracer/0.1",
        maxRedirects: Int = 3
    ) {
        self.connectTimeout = connectTimeout
        self.baseTimeout = baseTimeout
        self.minimumTransferRate = minimumTransferRate
        self.lowSpeedTime = lowSpeedTime
        self.maxInMemoryResponseBytes = maxInMemoryResponseBytes
        self.maxErrorBodyBytes = maxErrorBodyBytes
        self.pinnedPublicKey = pinnedPublicKey
        self.caBundlePath = caBundlePath
        self.retry = retry
        self.userAgent = userAgent
        self.maxRedirects = maxRedirects
    }

    /// The overall limit of one attempt for a body of `expectedByteCount` bytes.
    public func overallTimeout(expectedByteCount: Int?) -> Duration {
        guard let expected = expectedByteCount, expected > 0, minimumTransferRate > 0 else { return baseTimeout }
        // Whole seconds in integers (a hostile index entry may be near Int.max), the rest in Double.
        let seconds = expected / minimumTransferRate
        let fraction = Double(expected % minimumTransferRate) / Double(minimumTransferRate)
        return baseTimeout + .seconds(seconds) + .seconds(fraction)
    }
}
