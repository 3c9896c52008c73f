import Synchronization

/// What the host has asked its controller to do with the radio at one moment: advertise (at which
/// interval), scan (which window in which interval), initiate a connection, and which links are
/// open (at which connection interval). Built by `LEHost` from the commands the controller accepted
/// and the events it reported, not from what the caller wanted.
public struct RadioUse: Sendable, Equatable {
    /// A scan or an initiation: the receiver listens for `window` at the start of every `interval`.
    public struct Listening: Sendable, Equatable {
        public var window: Duration
        public var interval: Duration

        public init(window: Duration, interval: Duration) {
            self.window = window
            self.interval = interval
        }

        /// From HCI's 0.625 ms units (LE Set Scan Parameters, LE Create Connection).
        init(windowUnits: UInt16, intervalUnits: UInt16) {
            self.init(window: .microseconds(Int64(windowUnits) * 625), interval: .microseconds(Int64(intervalUnits) * 625))
        }

        /// The share of the time the receiver is on. A window longer than its interval (which
        /// controllers refuse) counts as always on.
        var duty: Double {
            guard interval > .zero else { return 1 }
            return min(1, window / interval)
        }
    }

    /// The advertising interval while advertising is on; nil while it is off.
    public var advertisingInterval: Duration?
    public var scanning: Listening?
    public var initiating: Listening?
    /// The connection interval of each open link, by connection handle.
    public var links: [UInt16: Duration] = [:]

    public init(advertisingInterval: Duration? = nil, scanning: Listening? = nil, initiating: Listening? = nil,
                links: [UInt16: Duration] = [:]) {
        self.advertisingInterval = advertisingInterval
        self.scanning = scanning
        self.initiating = initiating
        self.links = links
    }

    /// Nothing on: no controller, or one that was asked for nothing.
    public static let idle = RadioUse()

    /// How long the receiver is taken to listen in each connection event of a link. A connection
    /// event that carries one packet each way takes about 0.75 ms on the 1M PHY (a 27-byte PDU is
    /// 296 µs, plus the 150 µs inter-frame space and the reply); the peripheral also widens its
    /// receive window for clock drift. 2 ms covers a few packets and the widening: an estimate from
    /// above, since HCI tells the host neither how many packets an event carried nor when it ended.
    public static let listeningPerConnectionEvent: Duration = .milliseconds(2)

    /// The mean of the random delay (0-10 ms) the controller adds to every advertising interval
    /// (Core Vol 6 Part B 4.4.2.2.1).
    public static let meanAdvertisingDelay: Duration = .milliseconds(5)

    /// The share of the time the receiver listens on the links' connection events.
    var linkDuty: Double {
        links.values.reduce(0) { sum, interval in
            sum + (interval > .zero ? min(1, Self.listeningPerConnectionEvent / interval) : 1)
        }
    }
}

/// The radio's time over a stretch: how long the receiver was scheduled on and for what, how long
/// and how often the node advertised, and the connections it attempted and had. Fractions are of
/// `observedSeconds`, the part of the stretch the account has seen (less than the stretch while
/// the node has not run that long).
public struct RadioTimeSummary: Sendable, Equatable, Codable {
    public var observedSeconds: Double = 0
    /// Scan windows while scanning was on, initiation windows and connection events together,
    /// never more than the time itself (a controller may scan and initiate at once).
    public var receiverSeconds: Double = 0
    public var scanningSeconds: Double = 0
    public var initiatingSeconds: Double = 0
    /// The receiver's time in connection events (`RadioUse.listeningPerConnectionEvent` each).
    public var linkListeningSeconds: Double = 0
    public var advertisingSeconds: Double = 0
    /// Advertising events (each on the three primary channels), from the interval and the mean
    /// advertising delay; rounded.
    public var advertisingEvents: Int = 0
    public var connectionAttempts: Int = 0
    /// Links that opened, in either role.
    public var connections: Int = 0
    /// Time with links open, summed over the links.
    public var linkSeconds: Double = 0

    public init() {}

    /// The share of the observed time the receiver was scheduled on; 0 before anything was observed.
    public var receiverFraction: Double { observedSeconds > 0 ? receiverSeconds / observedSeconds : 0 }
}

/// The account of the radio's time across controller sessions: every `LEHost` given it
/// (`LEHost.Configuration.radioTimeAccount`) records each change of what it asked its controller
/// to do, and the owner (the node) asks for the last hour or day. Time is read from `clock` when a
/// change is recorded, so an account fed by hosts on the same clock needs no timestamps from them.
///
/// A class, not an actor, because a host records from inside its own isolation, synchronously, in
/// the order its state changes: an `await` there would let two changes reach the account out of
/// order. The Mutex makes it safe to share.
public final class RadioTimeAccount: Sendable {
    private let ledger: Mutex<RadioTimeLedger>
    private let clock: any HostClock

    public init(clock: any HostClock = SystemHostClock()) {
        self.clock = clock
        ledger = Mutex(RadioTimeLedger(origin: clock.now))
    }

    /// What the radio does from now on. The clock is read under the lock, so that no change is
    /// stamped earlier than a summary that went before it.
    func record(_ use: RadioUse) {
        ledger.withLock { $0.record(use, at: clock.now) }
    }

