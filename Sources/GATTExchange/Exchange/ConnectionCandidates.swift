/// The advertisers the node may connect to, and from when. Plain state, no I/O: `ProximityExchange`
/// feeds it sightings and takes the next candidate when its connect slot is free.
///
/// A candidate goes when it has not been heard for a while *although others have*: scanning works,
/// so the peer has left or changed address. Trying such an address costs a whole connection
/// timeout, during which a strict controller accepts no one else's connection. In crowds on
/// RootCanal it was worse: nodes that reset their controllers come back under new addresses, and a
/// node that kept trying their old ones never saw a target answer or stay, so the sign that its own
/// controller was stuck never came (it stayed stuck, and refusing every peer, for 80 s).
/// Without sightings of anyone (scanning paused between bursts) nothing is judged stale.
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

    /// A sighting older than this is not worth a connection any more, heard or not.
    let lifetime: Duration
    /// Unheard for this long while another Tracer advertiser was heard: gone.
    let staleAfter: Duration
    private var byAddress: [BluetoothAddress: Candidate] = [:]
    private var latestSighting: ContinuousClock.Instant?

    init(lifetime: Duration, staleAfter: Duration) {
        self.lifetime = lifetime
        self.staleAfter = staleAfter
    }

    var isEmpty: Bool { byAddress.isEmpty }

    /// Any Tracer advertiser was heard, a candidate or not: scanning works.
    mutating func heardSomeone(at time: ContinuousClock.Instant) {
        if latestSighting.map({ $0 < time }) ?? true { latestSighting = time }
    }

    /// When `address` became (or becomes) eligible, if it is a candidate.
    func eligibleAt(_ address: BluetoothAddress) -> ContinuousClock.Instant? {
        byAddress[address]?.eligibleAt
    }

    /// Adds a candidate, or refreshes one heard again (its eligibility keeps the first delay).
    mutating func offer(_ candidate: Candidate) {
        heardSomeone(at: candidate.heardAt)
        let eligibleAt = byAddress[candidate.address]?.eligibleAt ?? candidate.eligibleAt
        byAddress[candidate.address] = Candidate(
            address: candidate.address, addressType: candidate.addressType, rssi: candidate.rssi,
            txPower: candidate.txPower, heardAt: candidate.heardAt, eligibleAt: eligibleAt)
    }

    mutating func remove(_ address: BluetoothAddress) {
        byAddress[address] = nil
    }

    mutating func removeAll() {
        byAddress = [:]
    }

    /// Takes the candidate whose turn came first, after dropping expired and stale ones.
    mutating func next(at now: ContinuousClock.Instant) -> Candidate? {
        let staleBefore = latestSighting.map { $0 - staleAfter }
        byAddress = byAddress.filter { _, candidate in
            now - candidate.heardAt < lifetime && staleBefore.map { candidate.heardAt >= $0 } ?? true
        }
        guard let first = byAddress.values.filter({ $0.eligibleAt <= now }).min(by: { $0.eligibleAt < $1.eligibleAt })
        else { return nil }
        byAddress[first.address] = nil
        return first
    }
}
