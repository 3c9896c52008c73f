/// How often and how eagerly a node advertises, scans and connects.
///
/// The defaults aim at a battery-powered node that still catches a contact within a minute:
/// - advertising every 250 ms (GAEN advertises every 200-270 ms);
/// - scanning in bursts, 10 s on and 50 s off (OpenTrace scans 8-10 s a minute), with a 30 ms
///   window every 60 ms while on;
/// - at most 2 outgoing connections at once, each given 6 s to form.
/// Tests and demos set `scanOffTime` to zero to scan continuously.
public struct ExchangeConfiguration: Sendable {
    /// Advertising interval, scan interval and window (while a burst is on), ATT and HCI settings.
    public var radio = LEHost.Configuration()
    public var scanOnTime: Duration = .seconds(10)
    /// Zero scans without pause.
    public var scanOffTime: Duration = .seconds(50)
    /// The TX power we report in advertisements and writes (dBm).
    public var txPower: Int8 = 0

    public var connectionTimeout: Duration {
        get { radio.connectionTimeout }
        set { radio.connectionTimeout = newValue }
    }
    public var maxOutgoingConnections = 2
    /// How long the node with the higher address waits before connecting to a newly heard peer,
    /// leaving the first move to the other (see `ProximityExchange`).
    public var deferToPeerDelay: Duration = .milliseconds(1500)
    /// A sighting older than this is not worth a connection any more.
    public var candidateLifetime: Duration = .seconds(10)
    /// An exchange (MTU, discovery, read, write) that takes longer is abandoned.
    public var exchangeTimeout: Duration = .seconds(8)

    /// Incoming links are closed after this long, exchange or not: an honest exchange takes well
    /// under a second, and a peer that holds a link would otherwise block us.
    public var incomingLinkLifetime: Duration = .seconds(10)
    public var maxIncomingConnections = 4

    /// Backoff after failed exchanges with one address: base × 2^(failures - 1), capped.
    public var failureBackoffBase: Duration = .seconds(2)
    public var failureBackoffCap: Duration = .seconds(120)
    /// Addresses not heard for this long are forgotten.
    public var peerMemory: Duration = .seconds(1800)

    public init() {}
}