    /// The radio's time over the last `stretch` (whole minutes, up to a day) before the minute
    /// under way, and that minute so far: "the last hour" covers 60 to 61 minutes.
    public func summary(over stretch: Duration) -> RadioTimeSummary {
        ledger.withLock { ledger in
            let now = clock.now
            ledger.advance(to: now)
            return ledger.summary(over: stretch, now: now)
        }
    }
}

/// The figures behind `RadioTimeAccount`, per minute for the last day: bounded memory (a bucket
/// for each minute of a day and one for the minute under way), and the hour and the day read from
/// the same buckets.
struct RadioTimeLedger {
    static let bucketLength: Duration = .seconds(60)
    static let bucketCount = 1441

    struct Bucket {
        var minute: Int = -1
        var observed: Double = 0
        var receiver: Double = 0
        var scanning: Double = 0
        var initiating: Double = 0
        var linkListening: Double = 0
        var advertising: Double = 0
        var advertisingEvents: Double = 0
        var linkSeconds: Double = 0
        var attempts = 0
        var connections = 0
    }

    let origin: ContinuousClock.Instant
    private var buckets = [Bucket](repeating: Bucket(), count: bucketCount)
    private var use = RadioUse.idle
    /// How far the current use has been counted.
    private var countedUntil: ContinuousClock.Instant

    init(origin: ContinuousClock.Instant) {
        self.origin = origin
        countedUntil = origin
    }

    mutating func record(_ next: RadioUse, at now: ContinuousClock.Instant) {
        advance(to: now)
        if next.initiating != nil, use.initiating == nil { bucket(at: now) { $0.attempts += 1 } }
        let opened = next.links.keys.filter { use.links[$0] == nil }.count
        if opened > 0 { bucket(at: now) { $0.connections += opened } }
        use = next
    }

    /// Counts the current use up to `now`, minute by minute.
    mutating func advance(to now: ContinuousClock.Instant) {
        while countedUntil < now {
            let minute = self.minute(of: countedUntil)
            let minuteEnd = origin.advanced(by: Self.bucketLength * (minute + 1))
            let end = min(now, minuteEnd)
            let seconds = countedUntil.duration(to: end) / .seconds(1)
            let use = self.use
            bucket(at: countedUntil) { bucket in
                bucket.observed += seconds
                let scanning = use.scanning?.duty ?? 0
                let initiating = use.initiating?.duty ?? 0
                let links = use.linkDuty
                bucket.scanning += seconds * scanning
                bucket.initiating += seconds * initiating
                bucket.linkListening += seconds * links
                bucket.receiver += seconds * min(1, scanning + initiating + links)
                if let interval = use.advertisingInterval {
                    bucket.advertising += seconds
                    bucket.advertisingEvents += seconds / ((interval + RadioUse.meanAdvertisingDelay) / .seconds(1))
                }
                bucket.linkSeconds += seconds * Double(use.links.count)
            }
            countedUntil = end
        }
    }

    func summary(over stretch: Duration, now: ContinuousClock.Instant) -> RadioTimeSummary {
        let minutes = max(1, min(Self.bucketCount - 1, Int((stretch / Self.bucketLength).rounded(.up))))
        let last = minute(of: now)
        var summary = RadioTimeSummary()
        var events = 0.0
        for bucket in buckets where bucket.minute >= 0 && bucket.minute >= last - minutes && bucket.minute <= last {
            summary.observedSeconds += bucket.observed
            summary.receiverSeconds += bucket.receiver
            summary.scanningSeconds += bucket.scanning
            summary.initiatingSeconds += bucket.initiating
            summary.linkListeningSeconds += bucket.linkListening
            summary.advertisingSeconds += bucket.advertising
            events += bucket.advertisingEvents
            summary.linkSeconds += bucket.linkSeconds
            summary.connectionAttempts += bucket.attempts
            summary.connections += bucket.connections
        }
        summary.advertisingEvents = Int(events.rounded())
        // To the millisecond: finer is noise, and the status file that carries the figures must
        // stay within its block (`NodeStatusRecorder.block`), so no figure runs to 17 digits.
        for field in [\RadioTimeSummary.observedSeconds, \.receiverSeconds, \.scanningSeconds, \.initiatingSeconds,
                      \.linkListeningSeconds, \.advertisingSeconds, \.linkSeconds] {
            summary[keyPath: field] = (summary[keyPath: field] * 1000).rounded() / 1000
        }
        return summary
    }

    /// In whole seconds, so that the end of an instant's minute is always after it (a division of
    /// durations in floating point can land just below a whole minute, and `advance` then stalls).
    private func minute(of instant: ContinuousClock.Instant) -> Int {
        Int(origin.duration(to: instant).components.seconds / Self.bucketLength.components.seconds)
    }

    /// The bucket of `instant`'s minute, emptied first when it last held a minute a day older.
    private mutating func bucket(at instant: ContinuousClock.Instant, _ change: (inout Bucket) -> Void) {
        let minute = minute(of: instant)
        let index = minute % Self.bucketCount
        if buckets[index].minute != minute { buckets[index] = Bucket(minute: minute) }
        change(&buckets[index])
    }
}
