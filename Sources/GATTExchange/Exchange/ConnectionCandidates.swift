import BLEHost

/// The advertisers the node may connect to, and from when. Plain state, no I/O: `ProximityExchange`
/// feeds it sightings and takes the next candidate when its connect slot is free.
///
/// Only a peer heard in the last moments is tried. One that went unheard has left, changed
/// address, or scanning paused; trying it costs a whole connection timeout, during which a strict
/// controller accepts no one else's connection. And a connect request that the scanner could not
/// witness is dangerous (a stuck initiator, `InitiatorHealth`): if the peer leaves
/// it unanswered the controller stays stuck, refusing every peer, and the node has no sign of it.
/// In crowds on controllers that do this, a node that kept
/// trying the old addresses of peers that had reset stayed stuck that way for 80 s.
struct ConnectionCandidates {
    struct Candidate: Equatable {
        let address: BluetoothAddress
        let addressType: LEAddressType
        let rssi: Int8?
        let txPower: Int8?
        let heardAt: ContinuousClock.Instant
        /// Not tried before this: see `ProximityExchange.initiationDelay`.
        let eligibleAt: ContinuousClock.Instant
    }

    /// A candidate unheard for this long is dropped.
    let lifetime: Duration
    private var byAddress: [BluetoothAddress: Candidate] = [:]

    init(lifetime: Duration) {
        self.lifetime = lifetime
    }

    /// True while some candidate waits for its turn or a free slot.
    var isEmpty: Bool { byAddress.isEmpty }

    /// When the last candidate still waiting at `now` goes unheard for too long, if any waits.
    func lastExpiry(at now: ContinuousClock.Instant) -> ContinuousClock.Instant? {
        byAddress.values.map { $0.heardAt + lifetime }.filter { $0 > now }.max()
    }

    /// When the next candidate not yet eligible at `now` becomes eligible (while still heard), if any.
    func nextEligibility(after now: ContinuousClock.Instant) -> ContinuousClock.Instant? {
        byAddress.values.filter { $0.eligibleAt > now && $0.eligibleAt < $0.heardAt + lifetime }.map(\.eligibleAt).min()
    }

    /// When the first of the candidates still heard at `now` becomes eligible, provided none is
    /// eligible yet (all wait for their turn, none for a free slot).
    func earliestTurn(at now: ContinuousClock.Instant) -> ContinuousClock.Instant? {
        let heard = byAddress.values.filter { now - $0.heardAt < lifetime }
        guard !heard.contains(where: { $0.eligibleAt <= now }) else { return nil }
        return heard.map(\.eligibleAt).min()
    }

    /// When `address` became (or becomes) eligible, if it is a candidate.
    func eligibleAt(_ address: BluetoothAddress) -> ContinuousClock.Instant? {
        byAddress[address]?.eligibleAt
    }

    /// Adds a candidate, or refreshes one heard again (its eligibility keeps the first delay).
    /// Returns whether that changed what a waiting slot decides on: a new candidate, or one that
    /// would have gone unheard too long before its turn and now lives to see it. A refresh of a
    /// candidate still waiting for its turn only moves its expiry later, which a waiter finds when
    /// the earlier expiry's timer fires.
    @discardableResult
    mutating func offer(_ candidate: Candidate) -> Bool {
        let earlier = byAddress[candidate.address]
        let eligibleAt = earlier?.eligibleAt ?? candidate.eligibleAt
        byAddress[candidate.address] = Candidate(
            address: candidate.address, addressType: candidate.addressType, rssi: candidate.rssi,
            txPower: candidate.txPower, heardAt: candidate.heardAt, eligibleAt: eligibleAt)
        guard let earlier else { return true }
        let earlierExpiry = earlier.heardAt + lifetime
        let wasWaiting = candidate.heardAt < earlierExpiry && eligibleAt < earlierExpiry
        return !wasWaiting
    }

    mutating func remove(_ address: BluetoothAddress) {
        byAddress[address] = nil
    }

    mutating func removeAll() {
        byAddress = [:]
    }

    /// Takes the candidate whose turn came first, after dropping those unheard for too long.
    mutating func next(at now: ContinuousClock.Instant) -> Candidate? {
        byAddress = byAddress.filter { now - $0.value.heardAt < lifetime }
        guard let first = byAddress.values.filter({ $0.eligibleAt <= now }).min(by: { $0.eligibleAt < $1.eligibleAt })
        else { return nil }
        byAddress[first.address] = nil
        return first
    }
}
