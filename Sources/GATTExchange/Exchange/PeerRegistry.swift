import BLEHost
import TracerCore

/// What the node remembers about nearby advertisers: which address belongs to which learned id,
/// which ones it already exchanged with, and which ones keep failing. Plain state, no I/O.
///
/// A peer changes its address in the same step as its id, so an address maps to one id for as
/// long as it is heard; a new address means a new id, worth a new exchange. So does a new address
/// of ours: the peer still has to learn our new id, so an exchange is owed per pair of addresses.
public struct PeerRegistry: Sendable {
    public struct Entry: Sendable, Equatable {
        public var learnedID: UserID?
        /// Our address when the exchange that taught `learnedID` took place.
        public var learnedAs: BluetoothAddress?
        public var lastHeard: ContinuousClock.Instant
        public var consecutiveFailures = 0
        public var retryAfter: ContinuousClock.Instant?
        public var isConnecting = false
        /// When we may first connect to the peer (`ProximityExchange.initiationDelay`), decided at
        /// its first hearing from `turnAs`, our address then.
        public var turn: ContinuousClock.Instant?
        public var turnAs: BluetoothAddress?
    }

    private var entries: [BluetoothAddress: Entry] = [:]
    private let configuration: ExchangeConfiguration
    /// The address we advertise and connect from now.
    public private(set) var ourAddress: BluetoothAddress?

    public init(configuration: ExchangeConfiguration) { self.configuration = configuration }

    public func entry(_ address: BluetoothAddress) -> Entry? { entries[address] }
    public var count: Int { entries.count }

    /// Records that `address` was heard; returns the id learned from it, if any.
    public mutating func heard(_ address: BluetoothAddress, at now: ContinuousClock.Instant) -> UserID? {
        entries[address, default: Entry(lastHeard: now)].lastHeard = now
        return entries[address]?.learnedID
    }

    /// We changed address (with our id): every peer is owed our new id.
    public mutating func weMoved(to address: BluetoothAddress) {
        ourAddress = address
    }

    /// Peers heard since `cutoff` other than `address`: how many might answer its advertising too.
    public func othersHeard(since cutoff: ContinuousClock.Instant, besides address: BluetoothAddress) -> Int {
        entries.reduce(0) { count, element in count + (element.key != address && element.value.lastHeard >= cutoff ? 1 : 0) }
    }

    /// Whether other initiators may be about to answer `address`'s advertising as well: some other
    /// peer heard since `cutoff`. A newcomer (an address heard for the first time) may itself be
    /// one of those, moved to a new address with its new id, so for a newcomer a single other
    /// makes no crowd: two nodes alone, one of which just rotated, meet at once instead of
    /// drawing a spread of up to 2 s against a crowd of one.
    public func mayBeCrowded(around address: BluetoothAddress, newcomer: Bool, since cutoff: ContinuousClock.Instant) -> Bool {
        othersHeard(since: cutoff, besides: address) > (newcomer ? 1 : 0)
    }

    /// True when a connection to `address` is worth trying now: no exchange with it from our
    /// current address yet, no attempt under way, and not backing off after failures.
    public func shouldConnect(to address: BluetoothAddress, at now: ContinuousClock.Instant) -> Bool {
        guard let entry = entries[address] else { return true }
        if entry.isConnecting { return false }
        if entry.learnedID != nil, entry.learnedAs == ourAddress { return false }
        if let retryAfter = entry.retryAfter, now < retryAfter { return false }
        return true
    }

    /// When we may first connect to `address` from our current address, if that was decided and
    /// no link with it has opened since (`connecting(to:at:)`). A
    /// peer heard again in a later scan burst keeps its turn instead of drawing a new delay: a
    /// node whose scanner rests until a deferred peer's turn would otherwise defer to it again at
    /// every return, and meet it only when the peer made the first move.
    public func turn(of address: BluetoothAddress) -> ContinuousClock.Instant? {
        guard let entry = entries[address], entry.turnAs == ourAddress else { return nil }
        return entry.turn
    }

    public mutating func setTurn(of address: BluetoothAddress, to turn: ContinuousClock.Instant) {
        entries[address, default: Entry(lastHeard: turn)].turn = turn
        entries[address]?.turnAs = ourAddress
    }

    /// A link with `address` is opening or open, in either direction: no second one. The turn
    /// is spent: a retry after a failure, or after a link that closed without an id, draws its
    /// delay anew, so that the two sides do not retry in step.
    public mutating func connecting(to address: BluetoothAddress, at now: ContinuousClock.Instant) {
        entries[address, default: Entry(lastHeard: now)].isConnecting = true
        entries[address]?.turn = nil
    }

    /// A link the peer opened to us closed; unless it wrote its id, we may connect to it later.
    public mutating func linkClosed(_ address: BluetoothAddress) {
        entries[address]?.isConnecting = false
    }

    /// An exchange with the peer at `address` completed (we read its id, or it wrote it to us):
    /// no further connection to that address.
    public mutating func learned(_ id: UserID, at address: BluetoothAddress, now: ContinuousClock.Instant) {
        var entry = entries[address] ?? Entry(lastHeard: now)
        entry.learnedID = id
        entry.learnedAs = ourAddress
        entry.isConnecting = false
        entry.consecutiveFailures = 0
        entry.retryAfter = nil
        entries[address] = entry
    }

    /// An exchange failed: back off from this address, exponentially, up to the cap.
    public mutating func failed(_ address: BluetoothAddress, at now: ContinuousClock.Instant) {
        var entry = entries[address] ?? Entry(lastHeard: now)
        entry.isConnecting = false
        entry.consecutiveFailures += 1
        let factor = 1 << min(entry.consecutiveFailures - 1, 20)
        entry.retryAfter = now + min(configuration.failureBackoffBase * factor, configuration.failureBackoffCap)
        entries[address] = entry
    }

    /// Forgets addresses not heard since `cutoff`: peers that left, or changed address with
    /// their id. Learned ids otherwise outlive our own rotations: the peer's id has not changed,
    /// so its sightings keep being filed, now under our new window, and one exchange from our new
    /// address (whichever side starts it) gives the peer our new id.
    public mutating func forget(olderThan cutoff: ContinuousClock.Instant) {
        entries = entries.filter { $0.value.lastHeard >= cutoff || $0.value.isConnecting }
    }
}
