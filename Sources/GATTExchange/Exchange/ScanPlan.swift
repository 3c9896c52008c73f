import BLEHost

/// How much of its time a node's receiver listens for peers, chosen from the discovery bound.
///
/// The bound: every advertising event goes out on all three primary channels, one advertising
/// interval plus a random delay of 0-10 ms after the last (Core 5.4, Vol 6, Part B, 4.4.2.2.1).
/// A scanner that listens without a break for one interval plus 10 ms therefore hears every peer
/// in range that advertises at that interval, whichever channel it listens on; listening longer in
/// one go buys nothing, and listening in pieces (a 30 ms window every 60 ms) buys less. So a burst
/// is one unbroken window of `ExchangeConfiguration.discoveryWindow` (270 ms against peers
/// advertising every 250 ms, as Tracer nodes do), and the pause between bursts sets both the cost
/// and the time to discovery: a peer in range is heard within one burst and pause.
///
/// | plan            | burst, pause (mean)     | receiver on | heard within (one node, worst) |
/// |-----------------|-------------------------|-------------|--------------------------------|
/// | `standard`      | 270 ms, 16 s (±25 %)    | 1.7 %       | 20.3 s                         |
/// | `lowPower`      | 270 ms, 32 s (±25 %)    | 0.84 %      | 40.3 s                         |
/// | `minuteBursts`  | 10 s at 30/60 ms, 50 s  | 8.3 %       | 72.5 s                         |
/// | `continuous`    | no pause                | 100 %       | 0.27 s                         |
///
/// Two nodes each hear the other, so a pair meets at the earlier of their bursts; the connection
/// (and the wait for the peer to make the first move, `deferToPeerDelay`) comes on top, and while
/// candidates wait a burst goes on (`scanBurstExtension`): near peers the attempt, not the scan,
/// costs the time. `minuteBursts` is the schedule before issue 40, kept to compare against.
public enum ScanPlan: String, CaseIterable, Sendable {
    case standard
    case lowPower = "low-power"
    case continuous
    case minuteBursts = "minute-bursts"

    /// Sets the scan burst, its pause and the scanner's window and interval of `configuration`.
    public func apply(to configuration: inout ExchangeConfiguration) {
        let window = configuration.discoveryWindow
        switch self {
        case .standard:
            configuration.setShortBursts(window: window, pause: .seconds(16))
        case .lowPower:
            configuration.setShortBursts(window: window, pause: .seconds(32))
        case .continuous:
            configuration.scanOnTime = window
            configuration.scanOffTime = .zero
            configuration.radio.setUnbrokenScanWindow(window)
            configuration.scannerRestsUntilTurns = false
            configuration.deferToPeerDelay = ExchangeConfiguration.deferWhileBothListen
        case .minuteBursts:
            configuration.scanOnTime = .seconds(10)
            configuration.scanOffTime = .seconds(50)
            configuration.radio.scanInterval = 0x0060
            configuration.radio.scanWindow = 0x0030
            configuration.scannerRestsUntilTurns = false
            configuration.deferToPeerDelay = ExchangeConfiguration.deferWhileBothListen
        }
    }
}

extension ExchangeConfiguration {
    /// Bursts of one unbroken `window` with a mean `pause`; the scanner rests while candidates wait
    /// for their turn, and the side of a pair that does not go first (`InitiatorRule`) leaves the
    /// other its longest pause, a burst, its initiation spread and a connection's time to do so.
    /// With bursts this short the two sides rarely hear each other at the same moment, so a wait
    /// of 2.5 s (enough where bursts last seconds and overlap) mostly ended before the side that
    /// goes first had heard anyone, and both sides connected: in a 20-node crowd of strict
    /// controllers with ids every 60 s, 68 failed connections and 37 controller resets per node in
    /// 10 minutes, against 4 and 2 with minute bursts.
    mutating func setShortBursts(window: Duration, pause: Duration) {
        scanOnTime = window
        scanOffTime = pause
        radio.setUnbrokenScanWindow(window)
        scannerRestsUntilTurns = true
        deferToPeerDelay = longestScanCycle + initiationSpread + connectionTimeout
    }
}

extension LEHost.Configuration {
    /// Scans without a break: window and interval of `length` (in 0.625 ms units, rounded up), so
    /// that each channel is listened to for one whole discovery window before the next.
    mutating func setUnbrokenScanWindow(_ length: Duration) {
        let units = UInt16(clamping: Int((length / .microseconds(625)).rounded(.up)))
        scanInterval = min(max(units, 0x0004), 0x4000)
        scanWindow = scanInterval
    }
}
