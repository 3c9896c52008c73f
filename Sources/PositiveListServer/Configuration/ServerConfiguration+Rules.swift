
// The submission rules as a configuration sets them. Apart from the rules themselves so that the
// request decoders and their checks build without the rest of the server (scripts/fuzz).

extension HistoryRules {
    public init(_ configuration: ServerConfiguration) {
        self.init(
            maxIDs: configuration.maxIDsPerHistory, retentionDays: configuration.retentionDays,
            clockSkewSeconds: configuration.clockSkewSeconds, maxWindowSeconds: configuration.maxWindowSeconds)
    }
}

extension KeyHistoryRules {
    public init(_ configuration: ServerConfiguration) {
        self.init(
            maxKeys: configuration.maxKeysPerHistory, retentionDays: configuration.retentionDays,
            clockSkewSeconds: configuration.clockSkewSeconds, allowedIntervals: configuration.keyIntervalsSeconds)
    }
}
