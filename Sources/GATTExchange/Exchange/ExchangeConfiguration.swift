import BLEHost

/// How often and how eagerly a node advertises, scans and connects.
///
/// The defaults aim at a battery-powered node that still catches a contact within seconds:
/// - advertising every 250 ms (GAEN advertises every 200-270 ms);
/// - scanning by `ScanPlan.standard`: one unbroken 270 ms window (`discoveryWindow`) every 16 s on
///   average, the receiver on 1.7 % of the time, every peer in range heard within one burst and
///   pause; the pause varies by ±25 % and the rhythm survives rotations and controller resets
///   (`ScanSchedule`);
/// - at most 2 outgoing exchanges at once; a connection is given 1.5 s (six advertising intervals
///   of a Tracer node or a GAEN phone) to form, since a controller that is initiating cannot
///   accept its peers' connections on strict controllers.
/// Tests and demos scan continuously with `ExchangeConfiguration(scanPlan: .continuous)`: a plan
/// sets the burst, the pause, the scanner's window and the wait for a peer's first move together.
public struct ExchangeConfiguration: Sendable {
    /// Advertising interval, scan interval and window (while a burst is on), ATT and HCI settings.
    public var radio = LEHost.Configuration()
    /// How long a burst listens (`ScanPlan` sets it, with the pause and the scanner's window).
    public var scanOnTime: Duration = .zero
    /// Zero scans without pause.
    public var scanOffTime: Duration = .zero
    /// The least the scanner listens each time it comes on: one advertising interval of a peer that
    /// advertises as often as we do, the up-to-10 ms random delay the Core specification adds to
    /// each advertising event, and 10 ms for the controller to tune in. Unbroken, this long hears
    /// every such peer in range (`ScanPlan`); a burst cut short by the scanner coming on late, or
    /// resumed after a rotation, still listens this long.
    public var discoveryWindow: Duration { radio.advertisingPeriod + .milliseconds(20) }
    /// The longest a peer in range goes unheard between two bursts: the longest pause
    /// (`ScanSchedule.longestPause`) and a burst.
    public var longestScanCycle: Duration { scanOffTime * ScanSchedule.longestPause + scanOnTime }
    /// The TX power we report in advertisements and writes (dBm).
    public var txPower: Int8 = 0

    public var connectionTimeout: Duration {
        get { radio.connectionTimeout }
        set { radio.connectionTimeout = newValue }
    }
    /// The time given to the second request after one went unanswered. The peer was heard a moment
    /// ago and advertising is off meanwhile, so the wait is short: four advertising intervals of a
    /// Tracer node or a GAEN phone.
    public var retryTimeout: Duration = .seconds(1)
    /// No connection attempt starts this long before our id's window ends (see
    /// `ProximityExchange.isJustBeforeRotation`); whole seconds, at least the connection timeout.
    public var quietBeforeRotation: Duration = .seconds(2)
    public var maxOutgoingConnections = 2
    /// After a failed connection attempt, this long (jittered from half to all of it) without
    /// initiating, so that peers trying to connect to us get through.
    public var pauseAfterFailedConnection: Duration = .milliseconds(600)
    /// How long the node that does not go first (`InitiatorRule`) waits before connecting to a
    /// newly heard peer, leaving the first move to the other (see `ProximityExchange`): 2.5 s while
    /// scanning for seconds at a time, a whole scan cycle with short bursts (`ScanPlan`, from
    /// `initiationSpread` and `connectionTimeout` as they are when the plan is applied).
    public var deferToPeerDelay = Self.deferWhileBothListen
    /// `deferToPeerDelay` where both sides listen for seconds at a time and so hear each other at once.
    public static let deferWhileBothListen: Duration = .milliseconds(2500)
    /// A random delay between zero and this before connecting to a newly heard peer, so that
    /// nodes that hear it at the same moment do not all answer the same advertising event.
    public var initiationSpread: Duration = .seconds(2)
    /// A peer unheard for this long is not tried (see `ConnectionCandidates`). A node advertising
    /// every 250 ms is heard at each advertising event while the scanner listens unbroken (and, in
    /// minute bursts' 30 ms window every 60 ms, goes unheard for 2 s about once in 250 tries).
    public var candidateLifetime: Duration = .seconds(2)
    /// Peers heard within this long count as about when choosing the initiation spread.
    public var crowdMemory: Duration = .seconds(10)
    /// A scan burst goes on while candidates wait, for up to this much longer, so that the peers
    /// heard late in it are still heard when their turn comes.
    public var scanBurstExtension: Duration = .seconds(10)
    /// When every candidate waits for its turn (`deferToPeerDelay`, `initiationSpread`), the
    /// scanner rests instead, and the next burst begins at the first turn, to hear the peer again
    /// and connect. Waiting 2.5-4.5 s with the scanner on cost more than the bursts themselves
    /// where people come and go (residents among visitors arriving every 30 s: receiver on 3.1 %
    /// against 1.7 % for the bursts). Set by `ScanPlan` for bursts of one discovery window.
    public var scannerRestsUntilTurns = false
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

    /// How often the node checks that the controller does what it believes (`LEHost.audit`).
    public var auditInterval: Duration = .seconds(15)
    /// Advertising off for this long, whatever was tried, resets the controller.
    public var resetAfterOutage: Duration = .seconds(60)
    /// This many connection timeouts in a row, towards at least this many distinct peers heard
    /// advertising well into the attempt, with no link formed meanwhile, reset the controller (see
    /// `InitiatorHealth`).
    public var resetAfterConnectionTimeouts = (attempts: 1, peers: 1)
    /// This many connection timeouts in a row towards any peers, with no link formed in either
    /// direction, reset the controller too: the backstop when no target stays on the air. Attempts
    /// the controller refused because it still initiates one it never ended count as timeouts.
    public var resetAfterTimeoutStreak = 6

    public init(scanPlan: ScanPlan = .standard) {
        radio.connectionTimeout = .milliseconds(1500)
        scanPlan.apply(to: &self)
    }
}

/// Which side of a pair of Tracer nodes connects first. Both compute the same answer from the two
/// addresses; hashing the pair, rather than comparing addresses, spreads the work evenly across a
/// crowd (with "lower address first", the lowest address would connect to everyone).
public enum InitiatorRule {
    public static func initiates(_ ours: BluetoothAddress, toward peer: BluetoothAddress) -> Bool {
        let (low, high) = ours.description < peer.description ? (ours, peer) : (peer, ours)
        // FNV-1a over both addresses in a fixed order.
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in Array(low.description.utf8) + Array(high.description.utf8) {
            hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01B3
        }
        let lowGoesFirst = hash & 1 == 0
        return (ours == low) == lowGoesFirst
    }
}

extension Duration {
    /// A random duration between half of this one and all of it, so that nodes that failed
    /// together do not try again together.
    func jittered() -> Duration {
        self * Double.random(in: 0.5...1.0)
    }
}
